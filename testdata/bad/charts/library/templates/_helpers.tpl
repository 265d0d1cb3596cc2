{{- define "library.name" -}}lib{{- end -}}
