{{/* hw.name is the chart name, or nameOverride. */}}
{{- define "hw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* hw.fullname prefixes the release name unless it already contains the chart name. */}}
{{- define "hw.fullname" -}}
{{- $name := include "hw.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* hw.labels are the labels of every object. */}}
{{- define "hw.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ include "hw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* hw.serviceAccountName */}}
{{- define "hw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hw.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}
