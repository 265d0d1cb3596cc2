package lint

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

		// VL011 leaves multi-node engines to VL016.
		{name: "VL011 quiet on tensor parallel 8 across 2 nodes of 4 GPUs", rule: "VL011",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size", "8", "--nnodes", "2", "--node-rank", "$(VLLM_NODE_RANK)")
				setGPUs(u, 4)
			}},
		{name: "VL011 still fires with --nnodes 1", rule: "VL011",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size", "8", "--nnodes", "1")
				setGPUs(u, 4)
			},
			want: []string{serverPath + ".args"}},

		// VL016: a multi-node group's world size == nodes × GPUs per pod.
		{name: "VL016 quiet on tp 4 × pp 2 across 2 nodes of 4 GPUs", rule: "VL016",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size", "4", "--pipeline-parallel-size", "2", "--nnodes", "2")
				setGPUs(u, 4)
			}},
		{name: "VL016 quiet on tp 8 across 2 nodes of 4 GPUs, --nnodes=2", rule: "VL016",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size=8", "--nnodes=2")
				setGPUs(u, 4)
			}},
		{name: "VL016 quiet on one node", rule: "VL016",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--nnodes", "1") }},
		{name: "VL016 quiet without --nnodes", rule: "VL016",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--tensor-parallel-size", "2") }},
		{name: "VL016 fires on tp 4 across 2 nodes of 4 GPUs (tp == GPUs of one pod)", rule: "VL016",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size", "4", "--nnodes", "2")
				setGPUs(u, 4)
			},
			want: []string{serverPath + ".args"}},
		{name: "VL016 fires on tp 8 × pp 2 across 2 nodes of 4 GPUs (too many)", rule: "VL016",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "-tp", "8", "--pipeline_parallel_size=2", "--nnodes", "2")
				setGPUs(u, 4)
			},
			want: []string{serverPath + ".args"}},
		{name: "VL016 fires on --nnodes 0", rule: "VL016",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--nnodes", "0") },
			want: []string{serverPath + ".args"}},
		{name: "VL016 fires on a negative --nnodes", rule: "VL016",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--nnodes=-2") },
			want: []string{serverPath + ".args"}},
		{name: "VL016 fires on --nnodes that is not a number", rule: "VL016",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--nnodes", "two") },
			want: []string{serverPath + ".args"}},
		{name: "VL016 fires on a huge --nnodes", rule: "VL016",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2", "--nnodes", "100000")
				setGPUs(u, 8)
			},
			want: []string{serverPath + ".args"}},
		{name: "VL016 quiet on --nnodes from the environment", rule: "VL016",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--nnodes", "$(LWS_GROUP_SIZE)") }},
		{name: "VL016 quiet on a GPU-less container", rule: "VL016",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--nnodes", "2", "--tensor-parallel-size", "4")
				setGPUs(u, 0)
			}},
		{name: "VL016 quiet on a StatefulSet group of --nnodes pods", rule: "VL016",
			edit: func(u *unstructured.Unstructured) {
				u.SetKind("StatefulSet")
				setArgs(u, "--tensor-parallel-size", "2", "--nnodes", "2")
			}},
		{name: "VL016 fires on a StatefulSet group of 3 pods with --nnodes 2", rule: "VL016",
			edit: func(u *unstructured.Unstructured) {
				u.SetKind("StatefulSet")
				u.Object["spec"].(map[string]any)["replicas"] = int64(3)
				setArgs(u, "--tensor-parallel-size", "2", "--nnodes", "2")
			},
			want: []string{"spec.replicas"}},
		{name: "VL016 quiet on a LeaderWorkerSet of size --nnodes", rule: "VL016",
			edit: func(u *unstructured.Unstructured) {
				setArgs(u, "--tensor-parallel-size", "2", "--nnodes", "2")
				toLeaderWorkerSet(u, 2)
			}},
		{name: "VL016 fires on a LeaderWorkerSet's world size and size", rule: "VL016",
			edit: func(u *unstructured.Unstructured) {
				setGPUs(u, 4)
				setArgs(u, "--tensor-parallel-size", "4", "--nnodes", "2")
				toLeaderWorkerSet(u, 4)
			},
			want: []string{"spec.leaderWorkerTemplate.size", lwsServerPath + ".args"}},
	}
}

// lwsServerPath is the server container of toLeaderWorkerSet's object.
const lwsServerPath = "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0]"

// toLeaderWorkerSet turns the good Deployment (after its edits) into a
// LeaderWorkerSet of groups of size pods with its pod template as the
// worker template.
func toLeaderWorkerSet(u *unstructured.Unstructured, size int64) {
	spec := u.Object["spec"].(map[string]any)
	u.SetAPIVersion("leaderworkerset.x-k8s.io/v1")
	u.SetKind("LeaderWorkerSet")
	u.Object["spec"] = map[string]any{
		"replicas": spec["replicas"],
		"leaderWorkerTemplate": map[string]any{
			"size":           size,
			"workerTemplate": spec["template"],
		},
	}
}

func TestMultiNodeWorldSizeMessage(t *testing.T) {
	u := good(t)
	u.SetKind("StatefulSet")
	require.NoError(t, unstructured.SetNestedField(u.Object, int64(3), "spec", "replicas"))
	setGPUs(u, 4)
	setArgs(u, "--tensor-parallel-size", "4", "--pipeline-parallel-size", "1", "--nnodes", "2")
	got := byRule(Run([]*unstructured.Unstructured{u}, Options{Namespace: "inference"}), "VL016")
	require.Len(t, got, 2) // sorted by field
	assert.Equal(t, SeverityError, got[1].Severity)
	assert.Equal(t, serverPath+".args", got[1].Field)
	for _, want := range []string{"--nnodes 2", "4 nvidia.com/gpu each (8 GPUs)", "--tensor-parallel-size 4", "--pipeline-parallel-size 1", "= 4 workers", "multiNode.nodes", "resources.gpu"} {
		assert.Contains(t, got[1].Message, want)
	}
	assert.Equal(t, "spec.replicas", got[0].Field)
	assert.Contains(t, got[0].Message, "3 pod(s)")
	assert.Contains(t, got[0].Message, "--nnodes 2")
	assert.Empty(t, byRule(Run([]*unstructured.Unstructured{u}, Options{Namespace: "inference"}), "VL011"), "VL011 leaves it to VL016")
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
