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

{{- define "platform.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "platform.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
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
