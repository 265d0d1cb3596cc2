package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/testhub"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
	"github.com/vllmctl/vllmctl/release/preflight/modelfit"
)

// TestMain keeps the model-fit preflight of the commands under test off
// the network: the Hub endpoint is a closed local port (the check is
// skipped with its one line, the same on every machine) unless the
// environment names one.
func TestMain(m *testing.M) {
	if os.Getenv("HF_ENDPOINT") == "" {
		os.Setenv("HF_ENDPOINT", closedHub)
	}
	os.Unsetenv("HF_TOKEN")
	os.Exit(m.Run())
}

// closedHub is an endpoint where nothing listens.
const closedHub = "http://127.0.0.1:1"

func TestModelFitSource(t *testing.T) {
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("HF_TOKEN", "hf_x")
	m := modelFitFlags{file: "c.json"}
	s := m.source()
	assert.Equal(t, "https://huggingface.co", s.Endpoint, "the Hub by default")
	assert.Equal(t, "hf_x", s.Token)
	assert.Equal(t, "c.json", s.File)
	t.Setenv("HF_ENDPOINT", "http://mirror")
	assert.Equal(t, "http://mirror", m.source().Endpoint)
}

func TestModelFitHint(t *testing.T) {
	hub := testhub.New(filepath.Join("..", "..", "testdata", "modelfit", "configs"), "")
	defer hub.Close()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-1", Labels: map[string]string{"nvidia.com/gpu.memory": "81920"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "chat-1", Namespace: "ml"},
		Spec: corev1.PodSpec{NodeName: "gpu-node-1", Containers: []corev1.Container{{
			Name: "server", Image: "vllm/vllm-openai", Args: []string{"--model", "meta-llama/Llama-3.3-70B-Instruct"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
		}}},
	}
	client := fake.NewClientset(node, pod)
	src := modelfit.Source{Endpoint: hub.URL}
	d := &rollout.Diagnosis{Cause: vllmcause.CauseGPUOOM, Pod: "chat-1", Namespace: "ml", Container: "server"}
	h := modelFitHint(context.Background(), client, d, src)
	assert.Contains(t, h, "finds the same for these flags (gpu-oom)")
	assert.Contains(t, h, "131.4 GiB per GPU")
	assert.Contains(t, h, "81920 MiB on node gpu-node-1")

	assert.Empty(t, modelFitHint(context.Background(), client, &rollout.Diagnosis{Cause: vllmcause.CauseShm, Pod: "chat-1", Namespace: "ml", Container: "server"}, src),
		"only gpu-oom and kv-cache")
	assert.Empty(t, modelFitHint(context.Background(), client, d, modelfit.Source{Endpoint: closedHub}), "nothing when the config cannot be read")
}
