//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/vllm"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/preflight"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The capacity preflight and the surge policy
// through the real binary, on the isolated GPU pool of the local cluster
// (gpu-isolated-1/2, 8 GPUs each, labelled and tainted
// vllmctl.io/pool=isolated), which only these tests use. Each test starts
// when the pool is empty and empties it again (its namespace and pods gone)
// before the next one, so the GPU arithmetic is exact. The tests must not
// run in parallel with each other.

// isolatedValues pins the built-in vllm chart's pods to the isolated pool
// (nodeSelector and toleration), 8 GPUs per pod by default.
const isolatedValues = "testdata/isolated-pool.yaml"

// isolatedNodes are the nodes of the isolated pool and their GPUs.
var isolatedNodes = []string{"gpu-isolated-1", "gpu-isolated-2"}

const isolatedGPUsPerNode = 8

// newIsolatedFixture is a release fixture for the isolated pool: it waits
// until no pod holds resources on the pool, and on cleanup deletes the
// namespace and waits until its pods are gone.
func newIsolatedFixture(t *testing.T) *relFixture {
	t.Helper()
	f := newRelFixture(t)
	// Registered after newEnv's cleanup, so it runs first.
	t.Cleanup(func() { f.emptyNamespace(t) })
	requireIsolatedPool(t, f.env)
	return f
}

// requireIsolatedPool checks the isolated pool exists as the tests expect
// and waits until no pod holds resources on it.
func requireIsolatedPool(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	for _, name := range isolatedNodes {
		n, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "the local cluster has no isolated GPU pool: restart it with `make cluster-down cluster`")
		gpus := n.Status.Allocatable[vllm.GPUResource]
		require.Equal(t, int64(isolatedGPUsPerNode), gpus.Value(), "GPUs of %s", name)
		require.Equal(t, "isolated", n.Labels["vllmctl.io/pool"], "label of %s", name)
		require.True(t, preflightNodeReady(n), "%s Ready", name)
		require.Contains(t, n.Spec.Taints, corev1.Taint{Key: "vllmctl.io/pool", Value: "isolated", Effect: corev1.TaintEffectNoSchedule}, "taint of %s", name)
	}
	// A run interrupted before its cleanup (or whose cleanup met an API
	// server restarted by another test) leaves its namespace behind: the
	// pool is these tests' alone, so its leftovers go.
	deleted := map[string]bool{}
	eventually(t, 2*time.Minute, "the isolated pool is empty (pods of another namespace hold its GPUs)", func(ctx context.Context) (bool, error) {
		namespaces, err := podsOnIsolatedPool(ctx, e)
		if err != nil {
			return false, nil // the API server may be restarting
		}
		for ns := range namespaces {
			if strings.HasPrefix(ns, "e2e-testsurge") && ns != e.namespace && !deleted[ns] {
				t.Logf("deleting namespace %s, left over by an earlier run", ns)
				if err := e.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
					deleted[ns] = true
				}
			}
		}
		return len(namespaces) == 0, nil
	})
}

// podsOnIsolatedPool counts, by namespace, the pods bound to the isolated
// pool that hold its resources (not Succeeded or Failed; being deleted
// counts).
func podsOnIsolatedPool(ctx context.Context, e *env) (map[string]int, error) {
	out := map[string]int{}
	for _, node := range isolatedNodes {
		pods, err := e.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				out[p.Namespace]++
			}
		}
	}
	return out, nil
}

