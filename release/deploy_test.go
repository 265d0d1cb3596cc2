package release_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/preflight"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

func TestDeployRevisions(t *testing.T) {
	f := newEngFixture(t)
	s := baseSpec()
	r1 := f.deploy(t, s)
	s.image = "vllm/vllm-openai:v0.11.0"
	r2 := f.deploy(t, s)
	s.args = []string{"--model=a", "--max-model-len=4096"}
	r3 := f.deploy(t, s)

	assert.Equal(t, map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusSuperseded, 3: storage.StatusDeployed}, f.statuses(t))
	for i, want := range []struct {
		res  *release.Result
		desc string
	}{{r1, "Install complete"}, {r2, "Upgrade complete"}, {r3, "Upgrade complete"}} {
		rev := i + 1
		assert.Equal(t, rev, want.res.Revision)
		assert.Equal(t, storage.StatusDeployed, want.res.Status, "status in the result of revision %d", rev)
		assert.Equal(t, want.desc, f.record(t, rev).Description)
		assert.Equal(t, engRelease, want.res.Release)
		assert.Equal(t, engNS, want.res.Namespace)
		assert.Equal(t, "test-0.1.0", want.res.Chart)
		require.Len(t, want.res.ReplicaSets, 1)
		rs := want.res.ReplicaSets[0]
		assert.Equal(t, int64(rev), rs.Revision, "Deployment revision of revision %d", rev)
		assert.Equal(t, "chat", rs.Deployment)
		assert.Equal(t, "chat-"+rs.PodTemplateHash, rs.Name)
		assert.Equal(t, want.res.ReplicaSets, f.record(t, rev).ReplicaSets, "recorded")
		assert.Positive(t, want.res.DurationSeconds)
	}
	hashes := map[string]bool{}
	for _, r := range []*release.Result{r1, r2, r3} {
		hashes[r.ReplicaSets[0].PodTemplateHash] = true
	}
	assert.Len(t, hashes, 3, "three distinct ReplicaSets")

	rec := f.record(t, 3)
	assert.Contains(t, rec.Manifest, "--max-model-len=4096")
	assert.Equal(t, map[string]any{"image": "vllm/vllm-openai:v0.11.0"}, rec.Values)
	assert.Equal(t, 3, f.waiter.Calls())
	ph := f.phases()
	for _, p := range []release.Phase{release.PhaseLock, release.PhaseApply, release.PhaseReplicaSet, release.PhaseWait, release.PhaseDone} {
		assert.Positive(t, ph[p], "progress phase %s", p)
	}
}

func TestDeployDryRunRecordsNothing(t *testing.T) {
	f := newEngFixture(t)
	opts := baseSpec().options()
	opts.DryRun = true
	res, err := f.engine.Deploy(context.Background(), opts)
	require.NoError(t, err)
	assert.True(t, res.DryRun)
	assert.Equal(t, 1, res.Revision)
	assert.Equal(t, storage.StatusPendingInstall, res.Status)
	assert.Len(t, res.Applied, 3)
	assert.Empty(t, f.statuses(t), "no record, no lock")
	assert.Empty(t, f.cluster.Refs(), "nothing applied")
	assert.Zero(t, f.waiter.Calls())

	f.deploy(t, baseSpec())
	res, err = f.engine.Deploy(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Revision)
	assert.Equal(t, storage.StatusPendingUpgrade, res.Status)
	assert.Equal(t, map[int]storage.Status{1: storage.StatusDeployed}, f.statuses(t))
}

