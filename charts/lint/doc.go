// Package lint checks rendered Kubernetes objects against the rules an LLM
// inference service on GPUs should follow. It needs no cluster: it reads the
// objects a chart rendered (charts.Render) and returns findings.
//
// The rules look at the pod templates of Deployments, StatefulSets,
// DaemonSets and ReplicaSets, the worker template of LeaderWorkerSets
// (leaderworkerset.x-k8s.io), and at bare Pods. A "GPU pod" is one with a
// container requesting or limiting nvidia.com/gpu; its GPU containers are
// its "server" containers (a pod without GPUs has its first container as
// server).
//
//	VL001 error    nvidia.com/gpu is not a whole number, has no limit, or its
//	               request differs from its limit (GPUs are not
//	               overcommittable: requests must equal limits).
//	VL002 warning  a GPU pod is not Guaranteed QoS (every container needs cpu
//	               and memory limits, with requests equal to them): Burstable
//	               and BestEffort pods are evicted first.
//	VL003 warning  a GPU server container has no memory-backed emptyDir
//	               (medium: Memory) at /dev/shm; the runtime default of 64Mi
//	               breaks vLLM/NCCL inter-process communication.
//	VL004 warning  a server container has no readinessProbe (traffic reaches
//	               a pod still loading weights) or no startupProbe (slow
//	               weight loading needs its own budget).
//	VL005 warning  a GPU server container's cpu limit is below 4: throttling
//	               of tokenisation, sampling and HTTP shows up as TTFT jitter
//	               and idle GPUs.
//	VL006 warning  a container has no cpu or memory request (nor a limit that
//	               would default it): scheduling is blind and an HPA on
//	               utilisation cannot work, as it divides usage by requests.
//	VL007 error    a workload's selector is missing or does not match its
//	               pod template labels (the API server rejects it).
//	VL008 warning  a workload runs in the "default" namespace: give every
//	               project and environment its own namespace and quota.
//	VL009 warning  an image is untagged or tagged :latest (not reproducible,
//	               rollbacks do not restore the old version).
//	VL010 info     a GPU Deployment's rollout surges (maxSurge > 0): each
//	               surge pod needs spare GPUs or it stays Pending.
//	VL011 error    a vLLM container's --tensor-parallel-size ×
//	               --pipeline-parallel-size differs from its nvidia.com/gpu:
//	               fewer GPUs fail the start, more sit idle (one-pod
//	               engines; multi-node ones are VL016's).
//	VL012 error    a vLLM container with --tensor-parallel-size > 1 has no
//	               memory-backed /dev/shm of at least 1Gi: NCCL's shared
//	               memory segments live there.
//	VL013 error    --gpu-memory-utilization is not in (0, 1].
//	VL014 error    a Hugging Face token (HF_TOKEN, HUGGING_FACE_HUB_TOKEN)
//	               is a literal value (or from a ConfigMap), not a Secret's
//	               secretKeyRef: the manifest and the release record would
//	               hold it.
//	VL015 warning  a GPU server's startup probe allows less than 5 minutes
//	               (initialDelaySeconds + failureThreshold × periodSeconds)
//	               before the kubelet kills a container still loading its
//	               weights.
//	VL016 error    a vLLM engine spread over --nnodes pods (a multi-node
//	               group) has --tensor-parallel-size ×
//	               --pipeline-parallel-size other than --nnodes × the GPUs
//	               of one pod, --nnodes is not a whole number ≥ 1, or the
//	               group (a StatefulSet's replicas, a LeaderWorkerSet's
//	               size) has another number of pods. VL011 leaves such
//	               containers to VL016.
//	VL017 error    a pod's terminationGracePeriodSeconds (30 when unset)
//	               is shorter than a container's preStop hook plus vLLM's
//	               own drain after SIGTERM (--shutdown-timeout, vLLM >=
//	               0.18.0): both run inside the grace period, and the
//	               kubelet kills the server with requests in flight.
//	               Hooks whose length can be told: Kubernetes' sleep
//	               action, an exec of `sleep N`, a shell script starting
//	               with `sleep N`, the built-in chart's drain hook (delay +
//	               drain seconds). A LeaderWorkerSet's leader template is
//	               checked as well as its worker template.
//
// A "vLLM container" is one whose image, command or args mention vllm;
// its flags are read from command and args ("--name value" or
// "--name=value").
//
// The objects of a chart's subcharts are rendered with the chart
// (charts.Render) and checked like its own; with Options.Source (e.g.
// charts.Rendered.Source) every finding names the template that rendered
// its object, "mychart/charts/sub/templates/deployment.yaml" for a
// subchart's.
//
// Objects whose metadata.namespace is empty are taken to be in
// Options.Namespace (the release namespace). Findings are sorted by
// severity (errors first), then rule, object, field and message, so the
// output of Run is deterministic.
package lint
