{{- define "makeroom.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "makeroom.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "makeroom.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "makeroom.serviceAccountName" -}}
{{- default (include "makeroom.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The namespaces each side of the scope is limited to (controller.namespaces counts for both), as
JSON: an empty list is every namespace, and the side's permissions are then cluster-wide. */}}
{{- define "makeroom.roomForNamespaces" -}}
{{- concat .Values.controller.namespaces .Values.scope.roomFor.namespaces | uniq | toJson -}}
{{- end -}}

{{- define "makeroom.moveNamespaces" -}}
{{- concat .Values.controller.namespaces .Values.scope.move.namespaces | uniq | toJson -}}
{{- end -}}

{{- define "makeroom.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "makeroom.serviceAccountName" . }}
{{- end -}}

{{/* The controller's PriorityClass: the one named in priorityClassName, else the chart's own (when
controllerPriorityClass.create), else none. */}}
{{- define "makeroom.priorityClassName" -}}
{{- if .Values.priorityClassName -}}
{{- .Values.priorityClassName -}}
{{- else if .Values.controllerPriorityClass.create -}}
{{- include "makeroom.fullname" . }}-controller
{{- end -}}
{{- end -}}

{{/* The image: image.repository is required (nothing publishes makeroom's image for you: `make image`
builds it, and you push it to your registry; docs/install.md). */}}
{{- define "makeroom.image" -}}
{{- $repo := required "image.repository: set it to where you pushed makeroom's image (make image; docs/install.md), e.g. --set image.repository=registry.example.com/makeroom" .Values.image.repository -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
