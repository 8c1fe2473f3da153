{{- define "actiond.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "actiond.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "actiond.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Labels shared by everything; pass a dict {ctx, component}. */}}
{{- define "actiond.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: actiond
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{ include "actiond.selectorLabels" . }}
{{- end -}}

{{- define "actiond.selectorLabels" -}}
app.kubernetes.io/name: {{ include "actiond.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{/* Environment common to every role: the service's own DATABASE_URL and log level. */}}
{{- define "actiond.dbEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .secret.name }}
      key: {{ .secret.key }}
- name: RUST_LOG
  value: {{ .ctx.Values.logLevel | quote }}
{{- end -}}

{{/* The Postgres CA bundle (postgresTLS.caConfigMap), mounted read-only in every pod so that
DATABASE_URL can say sslmode=verify-full&sslrootcert=/run/actiond/postgres-ca/ca.crt. */}}
{{- define "actiond.pgCaVolume" -}}
{{- with .Values.postgresTLS.caConfigMap.name }}
- name: postgres-ca
  configMap:
    name: {{ . }}
    items:
      - key: {{ $.Values.postgresTLS.caConfigMap.key }}
        path: ca.crt
{{- end }}
{{- end -}}

{{- define "actiond.pgCaMount" -}}
{{- if .Values.postgresTLS.caConfigMap.name }}
- name: postgres-ca
  mountPath: /run/actiond/postgres-ca
  readOnly: true
{{- end }}
{{- end -}}