func TestDeployRefusesBadInputBeforeLocking(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*release.DeployOptions, *release.Engine)
		want   string
	}{
		{name: "invalid release name", mutate: func(o *release.DeployOptions, _ *release.Engine) { o.Name = "Chat_1" },
			want: `invalid release name "Chat_1"`},
		{name: "bad manifest", mutate: func(o *release.DeployOptions, _ *release.Engine) {
			o.Render.Chart.Templates[0].Data = []byte("kind: [\n")
		}, want: "templates/objects.yaml"},
		{name: "preflight refuses", mutate: func(o *release.DeployOptions, _ *release.Engine) {
			s := baseSpec()
			s.gpus = 16 // the fake cluster's only node has 8
			*o = s.options()
		}, want: "nvidia.com/gpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newEngFixture(t)
			opts := baseSpec().options()
			d := f.engine
			tc.mutate(&opts, d)
			res, err := d.Deploy(context.Background(), opts)
			require.Error(t, err)
			assert.Nil(t, res)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, 2, exitCode(err))
			assert.Empty(t, f.cluster.Refs())
			if tc.name != "invalid release name" {
				assert.Empty(t, f.statuses(t))
			}
		})
	}
}

func TestDeployFieldConflictMarksFailed(t *testing.T) {
	f := newEngFixture(t)
	f.deploy(t, baseSpec())
	conflict := &cluster.FieldConflictError{
		Object:    object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: engNS, Name: "chat"},
		Conflicts: []cluster.FieldConflict{{Manager: "kubectl-scale", Field: ".spec.replicas"}},
		Err:       apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "chat", errors.New("conflict")),
	}
	f.cluster.ApplyHook = func(obj *unstructured.Unstructured, opts cluster.ApplyOptions) error {
		if obj.GetKind() == "Deployment" && !opts.Force {
			return conflict
		}
		return nil
	}
	s := baseSpec()
	s.image = "vllm/vllm-openai:v0.11.0"
	res, err := f.engine.Deploy(context.Background(), s.options())
	require.Error(t, err)
	assert.Equal(t, 6, exitCode(err))
	var ce *cluster.FieldConflictError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), `"kubectl-scale"`)
	assert.Equal(t, map[int]storage.Status{1: storage.StatusDeployed, 2: storage.StatusFailed}, f.statuses(t))
	require.NotNil(t, res.Failure)
	assert.Equal(t, "FieldManagerConflict", res.Failure.Reason)
	assert.Equal(t, "Deployment/chat", res.Failure.Object)
	assert.Equal(t, storage.StatusFailed, res.Status)
	assert.Equal(t, "FieldManagerConflict", f.record(t, 2).Failure.Reason)
	assert.Equal(t, 1, f.waiter.Calls(), "no wait after a refused apply")

	opts := s.options()
	opts.ForceConflicts = true
	res, err = f.engine.Deploy(context.Background(), opts)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Revision)
	assert.Equal(t, storage.StatusDeployed, f.statuses(t)[3])
}

func TestDeployRolloutFailure(t *testing.T) {
	for _, outcome := range []wait.Outcome{wait.OutcomeFailed, wait.OutcomeTimeout} {
		t.Run(string(outcome), func(t *testing.T) {
			f := newEngFixture(t)
			s := baseSpec()
			s.extra = true
			f.deploy(t, s)
			f.waiter.Script = releasetest.FailKind("Deployment", outcome, "Progress deadline exceeded")
			s.extra = false
			s.image = "vllm/vllm-openai:crash"
			res, err := f.engine.Deploy(context.Background(), s.options())
			require.Error(t, err)
			var re *release.RolloutError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, 4, exitCode(err))
			assert.Equal(t, map[int]storage.Status{1: storage.StatusDeployed, 2: storage.StatusFailed}, f.statuses(t))
			wantReason := map[wait.Outcome]string{wait.OutcomeFailed: "Failed", wait.OutcomeTimeout: "Timeout"}[outcome]
			require.NotNil(t, res.Failure)
			assert.Equal(t, wantReason, res.Failure.Reason)
			assert.Equal(t, "Deployment/chat", res.Failure.Object)
			assert.Contains(t, res.Failure.Message, "Progress deadline exceeded")
			rec := f.record(t, 2)
			assert.Equal(t, storage.StatusFailed, rec.Status)
			assert.Equal(t, "Upgrade failed: "+wantReason+" (Deployment/chat)", rec.Description)
			assert.Len(t, rec.ReplicaSets, 1, "the failed revision's ReplicaSet is recorded")
			assert.NotNil(t, f.configMap("chat-extra"), "nothing pruned after a failed rollout")
			assert.Empty(t, res.Pruned)
		})
	}
}

