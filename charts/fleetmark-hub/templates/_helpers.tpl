{{/* Names and labels. */}}
{{- define "fleetmark-hub.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fleetmark-hub.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fleetmark-hub.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetmark-hub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "fleetmark-hub.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "fleetmark-hub.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: hub
app.kubernetes.io/part-of: fleetmark
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "fleetmark-hub.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "fleetmark-hub.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "fleetmark-hub.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "fleetmark-hub.metricsTokenSecretName" -}}
{{- default (printf "%s-metrics" (include "fleetmark-hub.fullname" .)) .Values.metrics.token.existingSecret -}}
{{- end -}}

{{- define "fleetmark-hub.secretName" -}}
{{- default (include "fleetmark-hub.fullname" .) .Values.secret.existingSecret -}}
{{- end -}}

{{/*
The settings the chart owns, which `settings` may not set: they come from the Secret, the
chart's own mounts, or have one right value in a pod.
*/}}
{{- define "fleetmark-hub.ownedSettings" -}}
{{- list "mode" "database_url" "token_secret" "admin_token_file" "host" "port" "data_dir" "repositories_file" "git_credentials_dir" "log_format" "metrics_port" "metrics_public" "metrics_token" "metrics_token_file" "token_secret_file" "database_url_file" | toJson -}}
{{- end -}}

{{/* Environment of every hub container (the hub and the migration Job). */}}
{{- define "fleetmark-hub.baseEnv" -}}
- name: FLEETMARK_MODE
  value: production
- name: FLEETMARK_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "fleetmark-hub.secretName" . }}
      key: {{ .Values.secret.databaseUrlKey }}
- name: FLEETMARK_TOKEN_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "fleetmark-hub.secretName" . }}
      key: {{ .Values.secret.tokenSecretKey }}
- name: FLEETMARK_LOG_FORMAT
  value: {{ .Values.log.format | quote }}
{{- end -}}

{{/* Volumes every hub container writes to: HOME, /tmp and the data folder. */}}
{{- define "fleetmark-hub.scratchMounts" -}}
- name: tmp
  mountPath: /tmp
- name: home
  mountPath: /home/fleetmark
- name: data
  mountPath: /var/lib/fleetmark
{{- end -}}

{{- define "fleetmark-hub.scratchVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
- name: home
  emptyDir:
    sizeLimit: 16Mi
- name: data
  emptyDir:
    {{- with .Values.data.sizeLimit }}
    sizeLimit: {{ . }}
    {{- end }}
{{- end -}}

{{/*
A setting as its variable's text: lists as JSON, whole numbers without an exponent (Helm reads
every number as a float), the rest as written.
*/}}
{{- define "fleetmark-hub.settingValue" -}}
{{- if kindIs "slice" . -}}
{{- toJson . -}}
{{- else if and (kindIs "float64" .) (eq . (float64 (int64 .))) -}}
{{- int64 . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}
