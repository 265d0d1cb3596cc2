//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// env is what an e2e test needs to talk to the local cluster.
type env struct {
	cfg       *rest.Config
	client    kubernetes.Interface
	namespace string
}

// newEnv connects to the local cluster and creates a fresh namespace that is
// deleted when the test ends.
func newEnv(t *testing.T) *env {
	t.Helper()
	path := os.Getenv("VLLMCTL_E2E_KUBECONFIG")
	require.NotEmpty(t, path, "VLLMCTL_E2E_KUBECONFIG must point at the local cluster's kubeconfig (run `make e2e`)")
	// A dead control-plane component is restarted here, or named at once
	// (controlplane_test.go), rather than found out by a timeout.
	require.NoError(t, checkControlPlane(false, t.Logf), "the local cluster's control plane")
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err, "load kubeconfig %s", path)
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	ns := fmt.Sprintf("e2e-%s-%s", sanitize(t.Name()), rand.String(5))
	ctx := context.Background()
	// The namespaces of the test's earlier subtests hold GPUs of its
	// budget until their pods are gone (share_test.go).
	earlierPodsGone(ctx, client, t)
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err, "create namespace %s", ns)
	sharedNamespace(t, ns)
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	// Pods need the namespace's default ServiceAccount (ServiceAccount
	// admission); the controller manager creates it.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}), "default service account in %s", ns)
	return &env{cfg: cfg, client: client, namespace: ns}
}

func sanitize(name string) string {
	name = strings.ToLower(name)
	var b strings.Builder
	for _, r := range name {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > 40 {
		s = strings.Trim(s[:40], "-")
	}
	return s
}

// eventually polls cond until it returns true, failing the test with msg
// after timeout. Polling is fine in tests; the product watches.
func eventually(t *testing.T, timeout time.Duration, msg string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, cond)
	require.NoError(t, err, msg)
}

// skipOrFail skips the test, or fails it when the environment variable CI
// is set (to anything but "" or "false"): in CI a busy cluster or a missing
// file is a broken pipeline, never a reason for a test to pass unrun.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if ci := os.Getenv("CI"); ci != "" && ci != "false" {
		t.Fatalf("CI=%s, so this test may not be skipped: "+format, append([]any{ci}, args...)...)
	}
	t.Skipf(format, args...)
}
