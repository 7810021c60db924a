{{/*
Labels. Every object carries the standard app.kubernetes.io ones and helm.sh/chart; selectors use only
name and instance, since a Deployment's selector cannot change after install.
*/}}
{{- define "gpubot.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpubot.labels" -}}
{{ include "gpubot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The namespace gpubot's GPU pods, their events, its Lease and its warm schedules live in.
*/}}
{{- define "gpubot.workloadNamespace" -}}
{{ .Values.workloadNamespace | default .Release.Namespace }}
{{- end }}

{{- define "gpubot.leaseName" -}}
{{ .Values.leaderElection.leaseName | default (printf "%s-leader" .Release.Name) }}
{{- end }}

{{/*
"true" when a profile submits its runs to a Kueue LocalQueue (`queue:`): only then does gpubot watch
Kueue's objects, and only then does the chart grant reading them.
*/}}
{{- define "gpubot.kueue" -}}
{{- range $name, $profile := .Values.profiles.profiles }}{{ if $profile.queue }}true{{ end }}{{ end }}
{{- end }}
