{{/* Chart name, truncated to 63 characters (DNS label). */}}
{{- define "shoal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart, unless overridden or the release already contains the chart name. */}}
{{- define "shoal.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "shoal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "shoal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "shoal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "shoal.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: scheduler
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The image: repository@digest when image.digest is set (the tag is then ignored), else
repository:tag (tag defaults to the chart's appVersion). */}}
{{- define "shoal.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{- define "shoal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "shoal.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "shoal.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{/* A CRD from files/crds/, with the chart's labels and, if crds.keep, helm's keep policy. */}}
{{- define "shoal.crd" -}}
{{- $crd := .root.Files.Get (printf "files/crds/%s" .file) | fromYaml }}
{{- $meta := $crd.metadata }}
{{- $_ := set $meta "labels" (fromYaml (include "shoal.labels" .root)) }}
{{- if .root.Values.crds.keep }}
{{- $_ := set $meta "annotations" (dict "helm.sh/resource-policy" "keep") }}
{{- end }}
{{ toYaml $crd }}
{{- end }}

{{/* The bootstrap profiles file (a YAML list of {name, spec}) from .Values.profiles; the leader
creates what is missing at start-up (shoal run --bootstrap-profiles). */}}
{{- define "shoal.profilesFile" -}}
{{- $items := list }}
{{- range .Values.profiles }}
{{- $items = append $items (dict "name" (default .schedulerName .name) "spec" (omit . "name")) }}
{{- end }}
{{- toYaml $items }}
{{- end }}
