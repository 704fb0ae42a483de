{{/* Names and labels. */}}
{{- define "fleetmark-agent.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "fleetmark-agent.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fleetmark-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "fleetmark-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "fleetmark-agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "fleetmark-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: agent
app.kubernetes.io/part-of: fleetmark
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "fleetmark-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "fleetmark-agent.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "fleetmark-agent.tokenSecretName" -}}
{{- default (printf "%s-token" (include "fleetmark-agent.fullname" .)) .Values.token.existingSecret -}}
{{- end -}}

{{- define "fleetmark-agent.tokenSecretKey" -}}
{{- if .Values.token.existingSecret -}}
{{- .Values.token.existingSecretKey -}}
{{- else -}}
token
{{- end -}}
{{- end -}}

{{- define "fleetmark-agent.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.leaseNamespace -}}
{{- end -}}

{{/*
RBAC rules for the watched kinds: get, list and watch, and nothing else. Discovery of the
served versions needs no rule (every authenticated client may read /apis).
*/}}
{{- define "fleetmark-agent.watchRules" -}}
{{- $known := dict
  "kustomization" (list "kustomize.toolkit.fluxcd.io" "kustomizations")
  "kustomizations" (list "kustomize.toolkit.fluxcd.io" "kustomizations")
  "helmrelease" (list "helm.toolkit.fluxcd.io" "helmreleases")
  "helmreleases" (list "helm.toolkit.fluxcd.io" "helmreleases")
  "gitrepository" (list "source.toolkit.fluxcd.io" "gitrepositories")
  "gitrepositories" (list "source.toolkit.fluxcd.io" "gitrepositories")
  "ocirepository" (list "source.toolkit.fluxcd.io" "ocirepositories")
  "ocirepositories" (list "source.toolkit.fluxcd.io" "ocirepositories")
  "application" (list "argoproj.io" "applications")
  "applications" (list "argoproj.io" "applications")
-}}
{{- if not .Values.watch.kinds }}
{{- fail "watch.kinds must name at least one kind" }}
{{- end }}
{{- range .Values.watch.kinds }}
{{- $rule := get $known (lower .) }}
{{- if not $rule }}
{{- fail (printf "watch.kinds: unknown kind %q (Kustomization, HelmRelease, GitRepository, OCIRepository or Application)" .) }}
{{- end }}
- apiGroups: [{{ index $rule 0 | quote }}]
  resources: [{{ index $rule 1 | quote }}]
  verbs: ["get", "list", "watch"]
{{- end }}
{{- end -}}