// emptyNamespace deletes the test namespace and waits until its pods are
// gone, so the next test finds the isolated pool free. It retries through
// API server restarts (other tests restart it).
func (f *relFixture) emptyNamespace(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	deleted := false
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if !deleted {
			err := f.client.CoreV1().Namespaces().Delete(ctx, f.namespace, metav1.DeleteOptions{})
			deleted = err == nil || apierrors.IsNotFound(err)
		}
		if deleted {
			pods, err := f.client.CoreV1().Pods(f.namespace).List(ctx, metav1.ListOptions{})
			if err == nil && len(pods.Items) == 0 {
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Errorf("namespace %s: not deleted, or its pods still there after 2m", f.namespace)
}

// vllm runs `vllmctl deploy chat vllm -f testdata/isolated-pool.yaml
// args...` with plain progress.
func (f *relFixture) vllm(t *testing.T, args ...string) relRun {
	t.Helper()
	return f.run(t, append([]string{"deploy", relName, "vllm", "-f", isolatedValues, "--progress", "plain", "--timeout", "2m"}, args...)...)
}

func (f *relFixture) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	d, err := f.client.AppsV1().Deployments(f.namespace).Get(context.Background(), relName, metav1.GetOptions{})
	require.NoError(t, err)
	return d
}

// waitRolledOut waits until the Deployment has replicas pods, all updated
// and available, and no others.
func (f *relFixture) waitRolledOut(t *testing.T, replicas int32) {
	t.Helper()
	eventually(t, 90*time.Second, fmt.Sprintf("Deployment %s rolled out with %d replicas", relName, replicas), func(ctx context.Context) (bool, error) {
		d, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, relName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ObservedGeneration >= d.Generation && ptr.Deref(d.Spec.Replicas, -1) == replicas &&
			d.Status.UpdatedReplicas == replicas && d.Status.Replicas == replicas && d.Status.AvailableReplicas == replicas, nil
	})
}

// strategyOf returns a Deployment's "maxSurge/maxUnavailable".
func strategyOf(d *appsv1.Deployment) string {
	ru := d.Spec.Strategy.RollingUpdate
	if ru == nil {
		return string(d.Spec.Strategy.Type)
	}
	s := func(v *intstr.IntOrString) string {
		if v == nil {
			return "nil"
		}
		return v.String()
	}
	return s(ru.MaxSurge) + "/" + s(ru.MaxUnavailable)
}

func imageOf(d *appsv1.Deployment) string { return d.Spec.Template.Spec.Containers[0].Image }

// ownsReplicas reports whether manager owns .spec.replicas of d.
func ownsReplicas(t *testing.T, d *appsv1.Deployment, manager string) bool {
	t.Helper()
	for _, mf := range d.ManagedFields {
		if mf.Manager != manager || mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]any
		require.NoError(t, json.Unmarshal(mf.FieldsV1.Raw, &fields))
		if _, ok := fields["f:spec"]["f:replicas"]; ok {
			return true
		}
	}
	return false
}

// deploymentWatch records every version of the release's Deployment from
// the moment it starts.
type deploymentWatch struct {
	mu   sync.Mutex
	seen []appsv1.Deployment
	stop func()
	done chan struct{}
}

// retryWatch watches from resourceVersion rv with a RetryWatcher: other
// tests restart the API server, which ends plain watches.
func retryWatch(t *testing.T, rv string, watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)) (watch.Interface, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: watchFunc})
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	return w, func() { w.Stop(); cancel() }
}

func (f *relFixture) watchDeployment(t *testing.T) *deploymentWatch {
	t.Helper()
	d := f.deployment(t)
	deps := f.client.AppsV1().Deployments(f.namespace)
	w, stop := retryWatch(t, d.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = "metadata.name=" + relName
		return deps.Watch(ctx, o)
	})
	dw := &deploymentWatch{seen: []appsv1.Deployment{*d}, done: make(chan struct{}), stop: stop}
	go func() {
		defer close(dw.done)
		for ev := range w.ResultChan() {
			if dep, ok := ev.Object.(*appsv1.Deployment); ok {
				dw.mu.Lock()
				dw.seen = append(dw.seen, *dep)
				dw.mu.Unlock()
			}
		}
	}()
	t.Cleanup(dw.stop)
	return dw
}

// versions waits until the watch has seen the Deployment's current
// version, stops it and returns every version seen.
func (dw *deploymentWatch) versions(t *testing.T, f *relFixture) []appsv1.Deployment {
	t.Helper()
	rv := f.deployment(t).ResourceVersion
	eventually(t, 30*time.Second, "the watch sees resourceVersion "+rv, func(context.Context) (bool, error) {
		dw.mu.Lock()
		defer dw.mu.Unlock()
		return dw.seen[len(dw.seen)-1].ResourceVersion == rv, nil
	})
	dw.stop()
	<-dw.done
	dw.mu.Lock()
	defer dw.mu.Unlock()
	return append([]appsv1.Deployment(nil), dw.seen...)
}

