{{/* The labels Helm's release adds to every object's metadata. */}}
{{- define "llmgw.releaseLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* labels: the metadata labels of a product object; pass (dict "ctx" $ "name" "gateway" "component" "gateway"), component optional. */}}
{{- define "llmgw.labels" -}}
app.kubernetes.io/name: {{ .name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
app.kubernetes.io/part-of: llmgw
{{ include "llmgw.releaseLabels" .ctx }}
{{- end -}}

{{/* image: repository:tag of one images.* entry; pass (list $ "extproc"). */}}
{{- define "llmgw.image" -}}
{{- $ctx := index . 0 -}}
{{- $img := index $ctx.Values.images (index . 1) -}}
{{ $img.repository }}:{{ $img.tag | default $ctx.Chart.AppVersion }}
{{- end -}}

{{/* The pod security context of every pod. */}}
{{- define "llmgw.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The security context of every container. */}}
{{- define "llmgw.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* topologySpread: spread over zones and nodes; pass the selector labels dict. */}}
{{- define "llmgw.topologySpread" -}}
{{- range list "topology.kubernetes.io/zone" "kubernetes.io/hostname" }}
- maxSkew: 1
  topologyKey: {{ . }}
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- toYaml $ | nindent 6 }}
{{- end }}
{{- end -}}

{{/* The database environment of accounting and its migrations Job. */}}
{{- define "llmgw.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.secretName }}
      key: {{ .Values.database.secretKey }}
{{- if .Values.database.tls.enabled }}
- name: PGSSLMODE
  value: {{ .Values.database.tls.sslMode }}
- name: PGSSLROOTCERT
  value: /etc/llmgw/db-ca/{{ .Values.database.tls.caKey }}
{{- end }}
{{- end -}}

{{- define "llmgw.databaseMount" -}}
{{- if .Values.database.tls.enabled }}
- name: db-ca
  mountPath: /etc/llmgw/db-ca
  readOnly: true
{{- end }}
{{- end -}}

{{- define "llmgw.databaseVolume" -}}
{{- if .Values.database.tls.enabled }}
- name: db-ca
  secret:
    secretName: {{ required "database.tls.caSecretName is required with database.tls.enabled" .Values.database.tls.caSecretName }}
    items:
      - key: {{ .Values.database.tls.caKey }}
        path: {{ .Values.database.tls.caKey }}
{{- end }}
{{- end -}}

{{/* The egress rule to kube-dns that every pod has. */}}
{{- define "llmgw.dnsEgress" -}}
- to:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: kube-system
      podSelector:
        matchLabels:
          k8s-app: kube-dns
  ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end -}}
