//go:build e2e

package e2e

import (
	"context"
	"flag"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vllmctl/vllmctl/internal/vllm"
	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterShare orders the package's tests on the one shared local
// cluster:
//
//   - sequential tests (the default) run first, one at a time, and have
//     the cluster to themselves: those that fill the GPU pool, cordon
//     nodes, change cluster-scoped objects shared by name, set the
//     process environment or run the LeaderWorkerSet controller;
//   - tests that call shareCluster run after them, up to -parallel at a
//     time, each in its own namespace and using a few GPUs at most;
//   - TestDestructiveFaults, which stops etcd and restarts the
//     control-plane components, waits until every one of those has
//     returned and then holds the cluster alone.
//
// The testing package gives the first two for free: a top-level test that
// calls t.Parallel waits until every sequential top-level test has
// returned. The third is this mutex and wait group.
type clusterShare struct {
	mu      sync.RWMutex   // held shared by each parallel test, alone by the destructive scenarios
	running sync.WaitGroup // parallel tests whose pods are not all gone

	// The GPU pool (the untainted GPU nodes) is shared by a budget: each
	// parallel test holds the GPUs it may use at most (its replicas, its
	// surge and its canary) from before it starts until its namespaces'
	// pods are gone, so that no test finds the pool full because others
	// run. The first parallel test waits for the pods the sequential
	// tests left to go, and sizes the budget to the pool.
	poolOnce sync.Once
	pool     int64
	gpus     *semaphore.Weighted

	nsMu       sync.Mutex
	namespaces map[string][]string // the namespaces newEnv made, by top-level test
}

var share = clusterShare{namespaces: map[string][]string{}}

// shareCluster makes t a parallel test that shares the cluster with the
// other parallel tests and uses at most gpus GPUs of the pool at once. It
// must be the first statement of the test's body
// (TestParallelTestsShareTheCluster checks it): the count of tests that
// have not returned is taken while every top-level test is still
// sequential.
func shareCluster(t *testing.T, gpus int64) {
	t.Helper()
	share.running.Add(1)
	t.Parallel()
	share.mu.RLock()
	share.poolOnce.Do(func() { share.pool = quietPool(t) })
	if share.gpus == nil {
		share.mu.RUnlock()
		share.running.Done()
		t.Fatal("GPU budget: the first parallel test could not size it")
	}
	gpus = min(gpus, share.pool)
	if err := share.gpus.Acquire(context.Background(), gpus); err != nil {
		share.mu.RUnlock()
		share.running.Done()
		t.Fatalf("GPU budget: %v", err)
	}
	t.Cleanup(func() {
		share.mu.RUnlock()
		share.nsMu.Lock()
		namespaces := share.namespaces[t.Name()]
		delete(share.namespaces, t.Name())
		share.nsMu.Unlock()
		// The test has returned; its GPUs come back once its pods are
		// gone (a few seconds after their namespace is deleted).
		go func() {
			defer share.running.Done()
			defer share.gpus.Release(gpus)
			podsGone(namespaces, time.Minute)
		}()
	})
}

// sharedNamespace notes that test t made namespace ns (newEnv).
func sharedNamespace(t *testing.T, ns string) {
	root, _, _ := strings.Cut(t.Name(), "/")
	share.nsMu.Lock()
	defer share.nsMu.Unlock()
	share.namespaces[root] = append(share.namespaces[root], ns)
}

// earlierPodsGone waits up to a minute for the pods of the namespaces
// that t's top-level test made and has since deleted (those of its
// earlier subtests) to be gone. A test's GPU budget covers one fixture at
// a time: without the wait, a subtest's pods would start while the last
// one's still hold their GPUs, and the pool would run short for the other
// parallel tests. Namespaces still in use are left alone.
func earlierPodsGone(ctx context.Context, client kubernetes.Interface, t *testing.T) {
	root, _, _ := strings.Cut(t.Name(), "/")
	share.nsMu.Lock()
	earlier := append([]string(nil), share.namespaces[root]...)
	share.nsMu.Unlock()
	var deleted []string
	for _, ns := range earlier {
		n, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && n.DeletionTimestamp != nil) {
			deleted = append(deleted, ns)
		}
	}
	podsGone(deleted, time.Minute)
}

// quietPool waits up to a minute and a half for the pods of the e2e
// namespaces (which the sequential tests left behind) to be gone, and
// returns the GPUs of the pool, which it makes the budget.
func quietPool(t *testing.T) int64 {
	t.Helper()
	client, err := e2eClient()
	if err != nil {
		t.Fatalf("GPU budget: %v", err)
	}
	ctx := context.Background()
	var pool int64
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		pool = 0
		for _, n := range nodes.Items {
			if q, ok := n.Status.Allocatable[vllm.GPUResource]; ok && len(n.Spec.Taints) == 0 && !n.Spec.Unschedulable {
				pool += q.Value()
			}
		}
		pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Namespace, "e2e-") && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Logf("GPU budget: pods of earlier tests are still there after 90s; the parallel tests start anyway")
	}
	if pool < 1 {
		t.Fatalf("GPU budget: the cluster has no untainted GPU node")
	}
	share.gpus = semaphore.NewWeighted(pool)
	return pool
}

// podsGone waits up to timeout for namespaces to hold no pods.
func podsGone(namespaces []string, timeout time.Duration) {
	client, err := e2eClient()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, ns := range namespaces {
		_ = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, nil
		})
	}
}

// e2eClient is a client of the local cluster (VLLMCTL_E2E_KUBECONFIG).
func e2eClient() (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("VLLMCTL_E2E_KUBECONFIG"))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// holdClusterAlone waits until every test that shares the cluster has
// returned and its pods are gone, then holds the cluster alone until t
// ends. With -parallel 1 there is no slot left for them to run in while t
// waits, so t takes the cluster as soon as nobody holds it.
func holdClusterAlone(t *testing.T) {
	t.Helper()
	if parallelism() > 1 {
		share.running.Wait()
	}
	share.mu.Lock()
	t.Cleanup(share.mu.Unlock)
}

// parallelism is the -test.parallel flag's value (GOMAXPROCS by default).
func parallelism() int {
	f := flag.Lookup("test.parallel")
	if f == nil {
		return 1
	}
	n, err := strconv.Atoi(f.Value.String())
	if err != nil || n < 1 {
		return 1
	}
	return n
}
