{{- define "runwatch.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "runwatch.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "runwatch.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "runwatch.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "runwatch.kafka" -}}
{{- required "kafka.bootstrap is required: the bootstrap servers of your Kafka, e.g. --set kafka.bootstrap=kafka.kafka.svc:9092" .Values.kafka.bootstrap -}}
{{- end -}}

{{- /*
Kafka TLS / SASL, for every container that talks to Kafka (worker, sink, notify): the
RUNWATCH_KAFKA_* variables `runwatch` reads (emitters/kafka_security.py), and the Secrets
they point into, mounted read-only. Credentials come only from existing Secrets: the
username by secretKeyRef, the password and the TLS files as mounted files.
*/ -}}
{{- define "runwatch.kafkaSecurity.check" -}}
{{- $k := .Values.kafka -}}
{{- if and $k.sasl.enabled (not $k.sasl.existingSecret.name) -}}
{{- fail "kafka.sasl.existingSecret.name is required when kafka.sasl.enabled: the name of a Secret holding the SASL username and password (kubectl create secret generic kafka-sasl --from-literal=username=... --from-file=password=...)" -}}
{{- end -}}
{{- if and $k.tls.enabled (not $k.tls.caSecret.name) (not $k.tls.useSystemCAs) -}}
{{- fail "kafka.tls.caSecret.name is required when kafka.tls.enabled: the name of a Secret holding the CA certificate that signed the brokers' (kubectl create secret generic kafka-ca --from-file=ca.crt=...), or set kafka.tls.useSystemCAs=true for publicly trusted brokers" -}}
{{- end -}}
{{- if and $k.tls.clientCertSecret.name (not $k.tls.enabled) -}}
{{- fail "kafka.tls.clientCertSecret is set but kafka.tls.enabled is false: mutual TLS needs TLS" -}}
{{- end -}}
{{- end -}}

{{- define "runwatch.kafkaSecurity.protocol" -}}
{{- $k := .Values.kafka -}}
{{- if $k.sasl.enabled -}}{{ ternary "SASL_SSL" "SASL_PLAINTEXT" $k.tls.enabled }}
{{- else if $k.tls.enabled -}}SSL
{{- end -}}
{{- end -}}

{{- /* env list items: the node the pod runs on (contract section 8: `src.host` names the
node; a pod's host name is the pod's own), from the downward API */ -}}
{{- define "runwatch.nodeEnv" -}}
- name: RUNWATCH_NODE
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- end -}}

{{- /* env list items (no `env:` key); empty for a plaintext Kafka */ -}}
{{- define "runwatch.kafkaSecurity.env" -}}
{{- include "runwatch.kafkaSecurity.check" . -}}
{{- $k := .Values.kafka -}}
{{- with include "runwatch.kafkaSecurity.protocol" . }}
- name: RUNWATCH_KAFKA_SECURITY_PROTOCOL
  value: {{ . }}
{{- end }}
{{- if $k.sasl.enabled }}
- name: RUNWATCH_KAFKA_SASL_MECHANISM
  value: {{ $k.sasl.mechanism }}
- name: RUNWATCH_KAFKA_SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $k.sasl.existingSecret.name }}
      key: {{ $k.sasl.existingSecret.usernameKey }}
- name: RUNWATCH_KAFKA_SASL_PASSWORD_FILE
  value: /var/run/secrets/runwatch/kafka-sasl/{{ $k.sasl.existingSecret.passwordKey }}
{{- end }}
{{- if $k.tls.enabled }}
{{- if $k.tls.caSecret.name }}
- name: RUNWATCH_KAFKA_SSL_CAFILE
  value: /var/run/secrets/runwatch/kafka-ca/{{ $k.tls.caSecret.key }}
{{- end }}
{{- with $k.tls.clientCertSecret }}{{ if .name }}
- name: RUNWATCH_KAFKA_SSL_CERTFILE
  value: /var/run/secrets/runwatch/kafka-client/{{ .certKey }}
- name: RUNWATCH_KAFKA_SSL_KEYFILE
  value: /var/run/secrets/runwatch/kafka-client/{{ .keyKey }}
{{- end }}{{ end }}
- name: RUNWATCH_KAFKA_SSL_CHECK_HOSTNAME
  value: {{ $k.tls.checkHostname | quote }}
{{- end }}
{{- end -}}

