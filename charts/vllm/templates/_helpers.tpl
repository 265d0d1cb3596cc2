{{/*
Helpers of the vllm chart. Only Helm's own template functions are used, so
`helm template` renders this chart exactly as vllmctl does.
*/}}

{{/* vllm.name is the app.kubernetes.io/name label value. */}}
{{- define "vllm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* vllm.fullname names every object: the release name unless overridden. */}}
{{- define "vllm.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* vllm.chart is the helm.sh/chart label value. */}}
{{- define "vllm.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* vllm.version is the app.kubernetes.io/version label: the image tag. */}}
{{- define "vllm.version" -}}
{{- default .Chart.AppVersion .Values.image.tag | toString | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
vllm.selectorLabels never change between revisions of a release (a
Deployment's selector is immutable).
*/}}
{{- define "vllm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vllm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
vllm.podLabels go on the pod template: no chart version, so a new chart
version alone does not restart the (expensive) GPU pods.
*/}}
{{- define "vllm.podLabels" -}}
{{ include "vllm.selectorLabels" . }}
app.kubernetes.io/version: {{ include "vllm.version" . | quote }}
app.kubernetes.io/component: inference
app.kubernetes.io/managed-by: vllmctl
{{- end -}}

{{/* vllm.labels go on every object. */}}
{{- define "vllm.labels" -}}
helm.sh/chart: {{ include "vllm.chart" . }}
{{ include "vllm.podLabels" . }}
{{- end -}}

{{/* vllm.image renders repository:tag of an image values block. */}}
{{- define "vllm.image" -}}
{{- printf "%s:%s" .repository (toString .tag) -}}
{{- end -}}

{{/*
vllm.intOrString renders an int-or-string value: a percentage string quoted,
a number as an integer.
*/}}
{{- define "vllm.intOrString" -}}
{{- if kindIs "string" . -}}
{{- . | quote -}}
{{- else -}}
{{- int64 . -}}
{{- end -}}
{{- end -}}

{{/* vllm.isSet is "true" unless the value is the empty string or null. */}}
{{- define "vllm.isSet" -}}
{{- if and (not (kindIs "invalid" .)) (ne (toString .) "") -}}true{{- end -}}
{{- end -}}

{{/* vllm.modelCacheClaim is the name of the model-cache PVC. */}}
{{- define "vllm.modelCacheClaim" -}}
{{- if .Values.modelCache.persistence.existingClaim -}}
{{- .Values.modelCache.persistence.existingClaim -}}
{{- else -}}
{{- printf "%s-model-cache" (include "vllm.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
vllm.probe renders one httpGet probe on the http port from a probes.<kind>
values block.
*/}}
{{- define "vllm.probe" -}}
httpGet:
  path: {{ .path }}
  port: http
initialDelaySeconds: {{ int64 .initialDelaySeconds }}
periodSeconds: {{ int64 .periodSeconds }}
timeoutSeconds: {{ int64 .timeoutSeconds }}
{{- if hasKey . "successThreshold" }}
successThreshold: {{ int64 .successThreshold }}
{{- end }}
failureThreshold: {{ int64 .failureThreshold }}
{{- end -}}

{{/* vllm.tensorParallelSize defaults to the GPU count, at least 1. */}}
{{- define "vllm.tensorParallelSize" -}}
{{- $tp := int64 .Values.model.tensorParallelSize -}}
{{- if gt $tp 0 -}}
{{- $tp -}}
{{- else -}}
{{- max 1 (int64 .Values.resources.gpu) -}}
{{- end -}}
{{- end -}}