// TestDeployOnFailureRollsBackWhileHoldingTheLock: the automatic
// rollback runs while the failed revision's pending record still holds the
// lock.
func TestDeployOnFailureRollsBackWhileHoldingTheLock(t *testing.T) {
	f := newEngFixture(t)
	first := f.deploy(t, baseSpec())
	calls := 0
	fail := releasetest.FailKind("Deployment", wait.OutcomeFailed, "CrashLoopBackOff")
	f.waiter.Script = func(ctx context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
		calls++
		if calls == 1 {
			return fail(ctx, objs, opts)
		}
		return wait.Result{Outcome: wait.OutcomeCurrent, Objects: objs}, nil
	}
	var sawPending storage.Status
	progress := f.engine.Progress
	f.engine.Progress = func(ev release.ProgressEvent) {
		if ev.Phase == release.PhaseRollback && ev.Status == "started" {
			rec, err := f.store.Get(context.Background(), engRelease, 2)
			require.NoError(t, err)
			sawPending = rec.Status
		}
		progress(ev)
	}
	s := baseSpec()
	s.image = "vllm/vllm-openai:crash"
	s.extra = true
	opts := s.options()
	opts.RollbackOnFailure = true
	opts.RollbackTimeout = time.Minute
	res, err := f.engine.Deploy(context.Background(), opts)
	require.Error(t, err)
	assert.Equal(t, 3, exitCode(err))
	assert.Contains(t, err.Error(), "rolled back to revision 1")
	assert.Equal(t, storage.StatusPendingUpgrade, sawPending, "the rollback runs while the failed revision still holds the lock")
	assert.Equal(t, 1, res.RolledBackTo)
	require.NotNil(t, res.Rollback)
	assert.Equal(t, 3, res.Rollback.Revision)
	assert.Equal(t, map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusFailed, 3: storage.StatusDeployed}, f.statuses(t))
	rb := f.record(t, 3)
	assert.Equal(t, "Rollback to 1", rb.Description)
	assert.Equal(t, 1, rb.RollbackOf)
	assert.Equal(t, first.ReplicaSets[0].PodTemplateHash, rb.ReplicaSets[0].PodTemplateHash)
	assert.Equal(t, int64(3), rb.ReplicaSets[0].Revision)
	assert.Nil(t, f.configMap("chat-extra"), "what the failed revision added is pruned by the rollback")
	assert.Contains(t, f.record(t, 2).Description, "rolled back to 1")
}

func TestDeployRollbackDisabledOrImpossible(t *testing.T) {
	f := newEngFixture(t)
	f.waiter.Script = releasetest.FailKind("Deployment", wait.OutcomeFailed, "CrashLoopBackOff")
	d := f.engine
	ran := 0
	progress := f.engine.Progress
	f.engine.Progress = func(ev release.ProgressEvent) {
		if ev.Phase == release.PhaseRollback && ev.Status == "started" {
			ran++
		}
		progress(ev)
	}
	opts := baseSpec().options()
	_, err := d.Deploy(context.Background(), opts)
	assert.Equal(t, 4, exitCode(err))
	assert.Zero(t, ran, "RollbackOnFailure off")
	assert.Contains(t, err.Error(), "the objects of revision 1 are left in place for inspection, remove them with `vllmctl uninstall chat -n "+engNS+"`",
		"a failed install says how to remove what it left")

	opts.RollbackOnFailure = true
	_, err = d.Deploy(context.Background(), opts)
	assert.Equal(t, 4, exitCode(err), "no good revision to roll back to")
	assert.Equal(t, 1, ran)
	assert.Contains(t, err.Error(), "automatic rollback failed")
	assert.Equal(t, map[int]storage.Status{1: storage.StatusFailed, 2: storage.StatusFailed}, f.statuses(t))
}

