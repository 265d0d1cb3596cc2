//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/internal/testhub"
)

// The model-fit preflight reads config.json from a local stand-in of the
// Hugging Face Hub (internal/testhub) serving testdata/modelfit/configs:
// no test reaches the network. startModelFitHub (TestMain) points every
// vllmctl the tests run at one unless HF_ENDPOINT is set; the TestModelFit
// tests start their own, to gate a repo.

// modelFitConfigs are the real config.json files the hub serves.
var modelFitConfigs = filepath.Join("..", "testdata", "modelfit", "configs")

// startModelFitHub sets HF_ENDPOINT for the whole run to a local hub and
// returns its stop.
func startModelFitHub() func() {
	if os.Getenv("HF_ENDPOINT") != "" {
		return func() {}
	}
	hub := testhub.New(modelFitConfigs, "")
	os.Setenv("HF_ENDPOINT", hub.URL)
	os.Unsetenv("HF_TOKEN")
	return hub.Close
}

const (
	fitToken = "hf_e2e_token"
	fit70B   = "meta-llama/Llama-3.3-70B-Instruct"
)

// fitValues deploy the built-in chart with model and gpus GPUs (TP
// follows resources.gpu), small cpu and memory requests.
func fitValues(model string, gpus int) []string {
	return []string{"--set", "model.name=" + model, "--set", "resources.gpu=" + strconv.Itoa(gpus),
		"--set", "resources.requests.cpu=10m,resources.requests.memory=16Mi,resources.limits.cpu=10m,resources.limits.memory=16Mi,shm.enabled=false,terminationGracePeriodSeconds=0"}
}

// fitFixture is a release fixture whose vllmctl reads configs from its own
// hub (HF_ENDPOINT for this test only).
func fitFixture(t *testing.T) (*relFixture, *testhub.Hub) {
	t.Helper()
	f := newRelFixture(t)
	hub := testhub.New(modelFitConfigs, fitToken)
	t.Cleanup(hub.Close)
	t.Setenv("HF_ENDPOINT", hub.URL)
	t.Setenv("HF_TOKEN", "")
	return f, hub
}

func (f *relFixture) deployFit(t *testing.T, args ...string) relRun {
	t.Helper()
	return f.run(t, append([]string{"deploy", relName, "vllm", "--progress", "plain", "--timeout", "2m"}, args...)...)
}

// assertNothingApplied checks the namespace holds no Deployment and no
// release record.
func (f *relFixture) assertNothingApplied(t *testing.T) {
	t.Helper()
	deps, err := f.client.AppsV1().Deployments(f.namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, deps.Items, "nothing applied")
	secrets, err := f.client.CoreV1().Secrets(f.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=vllmctl"})
	require.NoError(t, err)
	assert.Empty(t, secrets.Items, "no release record")
	assert.Empty(t, f.history(t))
}

// TestModelFit70BOnOneGPU: a 70B model at bf16 on one 80 GiB GPU (the
// local cluster's nodes: NVIDIA-A100-SXM4-80GB, nvidia.com/gpu.memory
// 81920) is refused before anything is applied: exit 2, cause gpu-oom,
// the numbers and the hints; on four GPUs (TP 4) it is accepted.
func TestModelFit70BOnOneGPU(t *testing.T) {
	f, hub := fitFixture(t)
	r := f.deployFit(t, fitValues(fit70B, 1)...)
	require.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "gpu-oom")
	assert.Contains(t, r.stderr, "131.4 GiB per GPU")
	assert.Contains(t, r.stderr, "0.90 × 80.0 GiB = 72.0 GiB")
	assert.Contains(t, r.stderr, "nvidia.com/gpu.memory 81920 MiB")
	assert.Contains(t, r.stderr, "hint: lower `--gpu-memory-utilization` (model.gpuMemoryUtilization, now 0.9)")
	assert.Contains(t, r.stderr, "`--tensor-parallel-size` to 2")
	assert.Equal(t, 1, hub.Requests("/"+fit70B+"/resolve/main/config.json"))
	f.assertNothingApplied(t)

	r = f.deployFit(t, append(fitValues(fit70B, 4), "-o", "json")...)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "fits: weights 32.9 GiB per GPU (TP 4 × PP 1")
	res := result(t, r)
	assert.Equal(t, "deployed", string(res.Status))
}