// replicaSetWatch follows the ReplicaSets of the test namespace and keeps
// the largest number of pods they asked for at once (the sum of their
// spec.replicas): the Deployment controller's surge, free of the lag of
// status counts.
type replicaSetWatch struct {
	mu      sync.Mutex
	desired map[string]int32
	most    int32
	stop    func()
	done    chan struct{}
}

func (f *relFixture) watchReplicaSets(t *testing.T) *replicaSetWatch {
	t.Helper()
	rss := f.client.AppsV1().ReplicaSets(f.namespace)
	list, err := rss.List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	w, stop := retryWatch(t, list.ResourceVersion, rss.Watch)
	rw := &replicaSetWatch{desired: map[string]int32{}, done: make(chan struct{}), stop: stop}
	for i := range list.Items {
		rw.observe(&list.Items[i], false)
	}
	go func() {
		defer close(rw.done)
		for ev := range w.ResultChan() {
			if rs, ok := ev.Object.(*appsv1.ReplicaSet); ok {
				rw.observe(rs, ev.Type == watch.Deleted)
			}
		}
	}()
	t.Cleanup(rw.stop)
	return rw
}

func (rw *replicaSetWatch) observe(rs *appsv1.ReplicaSet, deleted bool) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if deleted {
		delete(rw.desired, rs.Name)
		return
	}
	rw.desired[rs.Name] = ptr.Deref(rs.Spec.Replicas, 0)
	var sum int32
	for _, n := range rw.desired {
		sum += n
	}
	rw.most = max(rw.most, sum)
}

// mostPods stops the watch and returns the most pods the ReplicaSets
// asked for at once.
func (rw *replicaSetWatch) mostPods() int32 {
	rw.stop()
	<-rw.done
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.most
}

// preflightLine returns the preflight report of a --progress json run.
func preflightLine(t *testing.T, r relRun) *preflight.Report {
	t.Helper()
	for _, ev := range progressEvents(r.stderr) {
		if ev.Phase == release.PhasePreflight && ev.Preflight != nil {
			return ev.Preflight
		}
	}
	require.Fail(t, "no preflight line", "%s", r)
	return nil
}