func TestDeployPrunesOnlyAfterHealthy(t *testing.T) {
	f := newEngFixture(t)
	s := baseSpec()
	s.extra = true
	f.deploy(t, s)
	// Another client took chat-config over: it is not the release's any more.
	cm := f.configMap("chat-config")
	cm.SetLabels(nil)
	f.cluster.Put(cm)
	unrelated := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "someone-else", "namespace": engNS},
	}}
	f.cluster.Put(unrelated)

	s.extra = false
	_, err := f.engine.Deploy(context.Background(), s.options())
	var oe *release.OwnershipError
	require.ErrorAs(t, err, &oe, "chat-config is not the release's any more: refused")
	assert.Equal(t, 6, exitCode(err))
	assert.Contains(t, err.Error(), "v1 ConfigMap ml/chat-config (not managed by vllmctl)")
	opts := s.options()
	opts.TakeOwnership = true
	res, err := f.engine.Deploy(context.Background(), opts)
	require.NoError(t, err)
	assert.Contains(t, res.Description, "took ownership of v1 ConfigMap ml/chat-config")
	assert.Equal(t, []object.Ref{{Version: "v1", Kind: "ConfigMap", Namespace: engNS, Name: "chat-extra"}}, res.Pruned)
	assert.Nil(t, f.configMap("chat-extra"))
	assert.NotNil(t, f.configMap("someone-else"), "objects of no release are never touched")
}

func TestDeployPrunesWhatAFailedRevisionAdded(t *testing.T) {
	f := newEngFixture(t)
	f.deploy(t, baseSpec())
	f.waiter.Script = releasetest.FailKind("Deployment", wait.OutcomeTimeout, "Available: 0/1")
	s := baseSpec()
	s.extra = true
	s.image = "vllm/vllm-openai:crash"
	_, err := f.engine.Deploy(context.Background(), s.options())
	require.Error(t, err)
	require.NotNil(t, f.configMap("chat-extra"))

	f.waiter.Script = nil
	res := f.deploy(t, baseSpec())
	assert.Len(t, res.Pruned, 1)
	assert.Nil(t, f.configMap("chat-extra"), "the failed revision's extra object is pruned")
}

func TestDeployLock(t *testing.T) {
	ctx := context.Background()
	f := newEngFixture(t)
	f.deploy(t, baseSpec())
	other, err := storage.Acquire(ctx, f.store, engRelease, storage.OpDeploy, storage.LockOptions{
		Holder: "bob@ci pid 7", Clock: releasetest.ClockFunc(f.tick)})
	require.NoError(t, err)

	applies := f.cluster.Applies()
	_, err = f.engine.Deploy(ctx, baseSpec().options())
	var le *storage.LockedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, 5, exitCode(err))
	assert.Contains(t, err.Error(), "bob@ci pid 7")
	assert.Equal(t, applies, f.cluster.Applies(), "nothing applied")

	opts := baseSpec().options()
	opts.ForceUnlock = true
	res, err := f.engine.Deploy(ctx, opts)
	require.NoError(t, err)
	assert.Equal(t, 3, res.Revision)
	assert.Equal(t, storage.StatusFailed, f.statuses(t)[other.Revision])
	assert.Contains(t, f.record(t, other.Revision).Description, "interrupted: lock taken over by test@host pid 1")

	// A pending record watched going unrenewed for its lease is stale.
	_, err = storage.Acquire(ctx, f.store, engRelease, storage.OpDeploy, storage.LockOptions{Holder: "bob", Clock: releasetest.ClockFunc(f.tick), Lease: 3 * time.Second})
	require.NoError(t, err)
	f.advance(2 * time.Minute)
	res, err = f.engine.Deploy(ctx, baseSpec().options())
	require.NoError(t, err)
	assert.Equal(t, 5, res.Revision)
	assert.Equal(t, storage.StatusFailed, f.statuses(t)[4])
}

