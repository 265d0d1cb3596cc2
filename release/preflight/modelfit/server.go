package modelfit

import (
	"fmt"
	"os"
	"strconv"
	"strings"

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

// serverOf reads container c's vLLM command line, ok false when it runs
// no vLLM server.
func serverOf(c corev1.Container) (Server, bool) {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	var argv []string
	for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
		argv = append(argv, expand(a, env))
	}
	argv = splitScripts(argv)
	if !runsVLLM(argv, len(c.Command) == 0) {
		return Server{}, false
	}
	flags, model := vllm.Args(argv)
	if m := flags["model"]; m != "" {
		model = m
	}
	s := Server{Container: c.Name, Model: model, Revision: flags["revision"], Flags: flags}
	s.Engine = Engine{
		TensorParallel:       flagInt(flags, "tensor-parallel-size", 1),
		PipelineParallel:     flagInt(flags, "pipeline-parallel-size", 1),
		MaxModelLen:          flagInt(flags, "max-model-len", 0),
		GPUMemoryUtilization: flagFloat(flags, "gpu-memory-utilization", 0.9),
		Dtype:                flags["dtype"],
		KVCacheDtype:         flags["kv-cache-dtype"],
		Quantization:         flags["quantization"],
	}
	if q, ok := c.Resources.Limits["nvidia.com/gpu"]; ok {
		s.GPUs = q.Value()
	} else if q, ok := c.Resources.Requests["nvidia.com/gpu"]; ok {
		s.GPUs = q.Value()
	}
	return s, true
}

// runsVLLM reports whether argv starts a vLLM OpenAI server.
func runsVLLM(argv []string, entrypoint bool) bool {
	for i, a := range argv {
		base := a[strings.LastIndex(a, "/")+1:]
		if base == "vllm" && i+1 < len(argv) && argv[i+1] == "serve" {
			return true
		}
		if strings.Contains(a, "vllm.entrypoints.openai.api_server") || strings.Contains(a, "vllm.entrypoints.api_server") {
			return true
		}
	}
	if entrypoint {
		for _, a := range argv {
			if a == "--model" || strings.HasPrefix(a, "--model=") {
				return true
			}
		}
	}
	return false
}

// expand replaces $(VAR) as the kubelet does ($$ escapes), and $VAR and
// ${VAR} of shell scripts, from env; unknown references stay.
func expand(s string, env map[string]string) string {
	s = os.Expand(strings.ReplaceAll(s, "$$", "\x00"), func(name string) string {
		if v, ok := env[name]; ok {
			return v
		}
		return "${" + name + "}"
	})
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && i+1 < len(s) && s[i+1] == '(' {
			if end := strings.IndexByte(s[i:], ')'); end > 0 {
				if v, ok := env[s[i+2:i+end]]; ok {
					b.WriteString(v)
					i += end
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return strings.ReplaceAll(b.String(), "\x00", "$")
}

// splitScripts replaces the script of `sh -c SCRIPT` (bash, /bin/sh) by
// its words, quotes removed: enough to find vLLM's flags in it.
func splitScripts(argv []string) []string {
	var out []string
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		base := a[strings.LastIndex(a, "/")+1:]
		if (base == "sh" || base == "bash") && i+2 < len(argv) && argv[i+1] == "-c" {
			out = append(out, shellWords(argv[i+2])...)
			out = append(out, argv[i+3:]...)
			return out
		}
		out = append(out, a)
	}
	return out
}

// shellWords splits a script into words at blanks, ';', '&', '|' and
// newlines, honouring single and double quotes and backslash-newline.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	in := false
	var quote byte
	flush := func() {
		if in {
			words = append(words, cur.String())
			cur.Reset()
			in = false
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == '\\' && i+1 < len(s) && s[i+1] == '\n':
			i++
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == ';' || ch == '&' || ch == '|':
			flush()
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	flush()
	return words
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
