//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vllmctl/vllmctl/release/storage"
)

// wait runs `vllmctl wait chat args... --progress plain`.
func (f *relFixture) wait(t *testing.T, args ...string) relRun {
	t.Helper()
	return f.run(t, append([]string{"wait", relName, "--progress", "plain", "--timeout", "2m"}, args...)...)
}

// image returns the image of the release Deployment's server container.
func (f *relFixture) image(t *testing.T) string {
	t.Helper()
	d, err := f.client.AppsV1().Deployments(f.namespace).Get(context.Background(), relName, metav1.GetOptions{})
	require.NoError(t, err)
	return d.Spec.Template.Spec.Containers[0].Image
}

func TestWaitCommandOnTheCluster(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()

	r := f.deploy(t, "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	res1 := result(t, r)

	// Healthy: exit 0, nothing written.
	w := f.wait(t, "-o", "json")
	require.Equal(t, 0, w.code, "%s", w)
	res := result(t, w)
	assert.Equal(t, 1, res.Revision)
	assert.Equal(t, storage.StatusDeployed, res.Status)
	assert.Nil(t, res.Failure)
	assert.Contains(t, w.stderr, "chat#1 done: deployed: healthy")
	assert.Equal(t, []storage.Status{storage.StatusDeployed}, statuses(f.history(t)))

	// Another manager sets a crashing image (`kubectl set image`).
	_, err := f.client.AppsV1().Deployments(f.namespace).Patch(ctx, relName, types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"server","image":"example.com/vllm:crash"}]}}}}`),
		metav1.PatchOptions{FieldManager: "kubectl-set"})
	require.NoError(t, err)

	// wait: exit 4 with the diagnosis; the records stay as they are.
	start := time.Now()
	w = f.wait(t, "-o", "json")
	require.Equal(t, 4, w.code, "%s", w)
	t.Logf("crash detected in %s", time.Since(start).Round(100*time.Millisecond))
	res = result(t, w)
	assert.Equal(t, 1, res.Revision)
	require.NotNil(t, res.Failure, "%s", w)
	assert.Equal(t, "CrashLoopBackOff", res.Failure.Reason)
	assert.Equal(t, "deployment/chat", res.Failure.Object)
	assert.NotEmpty(t, res.Failure.Pod)
	assert.Equal(t, "server", res.Failure.Container)
	assert.Equal(t, int32(1), res.Failure.ExitCode)
	assert.Zero(t, res.RolledBackTo)
	assert.Contains(t, w.stderr, "the pod template was changed outside vllmctl")
	assert.Contains(t, w.stderr, "Error: release chat revision 1: rollout failed")
	assert.Equal(t, []storage.Status{storage.StatusDeployed}, statuses(f.history(t)))
	assert.Equal(t, "example.com/vllm:crash", f.image(t))

	// --rollback-on-failure without --force-conflicts: the image belongs to
	// kubectl-set now, the rollback's apply is refused (exit 4).
	w = f.wait(t, "--rollback-on-failure")
	require.Equal(t, 4, w.code, "%s", w)
	assert.Contains(t, w.stderr, `owned by "kubectl-set"`)
	assert.Contains(t, w.stderr, "--force-conflicts")
	revs := f.history(t)
	assert.Equal(t, []storage.Status{storage.StatusDeployed, storage.StatusFailed}, statuses(revs))
	assert.Equal(t, "Rollback to 1 failed: FieldManagerConflict", revs[1].Description)

	// With --force-conflicts: revision 1's manifest is re-applied, exit 3.
	w = f.wait(t, "--rollback-on-failure", "--force-conflicts", "-o", "json")
	require.Equal(t, 3, w.code, "%s", w)
	res = result(t, w)
	assert.Equal(t, 2, res.Revision, "the waited revision: the failed rollback's record")
	assert.Equal(t, 1, res.RolledBackTo)
	require.NotNil(t, res.Failure)
	assert.Equal(t, "CrashLoopBackOff", res.Failure.Reason)
	assert.Contains(t, w.stderr, "chat#3 done: deployed: Rollback to 1")
	revs = f.history(t)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusFailed, storage.StatusDeployed}, statuses(revs))
	assert.Equal(t, "Rollback to 1", revs[2].Description)
	assert.Equal(t, 1, revs[2].RollbackOf)
	require.Len(t, revs[2].ReplicaSets, 1)
	assert.Equal(t, res1.ReplicaSets[0].PodTemplateHash, revs[2].ReplicaSets[0].PodTemplateHash, "revision 1's ReplicaSet serves")
	assert.Equal(t, "example.com/vllm:v1", f.image(t))

	w = f.wait(t)
	require.Equal(t, 0, w.code, "%s", w)
	assert.Contains(t, w.stdout, "REVISION: 3\n")

	// Another operation holds the lock: exit 5, nothing waited for.
	_, err = storage.Acquire(ctx, f.store, relName, storage.OpDeploy, storage.LockOptions{Holder: "bob@ci pid 7"})
	require.NoError(t, err)
	w = f.wait(t)
	assert.Equal(t, 5, w.code, "%s", w)
	assert.Contains(t, w.stderr, "held by bob@ci pid 7")
	assert.Empty(t, w.stdout)

	// An unknown release: exit 2.
	w = f.run(t, "wait", "nope")
	assert.Equal(t, 2, w.code, "%s", w)
	assert.Contains(t, w.stderr, "release nope not found")
}