func TestDeployLosesItsLockWhileWaiting(t *testing.T) {
	ctx := context.Background()
	f := newEngFixture(t)
	f.engine.Heartbeat = 50 * time.Millisecond // several beats, but not back to back under -race
	waiting := make(chan struct{})
	takeoverFailed := make(chan error, 1)
	f.waiter.Script = func(ctx context.Context, objs []rollout.ObjectStatus, _ wait.Options) (wait.Result, error) {
		close(waiting)
		select {
		case <-ctx.Done():
			return wait.Result{Outcome: wait.OutcomeCanceled, Objects: objs}, ctx.Err()
		case err := <-takeoverFailed:
			// Never wait forever for a takeover that did not happen.
			return wait.Result{Outcome: wait.OutcomeFailed, Objects: objs}, err
		}
	}
	go func() {
		<-waiting
		_, err := storage.Acquire(ctx, f.store, engRelease, storage.OpDeploy, storage.LockOptions{Holder: "bob", Force: true})
		if !assert.NoError(t, err, "a forced takeover succeeds while the holder keeps renewing") {
			takeoverFailed <- err
		}
	}()
	_, err := f.engine.Deploy(ctx, baseSpec().options())
	var ce *storage.ConflictError
	require.ErrorAs(t, err, &ce, "got %v", err)
	assert.Equal(t, 5, exitCode(err))
	assert.Equal(t, storage.StatusFailed, f.statuses(t)[1], "the taker marked it failed; the loser did not touch it")
	assert.Equal(t, storage.StatusPendingInstall, f.statuses(t)[2])
}

func TestDeployInterrupted(t *testing.T) {
	f := newEngFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	f.waiter.Script = func(wctx context.Context, objs []rollout.ObjectStatus, _ wait.Options) (wait.Result, error) {
		cancel()
		<-wctx.Done()
		return wait.Result{Outcome: wait.OutcomeCanceled, Objects: objs}, wctx.Err()
	}
	res, err := f.engine.Deploy(ctx, baseSpec().options())
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, storage.StatusFailed, res.Status)
	assert.Equal(t, "Interrupted", res.Failure.Reason)
	assert.Equal(t, map[int]storage.Status{1: storage.StatusFailed}, f.statuses(t), "an interrupted deploy releases its lock")
}

func TestDeployHistoryMax(t *testing.T) {
	f := newEngFixture(t)
	for i := range 4 {
		s := baseSpec()
		s.greeting = string(rune('a' + i))
		opts := s.options()
		opts.HistoryMax = 2
		_, err := f.engine.Deploy(context.Background(), opts)
		require.NoError(t, err)
	}
	assert.Equal(t, map[int]storage.Status{3: storage.StatusSuperseded, 4: storage.StatusDeployed}, f.statuses(t))
}

func TestDeployStrategyOverride(t *testing.T) {
	f := newEngFixture(t)
	opts := baseSpec().options()
	opts.MaxSurge = ptr.To(intstr.FromInt32(0))
	opts.MaxUnavailable = ptr.To(intstr.FromString("25%"))
	res, err := f.engine.Deploy(context.Background(), opts)
	require.NoError(t, err)
	d, err := f.cluster.Client.AppsV1().Deployments(engNS).Get(context.Background(), "chat", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "RollingUpdate", string(d.Spec.Strategy.Type))
	assert.Equal(t, intstr.FromInt32(0), *d.Spec.Strategy.RollingUpdate.MaxSurge)
	assert.Equal(t, intstr.FromString("25%"), *d.Spec.Strategy.RollingUpdate.MaxUnavailable)
	m := f.record(t, res.Revision).Manifest
	assert.Contains(t, m, "maxSurge: 0")
	assert.Contains(t, m, "maxUnavailable: 25%")
	_, found, _ := unstructured.NestedFieldNoCopy(objectsOf(opts)[2].Object, "spec", "strategy")
	assert.False(t, found, "the caller's chart is not modified")
}