{{- /* volumeMounts list items */ -}}
{{- define "runwatch.kafkaSecurity.volumeMounts" -}}
{{- $k := .Values.kafka -}}
{{- if $k.sasl.enabled }}
- {name: kafka-sasl, mountPath: /var/run/secrets/runwatch/kafka-sasl, readOnly: true}
{{- end }}
{{- if and $k.tls.enabled $k.tls.caSecret.name }}
- {name: kafka-ca, mountPath: /var/run/secrets/runwatch/kafka-ca, readOnly: true}
{{- end }}
{{- if and $k.tls.enabled $k.tls.clientCertSecret.name }}
- {name: kafka-client, mountPath: /var/run/secrets/runwatch/kafka-client, readOnly: true}
{{- end }}
{{- end -}}

{{- /* volumes list items */ -}}
{{- define "runwatch.kafkaSecurity.volumes" -}}
{{- $k := .Values.kafka -}}
{{- if $k.sasl.enabled }}
- name: kafka-sasl
  secret:
    secretName: {{ $k.sasl.existingSecret.name }}
    items: [{key: {{ $k.sasl.existingSecret.passwordKey }}, path: {{ $k.sasl.existingSecret.passwordKey }}}]
{{- end }}
{{- if and $k.tls.enabled $k.tls.caSecret.name }}
- name: kafka-ca
  secret:
    secretName: {{ $k.tls.caSecret.name }}
    items: [{key: {{ $k.tls.caSecret.key }}, path: {{ $k.tls.caSecret.key }}}]
{{- end }}
{{- if and $k.tls.enabled $k.tls.clientCertSecret.name }}
- name: kafka-client
  secret:
    secretName: {{ $k.tls.clientCertSecret.name }}
    items:
      - {key: {{ $k.tls.clientCertSecret.certKey }}, path: {{ $k.tls.clientCertSecret.certKey }}}
      - {key: {{ $k.tls.clientCertSecret.keyKey }}, path: {{ $k.tls.clientCertSecret.keyKey }}}
{{- end }}
{{- end -}}

{{- /*
The HTTP port every long-running role serves (`runwatch worker --metrics-port`, `runwatch
sink|notify --health-port`: stream/metrics/http.py), and the probes on it: /healthz while
the role's consuming loop turns, /readyz once it holds its partitions and has caught up.
The answers come from that loop, which may be busy with a batch for a moment: hence the
timeout. (dict "port" PORT)
*/ -}}
{{- define "runwatch.httpPort" -}}
ports:
  - name: metrics
    containerPort: {{ .port }}
livenessProbe:
  httpGet: {path: /healthz, port: metrics}
  initialDelaySeconds: 10
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
readinessProbe:
  httpGet: {path: /readyz, port: metrics}
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 3
startupProbe:
  httpGet: {path: /healthz, port: metrics}
  periodSeconds: 5
  timeoutSeconds: 5
  failureThreshold: 60
{{- end -}}

{{- /*
A Service in front of a role's /metrics port, and its ServiceMonitor when
serviceMonitor.enabled. (dict "root" . "component" "sink" "port" PORT)
*/ -}}
{{- define "runwatch.metricsService" -}}
{{- $name := printf "%s-%s" (include "runwatch.fullname" .root) .component -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  labels:
    {{- include "runwatch.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  selector:
    {{- include "runwatch.selector" . | nindent 4 }}
  ports:
    - name: metrics
      port: {{ .port }}
      targetPort: metrics
{{- if .root.Values.serviceMonitor.enabled }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ $name }}
  labels:
    {{- include "runwatch.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
    {{- with .root.Values.serviceMonitor.labels }}{{ toYaml . | nindent 4 }}{{ end }}
spec:
  selector:
    matchLabels:
      {{- include "runwatch.selector" . | nindent 6 }}
  endpoints:
    - port: metrics
      path: /metrics
      interval: {{ .root.Values.serviceMonitor.interval }}
{{- end }}
{{- end -}}
