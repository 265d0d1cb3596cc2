package modelfit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func objects(t *testing.T, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range docs {
		m := map[string]any{}
		require.NoError(t, yaml.Unmarshal([]byte(d), &m))
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// builtinDeployment is what the built-in chart renders (the image's
// entrypoint runs the OpenAI server; args only).
const builtinDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: r1}
spec:
  template:
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:v0.11.0
        args: [--model, meta-llama/Llama-3.3-70B-Instruct, --served-model-name, llama, --host, 0.0.0.0, --port, "8000",
               --tensor-parallel-size, "4", --gpu-memory-utilization, "0.95", --max-model-len, "32768", --kv-cache-dtype, fp8]
        resources: {limits: {nvidia.com/gpu: 4}}
      - name: metrics
        image: prom/exporter
        args: [--port, "9000"]
`

// vllmServeStatefulSet runs `vllm serve MODEL` through sh -c with
// $(VAR) references to its env, as third-party charts do.
const vllmServeStatefulSet = `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: engine, namespace: other}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:latest
        command: [/bin/sh, -c]
        args:
        - 'vllm serve $(MODEL) --tensor-parallel-size=$(TP) -pp 2 --revision v2 \
             --dtype "bfloat16" --quantization fp8 && sleep 1'
        env:
        - {name: MODEL, value: Qwen/Qwen3-32B}
        - {name: TP, value: "2"}
        - name: HF_TOKEN
          valueFrom: {secretKeyRef: {name: hf, key: token}}
        resources: {requests: {nvidia.com/gpu: 4}}
`

const apiServerPod = `
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    image: custom
    command: [python3, -m, vllm.entrypoints.openai.api_server]
    args: [--model=/models/llama, --max_model_len=4096]
`

const notVLLM = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - {name: nginx, image: nginx, command: [nginx, -g, daemon off;]}
      - {name: tgi, image: ghcr.io/huggingface/text-generation-inference, command: [text-generation-launcher], args: [--model-id, x/y]}
`

func TestServers(t *testing.T) {
	got := Servers(objects(t, builtinDeployment, vllmServeStatefulSet, apiServerPod, notVLLM), "ns")
	require.Len(t, got, 3)

	b := got[0]
	assert.Equal(t, "Deployment/ns/r1", b.Object)
	assert.Equal(t, "server", b.Container)
	assert.Equal(t, "meta-llama/Llama-3.3-70B-Instruct", b.Model)
	assert.Equal(t, Engine{TensorParallel: 4, PipelineParallel: 1, MaxModelLen: 32768, GPUMemoryUtilization: 0.95, KVCacheDtype: "fp8"}, b.Engine)
	assert.Equal(t, int64(4), b.GPUs)

	s := got[1]
	assert.Equal(t, "StatefulSet/other/engine", s.Object)
	assert.Equal(t, "Qwen/Qwen3-32B", s.Model, "$(MODEL) expanded from env")
	assert.Equal(t, "v2", s.Revision)
	assert.Equal(t, Engine{TensorParallel: 2, PipelineParallel: 2, GPUMemoryUtilization: 0.9, Dtype: "bfloat16", Quantization: "fp8"}, s.Engine)
	assert.Equal(t, int64(4), s.GPUs)

	p := got[2]
	assert.Equal(t, "/models/llama", p.Model)
	assert.Equal(t, int64(4096), p.Engine.MaxModelLen)
}

// TestFlagIntBounds: an absurd parallel size or --max-model-len is read as
// unset, so TP × PP cannot overflow.
func TestFlagIntBounds(t *testing.T) {
	flags := map[string]string{"tensor-parallel-size": "9000000000000000000", "pipeline-parallel-size": "4", "max-model-len": "-5"}
	assert.Equal(t, int64(1), flagInt(flags, "tensor-parallel-size", 1))
	assert.Equal(t, int64(4), flagInt(flags, "pipeline-parallel-size", 1))
	assert.Equal(t, int64(0), flagInt(flags, "max-model-len", 0))
}