// TestDeployPreflightMayReplaceTheObjects: when the surge pod cannot fit,
// the surge policy (auto) rolls out with maxSurge 0; the adjusted strategy
// is what is applied and recorded.
func TestDeployPreflightMayReplaceTheObjects(t *testing.T) {
	f := newEngFixture(t)
	s := baseSpec()
	s.gpus = 4
	twoReplicas := func(s spec) release.DeployOptions {
		opts := s.options()
		objs := objectsOf(opts)
		require.NoError(t, unstructured.SetNestedField(objs[2].Object, int64(2), "spec", "replicas"))
		return rebuilt(opts, objs)
	}
	_, err := f.engine.Deploy(context.Background(), twoReplicas(s))
	require.NoError(t, err)
	// The two old pods hold all 8 GPUs of the only node.
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}
	for _, name := range []string{"chat-old-1", "chat-old-2"} {
		_, err := f.cluster.Client.CoreV1().Pods(engNS).Create(context.Background(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: engNS, Labels: map[string]string{"app": "chat"}},
			Spec: corev1.PodSpec{NodeName: "gpu-node-1", Containers: []corev1.Container{{
				Name: "vllm", Image: s.image, Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu},
			}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	s.image = "vllm/vllm-openai:v0.11.0"
	res, err := f.engine.Deploy(context.Background(), twoReplicas(s))
	require.NoError(t, err)
	require.NotNil(t, res.Preflight)
	assert.True(t, res.Preflight.Changed())
	assert.Contains(t, f.record(t, res.Revision).Manifest, "maxSurge: 0", "the replacement is recorded")
	assert.Contains(t, f.record(t, res.Revision).Description, "surge", "and said in the description")
	dep, err := f.cluster.Client.AppsV1().Deployments(engNS).Get(context.Background(), "chat", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, intstr.FromInt32(0), *dep.Spec.Strategy.RollingUpdate.MaxSurge, "and applied")
}

// TestDeployRefusedDryRunAppliesNothing: a server-side dry run the server
// refuses (here: an invalid Deployment) refuses the deploy before the lock:
// exit 2, nothing applied, no record written.
func TestDeployRefusedDryRunAppliesNothing(t *testing.T) {
	f := newEngFixture(t)
	f.deploy(t, baseSpec())
	applies := f.cluster.Applies()
	f.cluster.ApplyHook = func(obj *unstructured.Unstructured, _ cluster.ApplyOptions) error {
		if obj.GetKind() == "Deployment" {
			return apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "chat",
				field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), -1, "must be greater than or equal to 0")})
		}
		return nil
	}
	s := baseSpec()
	s.greeting = "v2"
	res, err := f.engine.Deploy(context.Background(), s.options())
	require.Error(t, err)
	assert.Nil(t, res)
	assert.Equal(t, 2, exitCode(err))
	assert.Contains(t, err.Error(), "dry run refused the deploy, nothing was applied")
	assert.Equal(t, applies, f.cluster.Applies(), "nothing applied")
	assert.Equal(t, "hello", f.configMap("chat-config").Object["data"].(map[string]any)["greeting"])
	assert.Equal(t, map[int]storage.Status{1: storage.StatusDeployed}, f.statuses(t), "no record written")

	f.cluster.ApplyHook = func(obj *unstructured.Unstructured, _ cluster.ApplyOptions) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, obj.GetName(), errors.New("no"))
	}
	_, err = f.engine.Deploy(context.Background(), s.options())
	assert.Equal(t, 6, exitCode(err), "a refusal other than invalid: the cluster refused")
	assert.Equal(t, map[int]storage.Status{1: storage.StatusDeployed}, f.statuses(t))
}

