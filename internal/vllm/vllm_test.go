package vllm_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		flags map[string]string
		model string
	}{
		{name: "serve with a model and flags", args: []string{"vllm", "serve", "meta/llama", "--max-model-len", "8192", "--enforce-eager"},
			flags: map[string]string{"max-model-len": "8192", "enforce-eager": ""}, model: "meta/llama"},
		{name: "equals form and underscores", args: []string{"--gpu_memory_utilization=0.9"},
			flags: map[string]string{"gpu-memory-utilization": "0.9"}},
		{name: "tp and pp spelled out", args: []string{"-tp", "4", "--pp=2"},
			flags: map[string]string{"tensor-parallel-size": "4", "pipeline-parallel-size": "2"}},
		{name: "a flag before the next flag has no value", args: []string{"--trust-remote-code", "--port", "8000"},
			flags: map[string]string{"trust-remote-code": "", "port": "8000"}},
		{name: "bare dashes and words are not flags", args: []string{"-", "--", "python3"},
			flags: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags, model := vllm.Args(tc.args)
			assert.Equal(t, tc.flags, flags)
			assert.Equal(t, tc.model, model)
		})
	}
}
