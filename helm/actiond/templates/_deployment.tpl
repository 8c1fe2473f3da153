{{/*
A Deployment for one role. Args: dict
  ctx        root context
  component  api | policy | executor | web | sealer
  args       (optional) container args; default [component]
  cfg        .Values.<component>
  ports      list of dicts {name, port} besides the admin port
  env        YAML string: extra env entries
  volumes    YAML string: volumes (secret mounts) of this service only
  mounts     YAML string: volumeMounts
*/}}
{{- define "actiond.deployment" -}}
{{- $ctx := .ctx -}}
{{- $c := .component -}}
{{- $cfg := .cfg -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "actiond.fullname" $ctx }}-{{ $c }}
  labels:
    {{- include "actiond.labels" (dict "ctx" $ctx "component" $c) | nindent 4 }}
spec:
  {{- if not $cfg.autoscaling.enabled }}
  replicas: {{ $cfg.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "actiond.selectorLabels" (dict "ctx" $ctx "component" $c) | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "actiond.labels" (dict "ctx" $ctx "component" $c) | nindent 8 }}
        {{- with $ctx.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $ctx.Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "actiond.fullname" $ctx }}-{{ $c }}
      automountServiceAccountToken: false
      enableServiceLinks: false
      terminationGracePeriodSeconds: {{ $ctx.Values.terminationGracePeriodSeconds }}
      {{- with $ctx.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $ctx.Values.podSecurityContext | nindent 8 }}
      containers:
        - name: {{ $c }}
          image: {{ include "actiond.image" $ctx | quote }}
          imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
          args: {{ .args | default (list $c) | toJson }}
          securityContext:
            {{- toYaml $ctx.Values.securityContext | nindent 12 }}
          env:
            {{- include "actiond.dbEnv" (dict "ctx" $ctx "secret" $cfg.databaseUrlSecret) | nindent 12 }}
            - name: ACTIOND_{{ upper $c }}_ADMIN_LISTEN
              value: "0.0.0.0:{{ $ctx.Values.adminPort }}"
            {{- with .env }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $cfg.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            {{- range .ports }}
            - name: {{ .name }}
              containerPort: {{ .port }}
              protocol: TCP
            {{- end }}
            - name: admin
              containerPort: {{ $ctx.Values.adminPort }}
              protocol: TCP
          livenessProbe:
            httpGet: {path: /healthz, port: admin}
            {{- toYaml $ctx.Values.probes.liveness | nindent 12 }}
          readinessProbe:
            httpGet: {path: /readyz, port: admin}
            {{- toYaml $ctx.Values.probes.readiness | nindent 12 }}
          resources:
            {{- toYaml $cfg.resources | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- with (include "actiond.pgCaMount" $ctx | trim) }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with .mounts }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 16Mi
        {{- with (include "actiond.pgCaVolume" $ctx | trim) }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- with .volumes }}
        {{- . | nindent 8 }}
        {{- end }}
      {{- with $ctx.Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $ctx.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $ctx.Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}
