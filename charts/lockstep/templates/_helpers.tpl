{{/*
Names. The full name is capped at 40 characters so that every derived name
("<fullname>-operator", "<fullname>-probe-key", ...) stays a valid DNS label.
*/}}
{{- define "lockstep.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" }}
{{- end }}

{{- define "lockstep.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lockstep.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels shared by every object; add the component with lockstep.componentLabels. */}}
{{- define "lockstep.labels" -}}
helm.sh/chart: {{ include "lockstep.chart" . }}
{{ include "lockstep.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: lockstep
{{- end }}

{{- define "lockstep.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lockstep.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Usage: include "lockstep.componentLabels" (list . "operator") */}}
{{- define "lockstep.componentLabels" -}}
{{ include "lockstep.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{- define "lockstep.operatorSelectorLabels" -}}
{{ include "lockstep.selectorLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "lockstep.operatorServiceAccountName" -}}
{{- default (printf "%s-operator" (include "lockstep.fullname" .)) .Values.operator.serviceAccount.name }}
{{- end }}

{{- define "lockstep.agentServiceAccountName" -}}
{{- default (printf "%s-agent" (include "lockstep.fullname" .)) .Values.agent.serviceAccountName }}
{{- end }}

{{- define "lockstep.operatorImage" -}}
{{- printf "%s:%s" .Values.operator.image.repository (default .Chart.AppVersion .Values.operator.image.tag) }}
{{- end }}

{{- define "lockstep.coordinatorImage" -}}
{{- printf "%s:%s" .Values.coordinator.image.repository (default .Chart.AppVersion .Values.coordinator.image.tag) }}
{{- end }}

{{- define "lockstep.agentImage" -}}
{{- printf "%s:%s" .Values.agent.image.repository (default .Chart.AppVersion .Values.agent.image.tag) }}
{{- end }}

{{/*
Name of the Secret holding the probe key: the user's (probeKey.existingSecret)
or <fullname>-probe-key, which the operator creates when missing. The chart
renders no key material, so `helm template` output is stable.
*/}}
{{- define "lockstep.probeKeySecretName" -}}
{{- default (printf "%s-probe-key" (include "lockstep.fullname" .)) .Values.probeKey.existingSecret }}
{{- end }}

{{/* The operator's leader-election Lease (its RBAC names it). */}}
{{- define "lockstep.leaseName" -}}
{{- printf "%s-operator" (include "lockstep.fullname" .) }}
{{- end }}

{{/* Name the operator gives its metrics Service (also the Prometheus job label). */}}
{{- define "lockstep.metricsServiceName" -}}
{{- printf "%s-metrics" (include "lockstep.fullname" .) }}
{{- end }}

{{/* Whether the pod admission webhook is served: a Kubeflow kind protected and kubeflow.webhook.enabled. */}}
{{- define "lockstep.webhookEnabled" -}}
{{- if and .Values.kubeflow.webhook.enabled (or .Values.kubeflow.trainJob.enabled .Values.kubeflow.pytorchJob.enabled) -}}true{{- end -}}
{{- end -}}
