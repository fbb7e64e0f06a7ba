{{/* Names, labels and the values several templates share. */}}

{{- define "platform.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "platform.fullname" -}}
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

{{- define "platform.namespace" -}}
{{- default .Release.Namespace .Values.platformNamespace }}
{{- end }}

{{- define "platform.selectorLabels" -}}
app.kubernetes.io/name: {{ include "platform.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "platform.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "platform.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: platform
{{- end }}

{{/* The ServiceAccount of a component: (list $ "controller" | "webhook" | "gateway"). */}}
{{- define "platform.serviceAccountName" -}}
{{- $root := index . 0 }}
{{- $component := index . 1 }}
{{- $name := index $root.Values.serviceAccount.names $component }}
{{- if $root.Values.serviceAccount.create }}
{{- default (printf "%s-%s" (include "platform.fullname" $root) $component) $name }}
{{- else }}
{{- required (printf "serviceAccount.names.%s is required when serviceAccount.create is false" $component) $name }}
{{- end }}
{{- end }}

{{/* The user a component's ServiceAccount authenticates as: (list $ component). */}}
{{- define "platform.serviceAccountUser" -}}
{{- printf "system:serviceaccount:%s:%s" (include "platform.namespace" (index . 0)) (include "platform.serviceAccountName" .) }}
{{- end }}

{{/* A component's Deployment name: (list $ component). */}}
{{- define "platform.componentName" -}}
{{- printf "%s-%s" (include "platform.fullname" (index . 0)) (index . 1) }}
{{- end }}

{{- define "platform.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* Services: the apiserver calls the webhooks on 443 (the operator's `service:` endpoint has no port). */}}
{{- define "platform.webhookService" -}}
{{- printf "%s-webhook" (include "platform.fullname" .) }}
{{- end }}

{{- define "platform.gatewayService" -}}
{{- printf "%s-gateway" (include "platform.fullname" .) }}
{{- end }}

{{/* Constants of the operator (src/): names it reads or writes; the chart must use the same. */}}
{{- define "platform.webhookServingSecret" -}}platform-webhook-serving{{- end }}
{{- define "platform.configSecret" -}}platform-config{{- end }}
{{- define "platform.pepperSecret" -}}platform-access-key-pepper{{- end }}
{{- define "platform.signingKeysSecret" -}}platform-token-signing-keys{{- end }}
{{- define "platform.validatingWebhookName" -}}platform-validating-webhooks{{- end }}
{{- define "platform.mutatingWebhookName" -}}platform-mutating-webhooks{{- end }}

{{- define "platform.webhookCertManager" -}}
{{- eq .Values.webhook.certificates.mode "cert-manager" }}
{{- end }}

{{/* The webhook serving Secret cert-manager writes (mounted), and its Certificate. */}}
{{- define "platform.webhookCertificateName" -}}
{{- printf "%s-webhook" (include "platform.fullname" .) }}
{{- end }}

{{/* The gateway Service's port: 80 for plain HTTP, 443 with TLS, unless set. */}}
{{- define "platform.gatewayServicePort" -}}
{{- .Values.gateway.service.port | default (ternary 80 443 (eq .Values.gateway.tls.mode "none")) }}
{{- end }}

{{- define "platform.gatewayTlsSecret" -}}
{{- if eq .Values.gateway.tls.mode "secret" }}
{{- required "gateway.tls.secretName is required with gateway.tls.mode=secret" .Values.gateway.tls.secretName }}
{{- else }}
{{- printf "%s-gateway-tls" (include "platform.fullname" .) }}
{{- end }}
{{- end }}

{{/* clientConfig of one webhook: (list $ path). */}}
{{- define "platform.webhookClientConfig" -}}
{{- $root := index . 0 }}
{{- $path := index . 1 }}
{{- if $root.Values.webhook.url }}
url: {{ printf "%s%s" (trimSuffix "/" $root.Values.webhook.url) $path | quote }}
{{- else }}
service:
  namespace: {{ include "platform.namespace" $root }}
  name: {{ include "platform.webhookService" $root }}
  port: 443
  path: {{ $path }}
{{- end }}
{{- end }}

{{/*
The gateway's external URL (issuer of direct cluster endpoint tokens): `gateway.externalURL`, else
the ingress host over HTTPS, else empty (the operator then uses the URL it listens on).
*/}}
{{- define "platform.gatewayExternalURL" -}}
{{- if .Values.gateway.externalURL -}}
{{- trimSuffix "/" .Values.gateway.externalURL -}}
{{- else if .Values.gateway.ingress.enabled -}}
https://{{ .Values.gateway.ingress.host }}
{{- end -}}
{{- end }}

{{/*
A component's Deployment: (dict "root" $ "component" name "values" its values (replicas, logLevel,
extraArgs, extraEnv, resources) "args" its flags "ports" (list (dict "name" "port")) "mounts" and
"volumes" (YAML lists, may be empty)). Every component runs the same image as its own
ServiceAccount, non-root, read-only, with no capabilities; /healthz and /readyz on the health port.
*/}}
{{- define "platform.deployment" -}}
{{- $root := .root }}
{{- $component := .component }}
{{- $values := .values }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "platform.componentName" (list $root $component) }}
  namespace: {{ include "platform.namespace" $root }}
  labels:
    {{- include "platform.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $component }}
spec:
  replicas: {{ $values.replicas }}
  revisionHistoryLimit: 5
  strategy:
    type: RollingUpdate
    rollingUpdate:
      # Never below the current count: replicas serve fail-closed webhooks, the gateway, or stand by.
      maxUnavailable: 0
      maxSurge: 1
  selector:
    matchLabels:
      {{- include "platform.selectorLabels" $root | nindent 6 }}
      app.kubernetes.io/component: {{ $component }}
  template:
    metadata:
      labels:
        {{- include "platform.selectorLabels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ $component }}
        {{- with $root.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $root.Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "platform.serviceAccountName" (list $root $component) }}
      automountServiceAccountToken: true
      enableServiceLinks: false
      terminationGracePeriodSeconds: {{ $root.Values.terminationGracePeriodSeconds }}
      {{- with $root.Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      containers:
        - name: {{ $component }}
          image: {{ include "platform.image" $root | quote }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          # isolated-vm (the syncer's patch sandbox) needs --no-node-snapshot in the process that loads it.
          command: ["node", "--no-node-snapshot", {{- range .nodeFlags }} {{ . | quote }},{{- end }} "/app/bin/platform.js"]
          args:
            - {{ $component }}
            - --namespace={{ include "platform.namespace" $root }}
            - --log-level={{ $values.logLevel }}
            - --health-port={{ $root.Values.health.port }}
            {{- range .args }}
            - {{ . }}
            {{- end }}
            {{- with $values.extraArgs }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            - name: NODE_ENV
              value: production
            {{- with $values.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: health
              containerPort: {{ $root.Values.health.port }}
              protocol: TCP
            {{- range .ports }}
            - name: {{ .name }}
              containerPort: {{ .port }}
              protocol: TCP
            {{- end }}
          startupProbe:
            httpGet:
              path: /healthz
              port: health
            periodSeconds: 2
            failureThreshold: 30
          livenessProbe:
            httpGet:
              path: /healthz
              port: health
            periodSeconds: 10
            timeoutSeconds: 3
            failureThreshold: 3
          readinessProbe:
            # Not ready until every informer cache is synced.
            httpGet:
              path: /readyz
              port: health
            periodSeconds: 5
            timeoutSeconds: 3
            failureThreshold: 3
          resources:
            {{- toYaml $values.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- with .mounts }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- with .volumes }}
        {{- . | nindent 8 }}
        {{- end }}
      {{- with $root.Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      topologySpreadConstraints:
        {{- if $root.Values.topologySpreadConstraints }}
        {{- toYaml $root.Values.topologySpreadConstraints | nindent 8 }}
        {{- else }}
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "platform.selectorLabels" $root | nindent 14 }}
              app.kubernetes.io/component: {{ $component }}
        {{- end }}
{{- end }}