// TestDeployRefusedMidwayRestoresThePreviousRevision: when the real apply
// is refused after some objects were changed, they are restored to the
// previous good revision (with rollback on failure) and the exit code is 3.
func TestDeployRefusedMidwayRestoresThePreviousRevision(t *testing.T) {
	f := newEngFixture(t)
	f.deploy(t, baseSpec())
	f.cluster.ApplyHook = func(obj *unstructured.Unstructured, opts cluster.ApplyOptions) error {
		if obj.GetKind() == "Deployment" && !opts.DryRun && obj.GetLabels()[owner.LabelRelease] == engRelease &&
			len(obj.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"].([]any)) > 1 {
			return apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "chat", errors.New("admission webhook said no"))
		}
		return nil
	}
	s := baseSpec()
	s.greeting = "v2"
	s.args = []string{"--model=a", "--max-model-len=4096"}
	opts := s.options()
	opts.RollbackOnFailure = true
	res, err := f.engine.Deploy(context.Background(), opts)
	require.Error(t, err)
	assert.Equal(t, 3, exitCode(err), "%v", err)
	assert.Equal(t, 1, res.RolledBackTo)
	assert.Equal(t, "hello", f.configMap("chat-config").Object["data"].(map[string]any)["greeting"], "the ConfigMap applied before the refusal is restored")
	assert.Equal(t, map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusFailed, 3: storage.StatusDeployed}, f.statuses(t))

	opts.RollbackOnFailure = false
	_, err = f.engine.Deploy(context.Background(), opts)
	assert.Equal(t, 6, exitCode(err), "without rollback on failure: the cluster's refusal: %v", err)
}

// TestDeployRefusesObjectsOfOthers: an object of another release, or one
// made by hand, is never taken over silently: exit 6 naming it and its
// owner, nothing applied, no record; --take-ownership adopts it.
func TestDeployRefusesObjectsOfOthers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		owner  string
	}{
		{"another release's", map[string]string{storage.LabelManagedBy: storage.ManagedByVllmctl, owner.LabelRelease: "other"}, "release other"},
		{"another release's, deployed before vllmctl.io/release", map[string]string{storage.LabelManagedBy: storage.ManagedByVllmctl, owner.LegacyLabelInstance: "other"}, "release other"},
		{"a release of the same name in another namespace", map[string]string{storage.LabelManagedBy: storage.ManagedByVllmctl, owner.LabelRelease: engRelease}, "release elsewhere/" + engRelease},
		{"made by hand", nil, "not managed by vllmctl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEngFixture(t)
			cm := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "chat-config", "namespace": engNS},
				"data":     map[string]any{"greeting": "theirs"},
			}}
			cm.SetLabels(tc.labels)
			if tc.labels[owner.LabelRelease] == engRelease {
				cm.SetAnnotations(map[string]string{owner.AnnotationNamespace: "elsewhere"})
			}
			f.cluster.Put(cm)
			res, err := f.engine.Deploy(context.Background(), baseSpec().options())
			require.Error(t, err)
			assert.Nil(t, res)
			assert.Equal(t, 6, exitCode(err))
			assert.Contains(t, err.Error(), "v1 ConfigMap ml/chat-config ("+tc.owner+")")
			assert.Contains(t, err.Error(), "--take-ownership")
			assert.Empty(t, f.statuses(t), "no record")
			assert.Equal(t, "theirs", f.configMap("chat-config").Object["data"].(map[string]any)["greeting"], "nothing applied")
			assert.Nil(t, f.cluster.Object("apps", "Deployment", engNS, "chat"), "nothing applied")

			opts := baseSpec().options()
			opts.TakeOwnership = true
			res, err = f.engine.Deploy(context.Background(), opts)
			require.NoError(t, err)
			assert.Contains(t, f.record(t, res.Revision).Description, "took ownership of v1 ConfigMap ml/chat-config ("+tc.owner+")")
			assert.Equal(t, engRelease, f.configMap("chat-config").GetLabels()[owner.LabelRelease])
		})
	}
}

