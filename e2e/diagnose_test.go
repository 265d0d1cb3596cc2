//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDiagnose runs `vllmctl diagnose POD` on bare pods, as kubectl run
// makes them (no Deployment, no release): one whose vLLM runs out of GPU
// memory (the local cluster logs a real CUDA OOM for its fault image), and
// one that crashes without saying why.
func TestDiagnose(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()
	create := func(name, image string) {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.namespace, Labels: map[string]string{"run": name}},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyAlways,
				Containers: []corev1.Container{{Name: name, Image: image,
					Args: []string{"--model", "Qwen/Qwen3-0.6B", "--gpu-memory-utilization", "0.85"}}},
			},
		}
		_, err := f.client.CoreV1().Pods(f.namespace).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	restarted := func(name string) {
		t.Helper()
		require.Eventually(t, func() bool {
			p, err := f.client.CoreV1().Pods(f.namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.RestartCount >= 1 {
					return true
				}
			}
			return false
		}, 2*time.Minute, 500*time.Millisecond, "pod %s restarts", name)
	}
	create("oom", "example.com/vllm-fault-gpumem:v1")
	create("crash", "example.com/crash:v1")
	restarted("oom")
	restarted("crash")

	var d map[string]any
	r := f.run(t, "diagnose", "oom", "-n", f.namespace, "-o", "json")
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &d), r.stdout)
	assert.Equal(t, "gpu-oom", d["cause"])
	assert.Equal(t, "oom", d["pod"])
	assert.Equal(t, "oom", d["container"])
	assert.Contains(t, d["evidence"], "CUDA out of memory")
	hints, _ := json.Marshal(d["hints"])
	assert.Contains(t, string(hints), "now 0.85", "the hints quote the pod's own flag")

	r = f.run(t, "diagnose", "oom", "-n", f.namespace)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "  cause:     gpu-oom\n")

	d = nil
	r = f.run(t, "diagnose", "crash", "-n", f.namespace, "-o", "json")
	require.Equal(t, 1, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &d), r.stdout)
	assert.Equal(t, "unknown", d["cause"])
	assert.Contains(t, r.stderr, "no known cause was found")

	r = f.run(t, "diagnose", "ghost", "-n", f.namespace)
	assert.Equal(t, 2, r.code, r.stderr)
	r = f.run(t, "diagnose", "oom", "-c", "nope", "-n", f.namespace)
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stderr, "its containers: oom")
}

// TestDiagnoseReleasePod diagnoses a failed pod of a release after a
// deploy without rollback, and a pod `kubectl run` made: the same cause
// and evidence the deploy's result names, the hints quoting the pod's own
// flags.
func TestDiagnoseReleasePod(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	f.rolloutInstall(t)
	r := f.rolloutDeploy(t, "--set", "image.tag=v0.11.1-fault-kvcache", "--no-rollback", "-o", "json")
	require.Equal(t, 4, r.code, "failed, not rolled back\n%s", r)
	res := result(t, r)
	require.NotNil(t, res.Failure, r.stdout)
	require.NotEmpty(t, res.Failure.Pod)

	var d map[string]any
	diag := f.run(t, "diagnose", res.Failure.Pod, "-o", "json")
	require.Equal(t, 0, diag.code, "%s", diag)
	require.NoError(t, json.Unmarshal([]byte(diag.stdout), &d), diag.stdout)
	assert.Equal(t, string(res.Failure.Cause), d["cause"])
	assert.Equal(t, "kv-cache", d["cause"])
	assert.Equal(t, res.Failure.Evidence, d["evidence"], "the same line as the deploy's")
	hints, _ := json.Marshal(d["hints"])
	assert.Contains(t, string(hints), "--max-model-len", "the flag to change")
	assert.Contains(t, string(hints), "model.maxModelLen", "the built-in chart's values path, from the release's record")

	kubectl := os.Getenv("KUBECTL_BIN")
	require.NotEmpty(t, kubectl, "KUBECTL_BIN is not set: run make e2e (or KUBECTL_BIN=$(hack/build-devcluster.sh)/kubectl)")
	out, err := exec.Command(kubectl, "--kubeconfig", f.kubeconfig, "-n", f.namespace, "run", "gated",
		"--image", "example.com/vllm-openai:v0.11.1-fault-hfauth", "--", "--model", "meta-llama/Llama-3.1-8B-Instruct").CombinedOutput()
	require.NoError(t, err, "kubectl run: %s", out)
	ctx := context.Background()
	require.Eventually(t, func() bool {
		p, err := f.client.CoreV1().Pods(f.namespace).Get(ctx, "gated", metav1.GetOptions{})
		return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	}, 2*time.Minute, 500*time.Millisecond, "the pod kubectl run made restarts")
	diag = f.run(t, "diagnose", "gated")
	require.Equal(t, 0, diag.code, "%s", diag)
	assert.Contains(t, diag.stdout, "  cause:     model-auth\n")
	assert.True(t, strings.Contains(diag.stdout, "Access to model meta-llama/Llama-3.1-8B-Instruct is restricted"), diag.stdout)
}
