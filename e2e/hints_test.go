//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// builtinValuePaths are the built-in chart's values paths a hint may
// quote; a pod of another chart gets none of them.
var builtinValuePaths = []string{"model.maxModelLen", "model.gpuMemoryUtilization", "model.tensorParallelSize",
	"resources.gpu", "extraArgs", "model.name", "hfToken.", "shm.", "modelCache.", "probes.startup", "image.tag"}

// TestThirdPartyChartHints deploys production-stack's vllm-stack chart,
// vendored unchanged, with its tutorial's values (basic configuration:
// --max-model-len 4096, --gpu-memory-utilization 0.8, one GPU, a 50Gi
// PVC), then upgrades it to the fault-kvcache image: the upgrade is rolled
// back at the first termination, with cause kv-cache and hints that name
// --max-model-len with the value of the pod's args and none of the
// built-in chart's values paths.
func TestThirdPartyChartHints(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()
	chart := filepath.Join("..", "testdata", "charts", "vllm-stack")
	values := filepath.Join("..", "testdata", "charts", "vllm-stack-values-02-basic-config.yaml")

	// The tutorial's PVC (pvcStorage: 50Gi) binds to a volume as a
	// cluster's provisioner would make one.
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + f.namespace},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("50Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + f.namespace}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: f.namespace, Name: "stack-llama3-storage-claim"},
		},
	}
	_, err := f.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = f.client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})

	deploy := func(args ...string) relRun {
		return f.run(t, append([]string{"deploy", "stack", chart, "-f", values, "--progress", "plain", "--timeout", "2m", "-o", "json"}, args...)...)
	}
	start := time.Now()
	r := deploy()
	require.Equal(t, 0, r.code, "install\n%s", r)
	t.Logf("install: %s", time.Since(start).Round(100*time.Millisecond))

	start = time.Now()
	r = deploy("--set", "servingEngineSpec.modelSpec[0].tag=fault-kvcache")
	require.Equal(t, 3, r.code, "failed and rolled back\n%s", r)
	t.Logf("fault-kvcache upgrade rolled back in %s", time.Since(start).Round(100*time.Millisecond))
	res := result(t, r)
	require.NotNil(t, res.Failure, r.stdout)
	assert.Equal(t, "kv-cache", string(res.Failure.Cause))
	assert.Equal(t, "KnownCause", string(res.Failure.Verdict), "caught at the first termination")
	assert.Equal(t, 1, res.RolledBackTo)
	// The model-fit report (modelFit, schema-checked by result): the
	// gated model's config.json cannot be read here, so it says why.
	require.NotNil(t, res.ModelFit, r.stdout)
	require.Len(t, res.ModelFit.Servers, 1)
	assert.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", res.ModelFit.Servers[0].Model)
	assert.NotEmpty(t, res.ModelFit.Servers[0].Skipped)
	hints := strings.Join(res.Failure.Hints, "\n")
	t.Logf("hints:\n%s", hints)
	assert.Contains(t, hints, "`--max-model-len` (now 4096)", "the flag and the value of the pod's args")
	assert.Contains(t, hints, "`--gpu-memory-utilization` (now 0.8)")
	assert.Contains(t, hints, "the container's `nvidia.com/gpu` to 2 (now 1)")
	for _, p := range builtinValuePaths {
		assert.NotContains(t, hints, p, "a values path this chart does not have")
	}

	// The failed revision's record keeps the same hints.
	rec, err := f.store.Get(ctx, "stack", 2)
	require.NoError(t, err)
	require.NotNil(t, rec.Failure)
	assert.Equal(t, res.Failure.Hints, rec.Failure.Hints)
}

// TestDiagnoseKubectlDeployment diagnoses the failing pod of a
// Deployment `kubectl create deployment` made (no chart, no release): its
// hints name the flags of its command with their values, and no values
// path.
func TestDiagnoseKubectlDeployment(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()
	kubectl := os.Getenv("KUBECTL_BIN")
	require.NotEmpty(t, kubectl, "KUBECTL_BIN is not set: run make e2e (or KUBECTL_BIN=$(hack/build-devcluster.sh)/kubectl)")
	out, err := exec.Command(kubectl, "--kubeconfig", f.kubeconfig, "-n", f.namespace, "create", "deployment", "engine",
		"--image", "vllm/vllm-openai:fault-kvcache", "--",
		"vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "32768", "--gpu-memory-utilization", "0.85").CombinedOutput()
	require.NoError(t, err, "kubectl create deployment: %s", out)

	var pod string
	require.Eventually(t, func() bool {
		pods, err := f.client.CoreV1().Pods(f.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=engine"})
		if err != nil || len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) != 1 {
			return false
		}
		pod = pods.Items[0].Name
		return pods.Items[0].Status.ContainerStatuses[0].RestartCount >= 1
	}, 2*time.Minute, 500*time.Millisecond, "the Deployment's pod restarts")

	var d struct {
		Cause string   `json:"cause"`
		Hints []string `json:"hints"`
	}
	r := f.run(t, "diagnose", pod, "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &d), r.stdout)
	assert.Equal(t, "kv-cache", d.Cause)
	hints := strings.Join(d.Hints, "\n")
	t.Logf("hints:\n%s", hints)
	assert.Contains(t, hints, "lower `--max-model-len` (now 32768)")
	assert.Contains(t, hints, "`--gpu-memory-utilization` (now 0.85)")
	assert.Contains(t, hints, "the container's `nvidia.com/gpu` to 2 (none requested now)")
	assert.Contains(t, hints, "added to the server's command line")
	for _, p := range builtinValuePaths {
		assert.NotContains(t, hints, p, "no chart maps anything here")
	}
}