// TestModelFitKVCache: on two GPUs the 70B model's weights fit, but one
// sequence of its default 131072 tokens does not: refused with kv-cache
// and the longest --max-model-len that fits; with that length it deploys.
func TestModelFitKVCache(t *testing.T) {
	f, _ := fitFixture(t)
	r := f.deployFit(t, fitValues(fit70B, 2)...)
	require.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "kv-cache")
	assert.Contains(t, r.stderr, "one sequence of --max-model-len 131072 tokens does not fit")
	assert.Contains(t, r.stderr, "20.00 GiB of KV cache")
	assert.Contains(t, r.stderr, "hint: lower `--max-model-len` (model.maxModelLen, not set: the model's full context) to at most ")
	f.assertNothingApplied(t)

	r = f.deployFit(t, append(fitValues(fit70B, 2), "--set", "model.maxModelLen=8192")...)
	require.Equal(t, 0, r.code, "%s", r)
}

// TestModelFitSkips: a config that cannot be read (a gated model without
// HF_TOKEN, a model on a volume) is skipped with one line, and the deploy
// goes on; with the token the check is made.
func TestModelFitSkips(t *testing.T) {
	f, hub := fitFixture(t)
	hub.Gate(fit70B)
	r := f.deployFit(t, append(fitValues(fit70B, 4), "--dry-run")...)
	require.Equal(t, 0, r.code, "%s", r)
	lines := linesWith(r.stderr, "skipped:")
	require.Len(t, lines, 1, "%s", r.stderr)
	assert.Contains(t, lines[0], "HTTP 401: a gated or private repository")

	t.Setenv("HF_TOKEN", fitToken)
	r = f.deployFit(t, append(fitValues(fit70B, 4), "--dry-run")...)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "fits: weights 32.9 GiB")
	assert.NotContains(t, r.stderr+r.stdout, fitToken, "the token is never printed")
	assert.Equal(t, "Bearer "+fitToken, hub.Authorization("/"+fit70B+"/resolve/main/config.json"))

	r = f.deployFit(t, append(fitValues("/models/llama-70b", 1), "--dry-run")...)
	require.Equal(t, 0, r.code, "%s", r)
	lines = linesWith(r.stderr, "skipped:")
	require.Len(t, lines, 1, "%s", r.stderr)
	assert.Contains(t, lines[0], "a path inside the container")
}

// TestModelFitSkipPreflight: --skip-preflight deploys what the check
// would refuse, without asking the hub.
func TestModelFitSkipPreflight(t *testing.T) {
	f, hub := fitFixture(t)
	r := f.deployFit(t, append(fitValues(fit70B, 1), "--skip-preflight")...)
	require.Equal(t, 0, r.code, "%s", r)
	assert.NotContains(t, r.stderr, "gpu-oom")
	assert.Zero(t, hub.Requests("/"+fit70B+"/resolve/main/config.json"))
}

// TestModelFitDiff: diff refuses what deploy would refuse (exit 2) and
// stays quiet otherwise.
func TestModelFitDiff(t *testing.T) {
	f, _ := fitFixture(t)
	r := f.run(t, append([]string{"diff", relName, "vllm"}, fitValues(fit70B, 1)...)...)
	require.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "gpu-oom")
	r = f.run(t, append([]string{"diff", relName, "vllm"}, fitValues(fit70B, 4)...)...)
	require.Equal(t, 1, r.code, "%s", r)
	assert.Empty(t, r.stderr)
}

func linesWith(s, sub string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// TestModelFitDiagnose: diagnose of a pod that failed with kv-cache adds
// what the model-fit arithmetic finds for its flags (the check skipped at
// deploy so that the fault reaches the pod).
func TestModelFitDiagnose(t *testing.T) {
	f, _ := fitFixture(t)
	r := f.deployFit(t, append(fitValues(fit70B, 2), "--set", "image.tag=v0.11.1-fault-kvcache", "--skip-preflight", "--no-rollback", "-o", "json")...)
	require.Equal(t, 4, r.code, "failed, not rolled back\n%s", r)
	res := result(t, r)
	require.NotNil(t, res.Failure, r.stdout)
	require.Equal(t, "kv-cache", string(res.Failure.Cause))

	d := f.run(t, "diagnose", res.Failure.Pod, "-o", "json")
	require.Equal(t, 0, d.code, "%s", d)
	assert.Contains(t, d.stdout, "model-fit arithmetic (docs/model-fit.md) finds the same for these flags (kv-cache)")
	assert.Contains(t, d.stdout, "20.00 GiB of KV cache")
}
