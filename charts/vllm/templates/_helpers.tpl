{{/*
Helpers of the vllm chart. Only Helm's own template functions are used, so
`helm template` renders this chart exactly as vllmctl does.
*/}}

{{/* vllm.name is the app.kubernetes.io/name label value. */}}
{{- define "vllm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* vllm.fullname names every object: the release name unless overridden. */}}
{{- define "vllm.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* vllm.chart is the helm.sh/chart label value. */}}
{{- define "vllm.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* vllm.version is the app.kubernetes.io/version label: the image tag. */}}
{{- define "vllm.version" -}}
{{- default .Chart.AppVersion .Values.image.tag | toString | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
vllm.selectorLabels never change between revisions of a release (a
Deployment's selector is immutable).
*/}}
{{- define "vllm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vllm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
vllm.podLabels go on the pod template: no chart version, so a new chart
version alone does not restart the (expensive) GPU pods.
*/}}
{{- define "vllm.podLabels" -}}
{{ include "vllm.selectorLabels" . }}
app.kubernetes.io/version: {{ include "vllm.version" . | quote }}
app.kubernetes.io/component: inference
app.kubernetes.io/managed-by: vllmctl
{{- end -}}

{{/* vllm.labels go on every object. */}}
{{- define "vllm.labels" -}}
helm.sh/chart: {{ include "vllm.chart" . }}
{{ include "vllm.podLabels" . }}
{{- end -}}

{{/* vllm.image renders repository:tag of an image values block. */}}
{{- define "vllm.image" -}}
{{- printf "%s:%s" .repository (toString .tag) -}}
{{- end -}}

{{/*
vllm.intOrString renders an int-or-string value: a percentage string quoted,
a number as an integer.
*/}}
{{- define "vllm.intOrString" -}}
{{- if kindIs "string" . -}}
{{- . | quote -}}
{{- else -}}
{{- int64 . -}}
{{- end -}}
{{- end -}}

{{/* vllm.isSet is "true" unless the value is the empty string or null. */}}
{{- define "vllm.isSet" -}}
{{- if and (not (kindIs "invalid" .)) (ne (toString .) "") -}}true{{- end -}}
{{- end -}}

{{/* vllm.modelCacheClaim is the name of the model-cache PVC. */}}
{{- define "vllm.modelCacheClaim" -}}
{{- if .Values.modelCache.persistence.existingClaim -}}
{{- .Values.modelCache.persistence.existingClaim -}}
{{- else -}}
{{- printf "%s-model-cache" (include "vllm.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
vllm.probe renders one httpGet probe on the http port from a probes.<kind>
values block.
*/}}
{{- define "vllm.probe" -}}
httpGet:
  path: {{ .path }}
  port: http
initialDelaySeconds: {{ int64 .initialDelaySeconds }}
periodSeconds: {{ int64 .periodSeconds }}
timeoutSeconds: {{ int64 .timeoutSeconds }}
{{- if hasKey . "successThreshold" }}
successThreshold: {{ int64 .successThreshold }}
{{- end }}
failureThreshold: {{ int64 .failureThreshold }}
{{- end -}}

{{/* vllm.tensorParallelSize defaults to the GPU count, at least 1. */}}
{{- define "vllm.tensorParallelSize" -}}
{{- $tp := int64 .Values.model.tensorParallelSize -}}
{{- if gt $tp 0 -}}
{{- $tp -}}
{{- else -}}
{{- max 1 (int64 .Values.resources.gpu) -}}
{{- end -}}
{{- end -}}

{{/*
Multi-node engine groups (multiNode.nodes >= 2): each of the replicaCount
engine replicas is a group of multiNode.nodes pods, one per node, that run
one vLLM engine together (vLLM's multiprocessing backend: --nnodes,
--node-rank, --master-addr, --master-port; ranks other than 0 run
--headless). Rank 0, the leader, serves the HTTP API.
*/}}

{{/* vllm.grouped is "true" when the engine replicas are multi-node groups. */}}
{{- define "vllm.grouped" -}}
{{- if ge (int64 .Values.multiNode.nodes) 2 -}}true{{- end -}}
{{- end -}}

{{/* vllm.nodesService is the headless Service of the grouped pods. */}}
{{- define "vllm.nodesService" -}}
{{- printf "%s-nodes" (include "vllm.fullname" .) -}}
{{- end -}}

{{/*
vllm.validateMultiNode fails on values that cannot render valid groups.
*/}}
{{- define "vllm.validateMultiNode" -}}
{{- if include "vllm.grouped" . -}}
{{- $nodes := int64 .Values.multiNode.nodes -}}
{{- if .Values.autoscaling.enabled -}}
{{- fail (printf "autoscaling.enabled=true cannot be combined with multiNode.nodes=%d: a HorizontalPodAutoscaler scales pods, not multi-node groups; set autoscaling.enabled=false and size the release with replicaCount (groups)" $nodes) -}}
{{- end -}}
{{- if eq .Values.multiNode.controller "statefulset" -}}
{{- $fullname := include "vllm.fullname" . -}}
{{- $last := printf "%s-g%d" $fullname (max 0 (sub (int64 .Values.replicaCount) 1)) -}}
{{- if gt (len $last) 52 -}}
{{- fail (printf "multiNode.nodes=%d with replicaCount=%d names StatefulSets up to %q (%d characters), longer than 52 (a StatefulSet's pods carry a controller-revision-hash label of its name plus 11 characters, at most 63): shorten the release name or fullnameOverride" $nodes (int64 .Values.replicaCount) $last (len $last)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
vllm.serverArgs are the `vllm serve` arguments every server shares, one
YAML list item a line.
*/}}
{{- define "vllm.serverArgs" -}}
- "--model"
- {{ .Values.model.name | quote }}
- "--served-model-name"
- {{ default .Values.model.name .Values.model.servedModelName | quote }}
- "--host"
- "0.0.0.0"
- "--port"
- "8000"
- "--tensor-parallel-size"
- {{ include "vllm.tensorParallelSize" . | quote }}
{{- if gt (int64 .Values.model.maxModelLen) 0 }}
- "--max-model-len"
- {{ int64 .Values.model.maxModelLen | quote }}
{{- end }}
- "--gpu-memory-utilization"
- {{ .Values.model.gpuMemoryUtilization | quote }}
{{- end -}}

{{/*
vllm.groupProbe renders an exec probe of a grouped pod from a probes.<kind>
values block (.probe). On rank 0 (VLLM_NODE_RANK) it gets .probe.path from
the local server. Workers serve no HTTP: with .leader set (readiness) they
get the path from the group's leader at .leader (a shell word), so a group
is ready only while its leader serves; without it (startup, liveness) they
succeed.
*/}}
{{- define "vllm.groupProbe" -}}
{{- $p := .probe -}}
{{- $get := printf "python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=%d)'" (int64 $p.timeoutSeconds) -}}
exec:
  command:
    - /bin/sh
    - -c
    {{- if .leader }}
    - {{ printf "if [ \"$VLLM_NODE_RANK\" = 0 ]; then host=127.0.0.1; else host=%s; fi; %s \"http://$host:8000%s\"" .leader $get $p.path | quote }}
    {{- else }}
    - {{ printf "[ \"$VLLM_NODE_RANK\" != 0 ] || %s \"http://127.0.0.1:8000%s\"" $get $p.path | quote }}
    {{- end }}
initialDelaySeconds: {{ int64 $p.initialDelaySeconds }}
periodSeconds: {{ int64 $p.periodSeconds }}
timeoutSeconds: {{ int64 $p.timeoutSeconds }}
{{- if hasKey $p "successThreshold" }}
successThreshold: {{ int64 $p.successThreshold }}
{{- end }}
failureThreshold: {{ int64 $p.failureThreshold }}
{{- end -}}

{{/*
vllm.groupAffinity is the pod affinity of a grouped pod: the user's
affinity plus a required podAntiAffinity on kubernetes.io/hostname among
the pods of the same group (.groupSelector: matchLabels, and
.matchLabelKeys when the group's label value is only known at run time),
so each pod of a group gets a node of its own.
*/}}
{{- define "vllm.groupAffinity" -}}
{{- $root := .root -}}
{{- $affinity := deepCopy (default dict $root.Values.affinity) -}}
{{- $anti := deepCopy (default dict (get $affinity "podAntiAffinity")) -}}
{{- $required := default list (get $anti "requiredDuringSchedulingIgnoredDuringExecution") -}}
{{- $term := dict "labelSelector" (dict "matchLabels" .groupSelector) "topologyKey" "kubernetes.io/hostname" -}}
{{- with .matchLabelKeys }}
{{- $_ := set $term "matchLabelKeys" . -}}
{{- end }}
{{- $_ := set $anti "requiredDuringSchedulingIgnoredDuringExecution" (append $required $term) -}}
{{- $_ := set $affinity "podAntiAffinity" $anti -}}
{{- toYaml $affinity -}}
{{- end -}}

{{/*
vllm.groupPod renders the pod template (metadata and spec) of a grouped
pod. Parameters: root (the chart's context), extraLabels (added to the pod
labels), affinity (vllm.groupAffinity parameters), command (an optional
container command), args (extra server arguments after the shared ones,
before extraArgs), rankEnv (the env entry of VLLM_NODE_RANK), probes
("exec": vllm.groupProbe, readiness with leader; "http": vllm.probe),
leader.
*/}}
{{- define "vllm.groupPod" -}}
{{- $root := .root -}}
{{- $gpu := int64 $root.Values.resources.gpu -}}
{{- $params := . -}}
metadata:
  {{- with $root.Values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  labels:
    {{- include "vllm.podLabels" $root | nindent 4 }}
    {{- with .extraLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with $root.Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  terminationGracePeriodSeconds: {{ int64 $root.Values.terminationGracePeriodSeconds }}
  {{- with $root.Values.serviceAccountName }}
  serviceAccountName: {{ . }}
  {{- end }}
  {{- with $root.Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.podSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if $root.Values.weightsFetcher.enabled }}
  {{- with $root.Values.weightsFetcher }}
  initContainers:
    - name: fetch-weights
      image: {{ include "vllm.image" .image | quote }}
      imagePullPolicy: {{ .image.pullPolicy }}
      {{- with .command }}
      command:
        {{- range . }}
        - {{ . | quote }}
        {{- end }}
      {{- end }}
      {{- with .args }}
      args:
        {{- range . }}
        - {{ . | quote }}
        {{- end }}
      {{- end }}
      {{- with .env }}
      env:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      resources:
        {{- toYaml .resources | nindent 8 }}
      volumeMounts:
        - name: model-cache
          mountPath: {{ $root.Values.modelCache.mountPath }}
  {{- end }}
  {{- end }}
  containers:
    - name: server
      image: {{ include "vllm.image" $root.Values.image | quote }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      {{- with .command }}
      command:
        {{- range . }}
        - {{ . | quote }}
        {{- end }}
      {{- end }}
      args:
        {{- include "vllm.serverArgs" $root | nindent 8 }}
        {{- range .args }}
        - {{ . | quote }}
        {{- end }}
        {{- with include "vllm.drainArgs" $root }}
        {{- . | trim | nindent 8 }}
        {{- end }}
        {{- range $root.Values.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      ports:
        - name: http
          containerPort: 8000
          protocol: TCP
      env:
        {{- toYaml (list .rankEnv) | nindent 8 }}
        - name: HF_HOME
          value: {{ printf "%s/huggingface" $root.Values.modelCache.mountPath | quote }}
        {{- with $root.Values.hfToken.secretName }}
        - name: HF_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ . }}
              key: {{ $root.Values.hfToken.secretKey }}
        - name: HUGGING_FACE_HUB_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ . }}
              key: {{ $root.Values.hfToken.secretKey }}
        {{- end }}
        {{- with $root.Values.env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      resources:
        requests:
          {{- with $root.Values.resources.requests }}
          {{- if include "vllm.isSet" .cpu }}
          cpu: {{ .cpu | quote }}
          {{- end }}
          {{- if include "vllm.isSet" .memory }}
          memory: {{ .memory | quote }}
          {{- end }}
          {{- end }}
          {{- if gt $gpu 0 }}
          nvidia.com/gpu: {{ $gpu }}
          {{- end }}
        limits:
          {{- with $root.Values.resources.limits }}
          {{- if include "vllm.isSet" .cpu }}
          cpu: {{ .cpu | quote }}
          {{- end }}
          {{- if include "vllm.isSet" .memory }}
          memory: {{ .memory | quote }}
          {{- end }}
          {{- end }}
          {{- if gt $gpu 0 }}
          nvidia.com/gpu: {{ $gpu }}
          {{- end }}
      {{- with $root.Values.probes }}
      {{- if eq $params.probes "http" }}
      {{- if .startup.enabled }}
      startupProbe:
        {{- include "vllm.probe" .startup | nindent 8 }}
      {{- end }}
      {{- if .readiness.enabled }}
      readinessProbe:
        {{- include "vllm.probe" .readiness | nindent 8 }}
      {{- end }}
      {{- if .liveness.enabled }}
      livenessProbe:
        {{- include "vllm.probe" .liveness | nindent 8 }}
      {{- end }}
      {{- else }}
      {{- if .startup.enabled }}
      startupProbe:
        {{- include "vllm.groupProbe" (dict "probe" .startup) | nindent 8 }}
      {{- end }}
      {{- if .readiness.enabled }}
      readinessProbe:
        {{- include "vllm.groupProbe" (dict "probe" .readiness "leader" $params.leader) | nindent 8 }}
      {{- end }}
      {{- if .liveness.enabled }}
      livenessProbe:
        {{- include "vllm.groupProbe" (dict "probe" .liveness) | nindent 8 }}
      {{- end }}
      {{- end }}
      {{- end }}
      {{- with include "vllm.drainHook" (dict "root" $root "leader" $params.leader) }}
      {{- . | trim | nindent 6 }}
      {{- end }}
      {{- with $root.Values.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: model-cache
          mountPath: {{ $root.Values.modelCache.mountPath }}
        {{- if $root.Values.shm.enabled }}
        - name: dshm
          mountPath: /dev/shm
        {{- end }}
    {{- if $root.Values.metricsSidecar.enabled }}
    {{- with $root.Values.metricsSidecar }}
    - name: {{ .name }}
      image: {{ include "vllm.image" .image | quote }}
      imagePullPolicy: {{ .image.pullPolicy }}
      {{- with .command }}
      command:
        {{- range . }}
        - {{ . | quote }}
        {{- end }}
      {{- end }}
      {{- with .args }}
      args:
        {{- range . }}
        - {{ . | quote }}
        {{- end }}
      {{- end }}
      {{- with .env }}
      env:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      ports:
        - name: metrics
          containerPort: {{ int64 .port }}
          protocol: TCP
      resources:
        {{- toYaml .resources | nindent 8 }}
    {{- end }}
    {{- end }}
  volumes:
    - name: model-cache
      {{- if $root.Values.modelCache.persistence.enabled }}
      persistentVolumeClaim:
        claimName: {{ include "vllm.modelCacheClaim" $root }}
      {{- else if $root.Values.modelCache.emptyDirSizeLimit }}
      emptyDir:
        sizeLimit: {{ $root.Values.modelCache.emptyDirSizeLimit | quote }}
      {{- else }}
      emptyDir: {}
      {{- end }}
    {{- if $root.Values.shm.enabled }}
    - name: dshm
      emptyDir:
        medium: Memory
        sizeLimit: {{ $root.Values.shm.sizeLimit | quote }}
    {{- end }}
  {{- with $root.Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  affinity:
    {{- include "vllm.groupAffinity" .affinity | nindent 4 }}
{{- end -}}

{{/*
vllm.groupCount renders a PodDisruptionBudget count of groups as pods: an
integer (first) times the nodes of a group (second); a percentage as is.
*/}}
{{- define "vllm.groupCount" -}}
{{- $v := index . 0 -}}
{{- if kindIs "string" $v -}}
{{- $v | quote -}}
{{- else -}}
{{- mul (int64 $v) (index . 1) -}}
{{- end -}}
{{- end -}}

{{/*
vllm.drainScript is the drain hook's python3 program (the server's image
runs vLLM on python3; curl is not promised). Arguments: HOST DELAY
SECONDS. It waits DELAY seconds, then reads http://HOST:8000/metrics once
a second until vllm:num_requests_running + vllm:num_requests_waiting is
0, at most SECONDS more; a server that no longer answers (the connection
refused or not made) ends it at once, one that answers with an HTTP error
(vLLM draining) or too slowly (connected, no answer within the poll's
timeout: a loaded server) counts as busy. It reads at most 16 MiB of an
answer, bytes that are not UTF-8 replaced. It
goes to the server directly, whatever the pod's HTTP(S)_PROXY says. Rank 0
(no VLLM_NODE_RANK: a Deployment's pod) asks its own server at 127.0.0.1;
the workers of a multi-node group ask their leader, HOST, which may name
an environment variable ("$LWS_LEADER_ADDRESS"). Its first line is how
`vllmctl lint` (VL017) knows the hook and its bound, DELAY + SECONDS.
*/}}
{{- define "vllm.drainScript" -}}
# vllmctl drain hook: HOST DELAY SECONDS
import os, socket, sys, time, urllib.error, urllib.request
host, delay, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if os.environ.get("VLLM_NODE_RANK", "0") == "0":
    host = "127.0.0.1"
elif host.startswith("$"):
    host = os.environ.get(host[1:], "127.0.0.1")
end = time.monotonic() + delay + budget
time.sleep(delay)
names = ("vllm:num_requests_running", "vllm:num_requests_waiting")
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
while time.monotonic() < end:
    try:
        wait = max(0.1, min(5.0, end - time.monotonic()))
        with opener.open("http://%s:8000/metrics" % host, timeout=wait) as r:
            text = r.read(16 << 20).decode("utf-8", "replace")
    except (urllib.error.HTTPError, socket.timeout, TimeoutError):
        text = None
    except Exception:
        break
    if text is not None:
        busy = 0.0
        for line in text.splitlines():
            name = line.split("{")[0].split(" ")[0]
            if name in names:
                try:
                    busy += float(line.split()[-1])
                except ValueError:
                    pass
        if busy == 0:
            break
    time.sleep(max(0.0, min(1.0, end - time.monotonic())))
{{- end -}}

{{/*
vllm.drainHook renders the server container's lifecycle (a preStop exec
of vllm.drainScript) when drain.enabled. Parameters: root, leader (the
host workers of a multi-node group wait for; "" for a Deployment).
*/}}
{{- define "vllm.drainHook" -}}
{{- $d := .root.Values.drain -}}
{{- if $d.enabled }}
lifecycle:
  preStop:
    exec:
      command:
        - python3
        - -c
        - {{ include "vllm.drainScript" .root | quote }}
        - {{ default "127.0.0.1" .leader | quote }}
        - {{ int64 $d.delaySeconds | quote }}
        - {{ int64 $d.seconds | quote }}
{{- end }}
{{- end -}}

{{/*
vllm.drainArgs are the server arguments of drain.engineFlag: vLLM's own
drain on SIGTERM (--shutdown-timeout, vLLM >= 0.18.0), one YAML list item
a line.
*/}}
{{- define "vllm.drainArgs" -}}
{{- if and .Values.drain.enabled .Values.drain.engineFlag }}
- "--shutdown-timeout"
- {{ int64 .Values.drain.engineTimeoutSeconds | quote }}
{{- end }}
{{- end -}}
