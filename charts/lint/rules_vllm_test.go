package lint

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// setArgs sets the server container's args.
func setArgs(u *unstructured.Unstructured, args ...any) { ctr(u, 0)["args"] = args }

// setGPUs sets the server container's GPU request and limit.
func setGPUs(u *unstructured.Unstructured, n int64) {
	resources(u, 0, "requests")[gpuResource] = n
	resources(u, 0, "limits")[gpuResource] = n
}

// vllmRuleTests are the TestRules cases of VL011–VL015, the rules for the
// failure causes that can be seen before deploying.
func vllmRuleTests() []ruleTest {
	return []ruleTest{
		// VL011: tensor parallel × pipeline parallel == GPUs.
		{name: "VL011 fires on tensor parallel 2 with 1 GPU", rule: "VL011",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--model", "Qwen/Qwen3-8B", "--tensor-parallel-size", "2")
			},
			want: []string{serverPath + ".args"}},
		{name: "VL011 fires on 4 GPUs left to the default tensor parallel size", rule: "VL011",
			edit: func(u *unstructured.Unstructured) { setGPUs(u, 4) },
			want: []string{serverPath + ".args"}},
		{name: "VL011 fires on tp × pp beyond the GPUs, flags as vllm serve writes them", rule: "VL011",
			edit: func(u *unstructured.Unstructured) {
				ctr(u, 0)["image"] = "registry.example/llm-server:1.0"
				ctr(u, 0)["command"] = []any{"vllm", "serve", "Qwen/Qwen3-32B"}
				setArgs(u, "-tp", "2", "--pipeline_parallel_size=2")
				setGPUs(u, 2)
			},
			want: []string{serverPath + ".args"}},
		{name: "VL011 quiet on tp 2 × pp 2 with 4 GPUs", rule: "VL011",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size=2", "--pipeline-parallel-size", "2")
				setGPUs(u, 4)
			}},
		{name: "VL011 quiet on a container that is not vLLM", rule: "VL011",
			edit: func(u *unstructured.Unstructured) {
				ctr(u, 0)["image"] = "ghcr.io/huggingface/text-generation-inference:3.0"
				setGPUs(u, 2)
			}},
		{name: "VL011 quiet on a fractional GPU (VL001's)", rule: "VL011",
			edit: func(u *unstructured.Unstructured) {
				delete(resources(u, 0, "requests"), gpuResource)
				resources(u, 0, "limits")[gpuResource] = "500m"
			}},

		// VL012: /dev/shm with tensor parallelism.
		{name: "VL012 fires on tensor parallel 2 without /dev/shm", rule: "VL012",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size", "2")
				setGPUs(u, 2)
				delete(ctr(u, 0), "volumeMounts")
			},
			want: []string{serverPath + ".volumeMounts"}},
		{name: "VL012 fires on a disk-backed /dev/shm", rule: "VL012",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size", "2")
				setGPUs(u, 2)
				podSpec(u)["volumes"] = []any{map[string]any{"name": "dshm", "emptyDir": map[string]any{}}}
			},
			want: []string{serverPath + ".volumeMounts"}},
		{name: "VL012 fires on a 64Mi /dev/shm", rule: "VL012",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size", "2")
				setGPUs(u, 2)
				podSpec(u)["volumes"] = []any{map[string]any{"name": "dshm", "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": "64Mi"}}}
			},
			want: []string{serverPath + ".volumeMounts"}},
		{name: "VL012 quiet on tensor parallel 2 with 8Gi of memory-backed /dev/shm", rule: "VL012",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size", "2")
				setGPUs(u, 2)
			}},
		{name: "VL012 quiet without tensor parallelism (VL003's)", rule: "VL012",
			edit: func(u *unstructured.Unstructured) { delete(ctr(u, 0), "volumeMounts") }},

		// VL013: --gpu-memory-utilization.
		{name: "VL013 fires on a percentage", rule: "VL013",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--gpu-memory-utilization", "90") },
			want: []string{serverPath + ".args"}},
		{name: "VL013 fires on zero", rule: "VL013",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--gpu-memory-utilization=0") },
			want: []string{serverPath + ".args"}},
		{name: "VL013 fires on a non-number", rule: "VL013",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--gpu_memory_utilization", "high") },
			want: []string{serverPath + ".args"}},
		{name: "VL013 quiet on 0.95", rule: "VL013",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--gpu-memory-utilization", "0.95") }},
		{name: "VL013 quiet on 1", rule: "VL013",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--gpu-memory-utilization", "1") }},

		// VL014: the Hugging Face token from a Secret.
		{name: "VL014 fires on a literal HF_TOKEN", rule: "VL014",
			edit: func(u *unstructured.Unstructured) {
				ctr(u, 0)["env"] = []any{map[string]any{"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"}, map[string]any{"name": "HF_TOKEN", "value": "hf_abc"}}
			},
			want: []string{serverPath + ".env[1]"}},
		{name: "VL014 fires on a token from a ConfigMap in an init container", rule: "VL014",
			edit: func(u *unstructured.Unstructured) {
				podSpec(u)["initContainers"] = []any{map[string]any{"name": "fetch", "image": "rclone/rclone:1.68",
					"resources": map[string]any{"limits": map[string]any{"cpu": "1", "memory": "1Gi"}},
					"env": []any{map[string]any{"name": "HUGGING_FACE_HUB_TOKEN", "valueFrom": map[string]any{
						"configMapKeyRef": map[string]any{"name": "hf", "key": "token"}}}}}}
			},
			want: []string{"spec.template.spec.initContainers[0].env[0]"}},
		{name: "VL014 quiet on a secretKeyRef", rule: "VL014",
			edit: func(u *unstructured.Unstructured) {
				ctr(u, 0)["env"] = []any{map[string]any{"name": "HF_TOKEN", "valueFrom": map[string]any{
					"secretKeyRef": map[string]any{"name": "hf-token", "key": "token"}}}}
			}},
		{name: "VL014 quiet on an empty value", rule: "VL014",
			edit: func(u *unstructured.Unstructured) {
				ctr(u, 0)["env"] = []any{map[string]any{"name": "HF_TOKEN", "value": ""}}
			}},

		// VL015: the startup probe's budget.
		{name: "VL015 fires on the probe defaults (30s)", rule: "VL015",
			edit: func(u *unstructured.Unstructured) {
				ctr(u, 0)["startupProbe"] = map[string]any{"httpGet": map[string]any{"path": "/health", "port": int64(8000)}}
			},
			want: []string{serverPath + ".startupProbe"}},
		{name: "VL015 fires on 4m50s", rule: "VL015",
			edit: func(u *unstructured.Unstructured) {
				ctr(u, 0)["startupProbe"] = map[string]any{"httpGet": map[string]any{"path": "/health", "port": int64(8000)},
					"initialDelaySeconds": int64(50), "periodSeconds": int64(10), "failureThreshold": int64(24)}
			},
			want: []string{serverPath + ".startupProbe"}},
		{name: "VL015 quiet at exactly 5m", rule: "VL015",
			edit: func(u *unstructured.Unstructured) {
				ctr(u, 0)["startupProbe"] = map[string]any{"httpGet": map[string]any{"path": "/health", "port": int64(8000)},
					"periodSeconds": int64(10), "failureThreshold": int64(30)}
			}},
		{name: "VL015 quiet without GPUs", rule: "VL015",
			edit: func(u *unstructured.Unstructured) {
				delete(resources(u, 0, "requests"), gpuResource)
				delete(resources(u, 0, "limits"), gpuResource)
				ctr(u, 0)["startupProbe"] = map[string]any{"exec": map[string]any{"command": []any{"true"}}}
			}},
		{name: "VL015 quiet without a startup probe (VL004's)", rule: "VL015",
			edit: func(u *unstructured.Unstructured) { delete(ctr(u, 0), "startupProbe") }},
	}
}

func TestVLLMArgs(t *testing.T) {
	flags, ok := vllmArgs(container{raw: map[string]any{
		"image":   "example/server:1",
		"command": []any{"python3", "-m", "vllm.entrypoints.openai.api_server"},
		"args":    []any{"--model", "m", "--enforce-eager", "--tp", "4", "--max_model_len=8192"},
	}})
	assert.True(t, ok, "the command runs vllm")
	assert.Equal(t, map[string]string{"m": "vllm.entrypoints.openai.api_server", "model": "m", "enforce-eager": "", "tensor-parallel-size": "4", "max-model-len": "8192"}, flags)
	_, ok = vllmArgs(container{raw: map[string]any{"image": "nginx:1.27"}})
	assert.False(t, ok)
}
