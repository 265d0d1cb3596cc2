package vllm_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

func TestContainerCommand(t *testing.T) {
	for _, tc := range []struct {
		name   string
		c      corev1.Container
		server bool
		model  string
		flags  map[string]string
	}{
		{name: "vllm serve, as production-stack's chart runs it",
			c:      corev1.Container{Command: []string{"vllm", "serve", "facebook/opt-125m", "--host", "0.0.0.0", "--max-model-len", "4096"}},
			server: true, model: "facebook/opt-125m", flags: map[string]string{"host": "0.0.0.0", "max-model-len": "4096"}},
		{name: "the OpenAI API server module",
			c:      corev1.Container{Command: []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}, Args: []string{"--model=/models/llama", "--max_model_len=2048"}},
			server: true, model: "/models/llama", flags: map[string]string{"m": "vllm.entrypoints.openai.api_server", "model": "/models/llama", "max-model-len": "2048"}},
		{name: "sh -c with $(VAR) from env",
			c: corev1.Container{Command: []string{"/bin/sh", "-c"}, Args: []string{`vllm serve $(MODEL) --max-model-len=$(LEN) -tp 2 && sleep 1`},
				Env: []corev1.EnvVar{{Name: "MODEL", Value: "Qwen/Qwen3-8B"}, {Name: "LEN", Value: "8192"},
					{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}},
			server: true, model: "Qwen/Qwen3-8B", flags: map[string]string{"max-model-len": "8192", "tensor-parallel-size": "2"}},
		{name: "the image's entrypoint with --model",
			c:      corev1.Container{Args: []string{"--model", "m/x", "--gpu-memory-utilization", "0.95"}},
			server: true, model: "m/x", flags: map[string]string{"model": "m/x", "gpu-memory-utilization": "0.95"}},
		{name: "kubectl create deployment: no command, no args",
			c:      corev1.Container{Image: "vllm/vllm-openai:fault-kvcache"},
			server: false, flags: map[string]string{}},
		{name: "another server", c: corev1.Container{Command: []string{"text-generation-launcher"}, Args: []string{"--model-id", "x/y"}},
			server: false, flags: map[string]string{"model-id": "x/y"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := vllm.ContainerCommand(&tc.c)
			assert.Equal(t, tc.server, got.Server)
			assert.Equal(t, tc.model, got.Model)
			assert.Equal(t, tc.flags, got.Flags)
		})
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"A": "x", "B": "y"}
	assert.Equal(t, "x-$(C)", vllm.Expand("$(A)-$(C)", env), "unknown references stay, as the kubelet leaves them")
	assert.Equal(t, "$(A)", vllm.Expand("$$(A)", env), "$$ escapes")
	assert.Equal(t, "y y", vllm.Expand("${B} $B", env), "shell references in scripts")
}

func TestParseValuesMap(t *testing.T) {
	m, err := vllm.ParseValuesMap(map[string]string{
		"vllmctl.io/values.max-model-len": "servingEngineSpec.modelSpec[0].vllmConfig.maxModelLen",
		"vllmctl.io/values.gpu":           " servingEngineSpec.modelSpec[0].requestGPU ",
		"artifacthub.io/license":          "Apache-2.0",
	})
	require.NoError(t, err)
	assert.Equal(t, vllm.ValuesMap{"max-model-len": "servingEngineSpec.modelSpec[0].vllmConfig.maxModelLen",
		"gpu": "servingEngineSpec.modelSpec[0].requestGPU"}, m)
	assert.Equal(t, "", m.Path("tensor-parallel-size"))

	m, err = vllm.ParseValuesMap(map[string]string{"category": "AI"})
	require.NoError(t, err)
	assert.Nil(t, m, "no mapping declared")

	for _, bad := range []map[string]string{
		{"vllmctl.io/values.max-model-length": "a.b"},
		{"vllmctl.io/values.gpu": ""},
		{"vllmctl.io/values.gpu": "a b"},
	} {
		_, err := vllm.ParseValuesMap(bad)
		require.Error(t, err, bad)
		for k := range bad {
			assert.Contains(t, err.Error(), k)
		}
	}
	assert.True(t, vllm.FlagSetting("kv-cache-dtype"))
	assert.False(t, vllm.FlagSetting("gpu"))
}