// TestSurgeFullPool: 2 replicas × 8 GPUs fill the pool (16 GPUs), so the
// chart's maxSurge 1 cannot start a surge pod.
func TestSurgeFullPool(t *testing.T) {
	f := newIsolatedFixture(t)
	// The PDB (the chart's maxUnavailable 1) allows one disruption.
	base := []string{"--set", "replicaCount=2", "--set", "podDisruptionBudget.enabled=true"}
	upgrade := append(append([]string(nil), base...), "--set", "image.tag=v0.11.1")

	r := f.vllm(t, base...)
	require.Equal(t, 0, r.code, "the first deploy fits: %s", r)
	f.waitRolledOut(t, 2)
	before := f.deployment(t)
	require.Equal(t, "1/0", strategyOf(before), "the chart's strategy")
	require.Equal(t, "vllm/vllm-openai:v0.11.0", imageOf(before))
	unchanged := func(t *testing.T, what string) {
		t.Helper()
		assert.Equal(t, []storage.Status{storage.StatusDeployed}, statuses(f.history(t)), "%s: nothing recorded", what)
		d := f.deployment(t)
		assert.Equal(t, before.Generation, d.Generation, "%s: the live Deployment unchanged", what)
		assert.Equal(t, imageOf(before), imageOf(d), what)
		assert.Equal(t, "1/0", strategyOf(d), what)
	}

	t.Run("strict refuses before applying", func(t *testing.T) {
		r := f.vllm(t, append(upgrade, "--surge-policy", "strict", "-o", "json")...)
		assert.Equal(t, 2, r.code, "%s", r)
		assert.Empty(t, r.stdout, "no result document: nothing happened")
		assert.Contains(t, r.stderr, "rollout preflight refused (surge policy strict); nothing was applied")
		assert.Contains(t, r.stderr, "nvidia.com/gpu: need 8, free 0 on nodes gpu-isolated-1, gpu-isolated-2")
		assert.NotContains(t, r.stderr, "lock:", "no lock taken")
		unchanged(t, "strict")
	})

	t.Run("a PDB allowing no disruption: auto refuses too", func(t *testing.T) {
		r := f.vllm(t, append(upgrade, "--set", "podDisruptionBudget.maxUnavailable=0")...)
		assert.Equal(t, 2, r.code, "%s", r)
		assert.Contains(t, r.stderr, "rollout preflight refused (surge policy auto)")
		assert.Contains(t, r.stderr, "PodDisruptionBudget chat allows 0 of 2 pods down")
		unchanged(t, "auto, PDB")
	})

	t.Run("a pod asking 16 GPUs fits no node in either mode", func(t *testing.T) {
		for _, policy := range []string{"auto", "strict"} {
			r := f.vllm(t, append(upgrade, "--set", "resources.gpu=16", "--surge-policy", policy)...)
			assert.Equal(t, 2, r.code, "%s: %s", policy, r)
			assert.Contains(t, r.stderr, "rollout preflight refused (surge policy "+policy+"); nothing was applied")
			assert.Contains(t, r.stderr, "nvidia.com/gpu: need 16, free 8 on allocatable of the largest matching node", policy)
			unchanged(t, policy+", 16 GPUs")
		}
	})

	t.Run("auto replaces one pod at a time", func(t *testing.T) {
		watch, rsWatch := f.watchDeployment(t), f.watchReplicaSets(t)
		r := f.vllm(t, append(upgrade, "-o", "json")...)
		require.Equal(t, 0, r.code, "%s", r)
		res := result(t, r)
		wantNote := "surge policy auto: Deployment chat maxSurge 1→0, maxUnavailable 0→1 (nvidia.com/gpu: need 8, free 0 on nodes gpu-isolated-1, gpu-isolated-2)"
		assert.Equal(t, "Upgrade complete; "+wantNote, res.Description)
		assert.Contains(t, r.stderr, "WARNING: "+wantNote)
		require.NotNil(t, res.Preflight)
		require.Len(t, res.Preflight.Deployments, 1)
		p := res.Preflight.Deployments[0]
		assert.True(t, p.Adjusted)
		assert.Equal(t, preflight.VerdictSurgeBlocked, p.Verdict)
		require.NotNil(t, p.Effective)
		assert.Equal(t, int32(0), p.Effective.Surge)
		assert.Equal(t, int32(1), p.Effective.Unavailable)

		revs := f.history(t)
		require.Len(t, revs, 2, "the refusals recorded nothing")
		assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusDeployed}, statuses(revs))
		assert.Equal(t, res.Description, revs[1].Description, "the record says what changed")
		assert.Contains(t, revs[1].Manifest, "maxSurge: 0", "the recorded manifest is what was applied")

		// What the Deployment controller rolled out with: 0/1 from the
		// moment the new template was applied, and never a pod more than
		// the 2 replicas.
		var during int
		for _, d := range watch.versions(t, f) {
			if imageOf(&d) != "vllm/vllm-openai:v0.11.1" {
				assert.Equal(t, "1/0", strategyOf(&d), "before the apply")
				continue
			}
			assert.Equal(t, "0/1", strategyOf(&d), "during the rollout (resourceVersion %s)", d.ResourceVersion)
			if d.Status.UpdatedReplicas < 2 || d.Status.Replicas > d.Status.UpdatedReplicas {
				during++
			}
		}
		assert.Positive(t, during, "the watch saw the rollout in progress")
		assert.Equal(t, int32(2), rsWatch.mostPods(), "no surge pod")
		f.waitRolledOut(t, 2)
	})

	t.Run("the same inputs again restore the chart's strategy, then are up to date", func(t *testing.T) {
		rs := f.history(t)[1].ReplicaSets
		r := f.vllm(t, append(upgrade, "-o", "json")...)
		require.Equal(t, 0, r.code, "%s", r)
		res := result(t, r)
		assert.Equal(t, 3, res.Revision)
		assert.Equal(t, "Upgrade complete", res.Description, "the template is unchanged: nothing to adjust")
		assert.Equal(t, rs[0].Name, res.ReplicaSets[0].Name, "no new ReplicaSet")
		assert.Equal(t, "1/0", strategyOf(f.deployment(t)))

		r = f.vllm(t, upgrade...)
		require.Equal(t, 0, r.code, "%s", r)
		assert.Contains(t, r.stderr, "release chat is up to date (revision 3)")
		assert.Len(t, f.history(t), 3)
	})
}

