package modelfit

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

// Server is one container of a rendered workload that runs a vLLM
// OpenAI server, with the settings the fit needs as its command line
// gives them.
type Server struct {
	// Object is "Kind/namespace/name" of the workload.
	Object    string
	Container string
	// Pod is the workload's pod template as a pod (for the node placement
	// and the hints).
	Pod *corev1.Pod
	// Model is --model or the positional model of `vllm serve`; Revision
	// is --revision ("" : main).
	Model, Revision string
	Engine          Engine
	// GPUs is the container's nvidia.com/gpu limit (else request).
	GPUs int64
	// Flags are the vLLM flags as parsed, for the report.
	Flags map[string]string
}

// Servers finds the vLLM servers among the rendered objects: the
// containers of Deployments, StatefulSets, LeaderWorkerSets (leader and
// worker templates), Jobs and Pods whose command line runs `vllm serve`,
// the OpenAI API server module, or (no command: the image's entrypoint)
// passes --model, as the built-in chart and vllm/vllm-openai images do.
// $(VAR) references are expanded from the container's literal env, as the
// kubelet does, and `sh -c` scripts are split into words.
func Servers(objs []*unstructured.Unstructured, namespace string) []Server {
	var out []Server
	for _, o := range objs {
		for _, path := range templatePaths(o.GetKind()) {
			m, ok, _ := unstructured.NestedMap(o.Object, path...)
			if !ok {
				continue
			}
			var spec corev1.PodSpec
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec); err != nil {
				continue
			}
			ns := o.GetNamespace()
			if ns == "" {
				ns = namespace
			}
			pod := &corev1.Pod{Spec: spec}
			pod.Namespace, pod.Name = ns, o.GetName()
			for _, c := range spec.Containers {
				s, ok := serverOf(c)
				if !ok {
					continue
				}
				s.Object = fmt.Sprintf("%s/%s/%s", o.GetKind(), ns, o.GetName())
				s.Pod = pod
				out = append(out, s)
			}
		}
	}
	return out
}

// templatePaths are where a kind keeps its pod spec.
func templatePaths(kind string) [][]string {
	switch kind {
	case "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job":
		return [][]string{{"spec", "template", "spec"}}
	case "LeaderWorkerSet":
		return [][]string{{"spec", "leaderWorkerTemplate", "leaderTemplate", "spec"}, {"spec", "leaderWorkerTemplate", "workerTemplate", "spec"}}
	case "Pod":
		return [][]string{{"spec"}}
	}
	return nil
}

// serverOf reads container c's vLLM command line (vllm.ContainerCommand),
// ok false when it runs no vLLM server.
func serverOf(c corev1.Container) (Server, bool) {
	cmd := vllm.ContainerCommand(&c)
	if !cmd.Server {
		return Server{}, false
	}
	flags := cmd.Flags
	s := Server{Container: c.Name, Model: cmd.Model, Revision: flags["revision"], Flags: flags}
	s.Engine = Engine{
		TensorParallel:       flagInt(flags, "tensor-parallel-size", 1),
		PipelineParallel:     flagInt(flags, "pipeline-parallel-size", 1),
		MaxModelLen:          flagInt(flags, "max-model-len", 0),
		GPUMemoryUtilization: flagFloat(flags, "gpu-memory-utilization", 0.9),
		Dtype:                flags["dtype"],
		KVCacheDtype:         flags["kv-cache-dtype"],
		Quantization:         flags["quantization"],
	}
	if q, ok := c.Resources.Limits[vllm.GPUResource]; ok {
		s.GPUs = q.Value()
	} else if q, ok := c.Resources.Requests[vllm.GPUResource]; ok {
		s.GPUs = q.Value()
	}
	return s, true
}

// flagInt is an integer flag in 1..maxFlagInt, def when unset or out of
// range (a --tensor-parallel-size of 9e18 would overflow TP × PP).
func flagInt(flags map[string]string, name string, def int64) int64 {
	if n, err := strconv.ParseInt(flags[name], 10, 64); err == nil && n > 0 && n <= maxFlagInt {
		return n
	}
	return def
}

// maxFlagInt bounds the integer flags the fit reads: a parallel size or a
// --max-model-len of up to 2^30.
const maxFlagInt = 1 << 30

func flagFloat(flags map[string]string, name string, def float64) float64 {
	if f, err := strconv.ParseFloat(flags[name], 64); err == nil && f > 0 {
		return f
	}
	return def
}
