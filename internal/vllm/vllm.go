// Package vllm holds what vllmctl knows of the vLLM server that Kubernetes
// does not: the extended resource its pods request GPUs as, how its
// command line reads (Args; ContainerCommand for a container's command,
// args and env, $(VAR) and `sh -c` included) and the settings a chart may
// map to its values (ValuesMap, declared in Chart.yaml annotations). The
// watcher's failure classifier and its hints, the model-fit preflight, the
// lint rules, the capacity preflight and the diff all take these from
// here.
package vllm

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// GPUResource is the extended resource NVIDIA GPUs are requested as.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// Args parses a vLLM command line: the flags ("--name value",
// "--name=value", "-tp 2") by name without dashes and with "-" for "_"
// (tp and pp spelled out), and the model of `vllm serve MODEL`. It is the
// one parser for the failure classifier and the lint rules.
func Args(args []string) (flags map[string]string, model string) {
	flags = map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "serve" && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			model = args[i+1]
			i++
			continue
		}
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		name = strings.ReplaceAll(name, "_", "-")
		switch name {
		case "tp":
			name = "tensor-parallel-size"
		case "pp":
			name = "pipeline-parallel-size"
		}
		if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			value = args[i+1]
			i++
		}
		flags[name] = value
	}
	return flags, model
}
