package release_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// threeRevisions deploys revisions 1 (base), 2 (image) and 3 (args,
// greeting, port, an extra ConfigMap) and returns their results.
func threeRevisions(t *testing.T, f *engFixture) []*release.Result {
	t.Helper()
	s := baseSpec()
	r1 := f.deploy(t, s)
	s.image = "vllm/vllm-openai:v0.11.0"
	r2 := f.deploy(t, s)
	s.args = []string{"--model=b"}
	s.greeting = "bonjour"
	s.port = 9000
	s.extra = true
	r3 := f.deploy(t, s)
	return []*release.Result{r1, r2, r3}
}

func TestRollbackToRevision(t *testing.T) {
	f := newEngFixture(t)
	revs := threeRevisions(t, f)
	res, err := f.engine.Rollback(context.Background(),
		release.RollbackOptions{Name: engRelease, ToRevision: 1, Timeout: time.Minute})
	require.NoError(t, err)

	assert.Equal(t, 4, res.Revision)
	assert.Equal(t, storage.StatusDeployed, res.Status)
	assert.Equal(t, 1, res.RolledBackTo)
	assert.Equal(t, "Rollback to 1", res.Description)
	assert.Equal(t, map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusSuperseded,
		3: storage.StatusSuperseded, 4: storage.StatusDeployed}, f.statuses(t))
	rec := f.record(t, 4)
	assert.Equal(t, "Rollback to 1", rec.Description)
	assert.Equal(t, 1, rec.RollbackOf)
	assert.Equal(t, f.record(t, 1).Manifest, rec.Manifest, "revision 1's manifest, not re-rendered")
	assert.Equal(t, f.record(t, 1).Values, rec.Values)

	require.Len(t, res.ReplicaSets, 1)
	rs := res.ReplicaSets[0]
	assert.Equal(t, revs[0].ReplicaSets[0].Name, rs.Name, "revision 1's ReplicaSet is reused")
	assert.Equal(t, revs[0].ReplicaSets[0].PodTemplateHash, rs.PodTemplateHash)
	assert.Equal(t, int64(4), rs.Revision, "with its new Deployment revision number")
	assert.Equal(t, res.ReplicaSets, rec.ReplicaSets)

	assert.Equal(t, "hello", f.configMap("chat-config").Object["data"].(map[string]any)["greeting"], "ConfigMap restored")
	port, _, _ := unstructured.NestedSlice(f.cluster.Object("", "Service", engNS, "chat").Object, "spec", "ports")
	assert.Equal(t, int64(8000), port[0].(map[string]any)["port"], "Service restored")
	assert.Nil(t, f.configMap("chat-extra"), "revision 3's extra object is pruned")
	assert.Equal(t, []object.Ref{{Version: "v1", Kind: "ConfigMap", Namespace: engNS, Name: "chat-extra"}}, res.Pruned)
	assert.Positive(t, f.phases()[release.PhaseRollback], "verification reported")
}

func TestRollbackDefaultTarget(t *testing.T) {
	t.Run("after a deployed revision: the one before", func(t *testing.T) {
		f := newEngFixture(t)
		threeRevisions(t, f)
		res, err := f.engine.Rollback(context.Background(), release.RollbackOptions{Name: engRelease})
		require.NoError(t, err)
		assert.Equal(t, 2, res.RolledBackTo)
		// Again: the previous good one before 4 is 3.
		res, err = f.engine.Rollback(context.Background(), release.RollbackOptions{Name: engRelease})
		require.NoError(t, err)
		assert.Equal(t, 3, res.RolledBackTo)
		assert.Equal(t, 5, res.Revision)
	})
	t.Run("after a failed revision: the deployed one", func(t *testing.T) {
		f := newEngFixture(t)
		f.deploy(t, baseSpec())
		s := baseSpec()
		s.image = "v2"
		r2 := f.deploy(t, s)
		f.waiter.Script = releasetest.FailKind("Deployment", wait.OutcomeFailed, "CrashLoopBackOff")
		s.image = "crash"
		_, err := f.engine.Deploy(context.Background(), s.options())
		require.Error(t, err)
		f.waiter.Script = nil
		res, err := f.engine.Rollback(context.Background(), release.RollbackOptions{Name: engRelease})
		require.NoError(t, err)
		assert.Equal(t, 2, res.RolledBackTo)
		assert.Equal(t, r2.ReplicaSets[0].PodTemplateHash, res.ReplicaSets[0].PodTemplateHash)
		assert.Equal(t, map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusSuperseded,
			3: storage.StatusFailed, 4: storage.StatusDeployed}, f.statuses(t))
	})
}