// TestSurgeRoom: 3 replicas × 2 GPUs on a 16-GPU pool leave room for the
// surge pod: neither policy touches the strategy.
func TestSurgeRoom(t *testing.T) {
	f := newIsolatedFixture(t)
	base := []string{"--set", "replicaCount=3", "--set", "resources.gpu=2"}
	r := f.vllm(t, base...)
	require.Equal(t, 0, r.code, "%s", r)
	f.waitRolledOut(t, 3)

	for i, policy := range []string{"strict", "auto"} {
		tag := fmt.Sprintf("v0.11.%d", i+1)
		watch, rsWatch := f.watchDeployment(t), f.watchReplicaSets(t)
		r := f.vllm(t, append(base, "--set", "image.tag="+tag, "--surge-policy", policy, "-o", "json")...)
		require.Equal(t, 0, r.code, "%s: %s", policy, r)
		res := result(t, r)
		assert.Equal(t, "Upgrade complete", res.Description, "%s: no note, nothing changed", policy)
		assert.NotContains(t, r.stderr, "WARNING", policy)
		require.NotNil(t, res.Preflight, policy)
		p := res.Preflight.Deployments[0]
		assert.Equal(t, preflight.VerdictFits, p.Verdict, policy)
		assert.Nil(t, p.Effective, policy)
		assert.Equal(t, int32(3), p.Replicas, policy)
		for _, d := range watch.versions(t, f) {
			assert.Equal(t, "1/0", strategyOf(&d), "%s: resourceVersion %s", policy, d.ResourceVersion)
		}
		assert.Equal(t, int32(4), rsWatch.mostPods(), "%s: the rollout surged one pod", policy)
		assert.Equal(t, "vllm/vllm-openai:"+tag, imageOf(f.deployment(t)))
		f.waitRolledOut(t, 3)
	}
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusDeployed}, statuses(f.history(t)))
}

// TestSurgeQuota: a ResourceQuota of 4 GPUs held by 2 × 2-GPU pods leaves
// no room for the surge pod, though the nodes have plenty.
func TestSurgeQuota(t *testing.T) {
	f := newIsolatedFixture(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-quota"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("4")}},
	}
	_, err := f.client.CoreV1().ResourceQuotas(f.namespace).Create(ctx, quota, metav1.CreateOptions{})
	require.NoError(t, err)
	quotaUsed := func(ctx context.Context) (int64, bool, error) {
		q, err := f.client.CoreV1().ResourceQuotas(f.namespace).Get(ctx, "gpu-quota", metav1.GetOptions{})
		if err != nil {
			return 0, false, err
		}
		used, ok := q.Status.Used["requests.nvidia.com/gpu"]
		return used.Value(), ok && len(q.Status.Hard) > 0, nil
	}
	eventually(t, 30*time.Second, "quota status computed", func(ctx context.Context) (bool, error) {
		_, ok, err := quotaUsed(ctx)
		return ok, err
	})

	base := []string{"--set", "replicaCount=2", "--set", "resources.gpu=2"}
	upgrade := append(append([]string(nil), base...), "--set", "image.tag=v0.11.1")
	r := f.vllm(t, base...)
	require.Equal(t, 0, r.code, "%s", r)
	f.waitRolledOut(t, 2)
	eventually(t, 30*time.Second, "quota usage 4", func(ctx context.Context) (bool, error) {
		used, _, err := quotaUsed(ctx)
		return used == 4, err
	})
	first := f.deployment(t)

	r = f.vllm(t, append(upgrade, "--surge-policy", "strict")...)
	assert.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "rollout preflight refused (surge policy strict); nothing was applied")
	assert.Contains(t, r.stderr, "requests.nvidia.com/gpu: need 2, free 0 on quota gpu-quota (hard 4, used 4; 1 surge pod next to the old ones), short 2")
	assert.Equal(t, []storage.Status{storage.StatusDeployed}, statuses(f.history(t)))
	assert.Equal(t, first.Generation, f.deployment(t).Generation)

	// Without the preflight the quota refuses the surge pod: the watcher
	// fails the rollout on FailedCreate and rolls back.
	r = f.vllm(t, append(upgrade, "--skip-preflight", "-o", "json")...)
	assert.Equal(t, 3, r.code, "%s", r)
	res := result(t, r)
	assert.Equal(t, storage.StatusFailed, res.Status)
	assert.Equal(t, 1, res.RolledBackTo)
	require.NotNil(t, res.Failure)
	assert.Equal(t, "FailedCreate", res.Failure.Reason)
	assert.Contains(t, res.Failure.Message, "exceeded quota: gpu-quota")
	assert.Nil(t, res.Preflight, "skipped")
	revs := f.history(t)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusFailed, storage.StatusDeployed}, statuses(revs))
	assert.Equal(t, "Rollback to 1", revs[2].Description)
	assert.Equal(t, imageOf(first), imageOf(f.deployment(t)), "revision 1's template serves again")
	f.waitRolledOut(t, 2)

	// auto replaces the pods in place, within the quota.
	r = f.vllm(t, append(upgrade, "-o", "json")...)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Equal(t, "Upgrade complete; surge policy auto: Deployment chat maxSurge 1→0, maxUnavailable 0→1 (requests.nvidia.com/gpu: need 2, free 0 on quota gpu-quota)",
		result(t, r).Description)
	assert.Equal(t, "vllm/vllm-openai:v0.11.1", imageOf(f.deployment(t)))
}