// TestDeployRecognisesObjectsMarkedBeforeTheReleaseLabel: objects of a
// release deployed before vllmctl.io/release (marked by
// app.kubernetes.io/instance and managed-by only) are still the
// release's: the next deploy changes them without --take-ownership, and
// they then carry the new keys.
func TestDeployRecognisesObjectsMarkedBeforeTheReleaseLabel(t *testing.T) {
	f := newEngFixture(t)
	f.deploy(t, baseSpec())
	cm := f.configMap("chat-config").DeepCopy()
	cm.SetLabels(map[string]string{storage.LabelManagedBy: storage.ManagedByVllmctl, owner.LegacyLabelInstance: engRelease})
	cm.SetAnnotations(nil)
	f.cluster.Put(cm)

	s := baseSpec()
	s.greeting = "v2"
	res, err := f.engine.Deploy(context.Background(), s.options())
	require.NoError(t, err)
	assert.NotContains(t, f.record(t, res.Revision).Description, "took ownership")
	live := f.configMap("chat-config")
	assert.Equal(t, "v2", live.Object["data"].(map[string]any)["greeting"])
	assert.Equal(t, engRelease, live.GetLabels()[owner.LabelRelease])
	assert.Equal(t, engNS, live.GetAnnotations()[owner.AnnotationNamespace])
}

// TestDeployPreflightReusesTheDryRun: the capacity preflight takes the live
// Deployment and the dry-run outcome from the deploy's own dry run: with
// the preflight the Deployment is read and applied through the clientset
// exactly as often as without it, and whether its pod template changes is
// still told apart.
func TestDeployPreflightReusesTheDryRun(t *testing.T) {
	// deploymentCalls upgrades to s and counts the gets and apply patches
	// of Deployments on the clientset.
	deploymentCalls := func(t *testing.T, s spec, skip bool) (gets, applies int, res *release.Result) {
		f := newEngFixture(t)
		ctx := context.Background()
		_, err := f.engine.Deploy(ctx, baseSpec().options())
		require.NoError(t, err)
		f.cluster.Client.ClearActions()
		opts := s.options()
		opts.SkipPreflight = skip
		res, err = f.engine.Deploy(ctx, opts)
		require.NoError(t, err)
		for _, a := range f.cluster.Client.Actions() {
			if a.GetResource().Resource != "deployments" {
				continue
			}
			if a.GetVerb() == "get" {
				gets++
			}
			if pa, ok := a.(k8stesting.PatchAction); ok && pa.GetPatchType() == types.ApplyPatchType {
				applies++
			}
		}
		return gets, applies, res
	}
	for _, tc := range []struct {
		name   string
		mutate func(*spec)
		want   preflight.TemplateChange
	}{
		{name: "image changes", mutate: func(s *spec) { s.image = "vllm/vllm-openai:v0.11.0" }, want: preflight.ChangeChanged},
		{name: "only a ConfigMap changes", mutate: func(s *spec) { s.greeting = "bye" }, want: preflight.ChangeUnchanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec()
			tc.mutate(&s)
			gets, applies, res := deploymentCalls(t, s, false)
			require.NotNil(t, res.Preflight)
			require.Len(t, res.Preflight.Deployments, 1)
			assert.Equal(t, tc.want, res.Preflight.Deployments[0].Change)
			skipGets, skipApplies, _ := deploymentCalls(t, s, true)
			assert.Equal(t, skipGets, gets, "the preflight read the Deployment again")
			assert.Equal(t, skipApplies, applies, "the preflight dry-ran the Deployment again")
		})
	}
}

// A deploy without a chart is refused as invalid input before the cluster
// is asked anything: nothing recorded.
func TestDeployWithoutChartRefused(t *testing.T) {
	f := newEngFixture(t)
	_, err := f.engine.Deploy(context.Background(), release.DeployOptions{Name: engRelease})
	require.Error(t, err)
	assert.Equal(t, 2, exitCode(err), "%v", err)
	assert.Empty(t, f.statuses(t))
}
