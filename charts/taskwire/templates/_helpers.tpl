{{/*
Names, labels, and the JetStream names the workers use.
*/}}

{{- define "taskwire.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "taskwire.fullname" -}}
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

{{/* Labels of every object: with the selector labels on pods, alone elsewhere. */}}
{{- define "taskwire.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "taskwire.labels" -}}
{{ include "taskwire.commonLabels" . }}
app.kubernetes.io/name: {{ include "taskwire.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Selector labels of one role: call with (dict "ctx" $ "role" "worker"). */}}
{{- define "taskwire.selectorLabels" -}}
app.kubernetes.io/name: {{ include "taskwire.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{- define "taskwire.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "taskwire.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "taskwire.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The tasks stream, as crates/bus/src/subjects.rs names it (`Subjects::tasks_stream`):
the prefix with every character other than ASCII letters and digits replaced by `_`,
upper-cased, then `_TASKS`.
*/}}
{{- define "taskwire.tasksStream" -}}
{{- printf "%s_TASKS" (regexReplaceAll "[^A-Za-z0-9]" .Values.prefix "_" | upper) }}
{{- end }}

{{/* The workers' durable consumer (`Subjects::workers_consumer`). */}}
{{- define "taskwire.workersConsumer" -}}
{{- printf "workers-%s" .Values.queue }}
{{- end }}

{{/* The port of a URL: its explicit port, else the scheme's default. */}}
{{- define "taskwire.urlPort" -}}
{{- $u := urlParse . }}
{{- $hostPort := splitList ":" $u.host }}
{{- if gt (len $hostPort) 1 }}
{{- last $hostPort }}
{{- else if has $u.scheme (list "https" "tls") }}
{{- 443 }}
{{- else if eq $u.scheme "nats" }}
{{- 4222 }}
{{- else }}
{{- 80 }}
{{- end }}
{{- end }}

{{/* Fails on settings that contradict each other. */}}
{{- define "taskwire.validate" -}}
{{- if and .Values.autoscaling.keda.enabled .Values.autoscaling.hpa.enabled }}
{{- fail "autoscaling.keda.enabled and autoscaling.hpa.enabled are both true: choose one (KEDA scales on the queue's lag, the HPA on CPU)" }}
{{- end }}
{{- if not .Values.coordinator.database.existingSecret }}
{{- fail "coordinator.database.existingSecret is empty: name the Secret that holds the Postgres URL" }}
{{- end }}
{{- end }}

{{/* Environment shared by coordinators and workers. */}}
{{- define "taskwire.commonEnv" -}}
- name: TASKWIRE_NATS_URL
  value: {{ .Values.nats.url | quote }}
- name: TASKWIRE_PREFIX
  value: {{ .Values.prefix | quote }}
- name: TASKWIRE_QUEUE
  value: {{ .Values.queue | quote }}
- name: TASKWIRE_ACK_WAIT
  value: {{ .Values.ackWait | quote }}
- name: TASKWIRE_LOG_FORMAT
  value: json
{{- if .Values.nats.requireTls }}
- name: TASKWIRE_NATS_REQUIRE_TLS
  value: "true"
{{- end }}
{{- if .Values.nats.tlsCA.existingSecret }}
- name: TASKWIRE_NATS_TLS_CA
  value: /etc/taskwire/nats-ca/{{ .Values.nats.tlsCA.key }}
{{- end }}
{{- if .Values.otel.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.otel.endpoint | quote }}
{{- end }}
{{- end }}

{{/* NetworkPolicy egress to DNS. */}}
{{- define "taskwire.dnsEgress" -}}
- ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
  {{- with .Values.networkPolicy.dnsTo }}
  to:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