// TestSurgeHPA: with the chart's autoscaling on, the Deployment sets no
// replicas; the preflight counts the live replicas the HPA keeps, and no
// deploy ever sets them.
func TestSurgeHPA(t *testing.T) {
	f := newIsolatedFixture(t)
	hpa := []string{"--set", "autoscaling.enabled=true", "--set", "autoscaling.maxReplicas=2"}
	noReplicas := func(t *testing.T, what string) {
		t.Helper()
		d := f.deployment(t)
		assert.Equal(t, int32(2), ptr.Deref(d.Spec.Replicas, -1), "%s: replicas as the HPA set them", what)
		assert.False(t, ownsReplicas(t, d, cluster.FieldManager), "%s: vllmctl never owns .spec.replicas", what)
	}

	// Installed with minReplicas 2: the HPA scales the Deployment to 2,
	// which fill the pool.
	r := f.vllm(t, append(hpa, "--set", "autoscaling.minReplicas=2", "-o", "json")...)
	require.Equal(t, 0, r.code, "%s", r)
	p := result(t, r).Preflight.Deployments[0]
	assert.Equal(t, int32(2), p.Replicas)
	assert.Equal(t, "HorizontalPodAutoscaler chat minReplicas", p.ReplicasFrom)
	f.waitRolledOut(t, 2)
	noReplicas(t, "install")

	// minReplicas 1 now, but the HPA keeps 2 replicas (no metrics to scale
	// down on): the preflight counts the live 2, so a surge pod does not
	// fit, and auto may take one of the 2 down.
	upgrade := append(append([]string(nil), hpa...), "--set", "autoscaling.minReplicas=1", "--set", "image.tag=v0.11.1")
	r = f.vllm(t, append(upgrade, "--surge-policy", "strict", "--progress", "json")...)
	assert.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "nvidia.com/gpu: need 8, free 0 on nodes gpu-isolated-1, gpu-isolated-2")
	p = preflightLine(t, r).Deployments[0]
	assert.Equal(t, int32(2), p.Replicas)
	assert.Equal(t, "live (HorizontalPodAutoscaler chat)", p.ReplicasFrom)
	assert.Len(t, f.history(t), 1)
	noReplicas(t, "strict")

	r = f.vllm(t, append(upgrade, "-o", "json")...)
	require.Equal(t, 0, r.code, "%s", r)
	res := result(t, r)
	p = res.Preflight.Deployments[0]
	assert.Equal(t, int32(2), p.Replicas)
	assert.Equal(t, "live (HorizontalPodAutoscaler chat)", p.ReplicasFrom)
	assert.Contains(t, res.Description, "surge policy auto: Deployment chat maxSurge 1→0, maxUnavailable 0→1")
	f.waitRolledOut(t, 2)
	noReplicas(t, "auto")

	// Repeated deploys: the strategy goes back to the chart's, then
	// nothing changes; replicas are never set.
	for i := range 2 {
		r = f.vllm(t, upgrade...)
		require.Equal(t, 0, r.code, "deploy %d: %s", i, r)
		noReplicas(t, fmt.Sprintf("deploy %d", i))
	}
	assert.Contains(t, r.stderr, "is up to date (revision 3)")
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusDeployed}, statuses(f.history(t)))
}
