{{/* The controller manager's name: its ServiceAccount, ClusterRole,
bindings, Deployment and pods. The Go code knows it as
install.ControllerManagerName; the chart does not rename it, so that
ClusterRoles and identities stay findable whatever the release is called. */}}
{{- define "liqo.controllerManager" -}}liqo-controller-manager{{- end -}}

{{- define "liqo.labels" -}}
app.kubernetes.io/name: liqo
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: liqo
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "liqo.selectorLabels" -}}
app.kubernetes.io/name: liqo
app.kubernetes.io/component: controller-manager
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "liqo.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* How the ServiceMonitor and the PodMonitor scrape (monitoring.yaml). */}}
{{- define "liqo.scrapeEndpoint" -}}
interval: {{ .Values.metrics.scrapeInterval }}
{{- if .Values.metrics.secure }}
scheme: https
authorization:
  type: Bearer
  credentials:
    name: liqo-metrics-scraper
    key: token
tlsConfig:
  insecureSkipVerify: true
{{- else }}
scheme: http
{{- end }}
{{- end -}}