func TestRollbackRefusesBadRevisions(t *testing.T) {
	cases := []struct {
		name string
		opts release.RollbackOptions
		want string
	}{
		{"unknown revision", release.RollbackOptions{Name: engRelease, ToRevision: 7},
			"revision 7 of release chat not found; revisions: 1, 2"},
		{"negative revision", release.RollbackOptions{Name: engRelease, ToRevision: -1}, "revision -1 must be 1 or more"},
		{"unknown release", release.RollbackOptions{Name: "nope"}, "release nope not found in namespace ml"},
		{"invalid name", release.RollbackOptions{Name: "No_pe"}, `invalid release name "No_pe"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newEngFixture(t)
			f.deploy(t, baseSpec())
			s := baseSpec()
			s.image = "v2"
			f.deploy(t, s)
			applies := f.cluster.Applies()
			res, err := f.engine.Rollback(context.Background(), tc.opts)
			require.Error(t, err)
			assert.Nil(t, res)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, 2, exitCode(err))
			assert.Equal(t, applies, f.cluster.Applies(), "nothing applied")
			assert.Len(t, f.statuses(t), 2, "no record written")
		})
	}
	t.Run("nothing to roll back to", func(t *testing.T) {
		f := newEngFixture(t)
		f.deploy(t, baseSpec())
		_, err := f.engine.Rollback(context.Background(), release.RollbackOptions{Name: engRelease})
		require.Error(t, err)
		assert.Equal(t, 2, exitCode(err))
		assert.Contains(t, err.Error(), "no deployed or superseded revision before revision 1 to roll back to; revisions: 1")
	})
}

func TestRollbackVerifiesThePodTemplate(t *testing.T) {
	ctx := context.Background()
	f := newEngFixture(t)
	f.deploy(t, baseSpec())
	s := baseSpec()
	s.image = "v2"
	f.deploy(t, s)
	// Revision 1's record says it ran another pod template than its
	// manifest gives now (as when another field manager changed it).
	r1 := f.record(t, 1)
	r1.ReplicaSets[0].PodTemplateHash = "other"
	require.NoError(t, f.store.Update(ctx, r1))

	res, err := f.engine.Rollback(ctx, release.RollbackOptions{Name: engRelease, ToRevision: 1})
	require.Error(t, err)
	assert.Equal(t, 4, exitCode(err))
	assert.Equal(t, "PodTemplateMismatch", res.Failure.Reason)
	assert.Contains(t, err.Error(), "pod-template-hash other")
	assert.Equal(t, storage.StatusFailed, f.statuses(t)[3])
	assert.Equal(t, "Rollback to 1 failed: PodTemplateMismatch (Deployment/chat)", f.record(t, 3).Description)
	assert.Equal(t, storage.StatusDeployed, f.statuses(t)[2])
}

func TestRollbackWaitFailure(t *testing.T) {
	f := newEngFixture(t)
	threeRevisions(t, f)
	f.waiter.Script = releasetest.FailKind("Deployment", wait.OutcomeTimeout, "Available: 0/1")
	res, err := f.engine.Rollback(context.Background(), release.RollbackOptions{Name: engRelease, ToRevision: 2})
	var re *release.RolloutError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 4, exitCode(err))
	assert.Contains(t, err.Error(), "rollback failed")
	assert.Equal(t, "Timeout", res.Failure.Reason)
	assert.Equal(t, storage.StatusFailed, f.statuses(t)[4])
	assert.Equal(t, storage.StatusDeployed, f.statuses(t)[3])
}

func TestRollbackLocked(t *testing.T) {
	ctx := context.Background()
	f := newEngFixture(t)
	threeRevisions(t, f)
	_, err := storage.Acquire(ctx, f.store, engRelease, storage.OpDeploy, storage.LockOptions{Holder: "bob"})
	require.NoError(t, err)
	_, err = f.engine.Rollback(ctx, release.RollbackOptions{Name: engRelease, ToRevision: 1})
	assert.Equal(t, 5, exitCode(err))
	res, err := f.engine.Rollback(ctx, release.RollbackOptions{Name: engRelease, ToRevision: 1, ForceUnlock: true})
	require.NoError(t, err)
	assert.Equal(t, 5, res.Revision)
}
