package release_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// hookObj is a hook object of kind (Job, Pod or ConfigMap) named name.
func hookObj(kind, name, events, weight, policy string) *unstructured.Unstructured {
	api := "v1"
	if kind == "Job" {
		api = "batch/v1"
	}
	ann := map[string]any{charts.AnnotationHook: events}
	if weight != "" {
		ann[charts.AnnotationHookWeight] = weight
	}
	if policy != "" {
		ann[charts.AnnotationHookDeletePolicy] = policy
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": api, "kind": kind,
		"metadata": map[string]any{"name": name, "annotations": ann},
	}}
}

// hookSpec deploys s with hooks besides its objects.
func hookSpec(s spec, hooks ...*unstructured.Unstructured) release.DeployOptions {
	opts := s.options()
	return withObjects(opts, append(s.objects(), hooks...), nil, s.image)
}

// failJob fails every wait that holds a Job named name, as the rollout
// watcher fails a hook Job whose pod crash-loops.
func failJob(name string) func(context.Context, []rollout.ObjectStatus, wait.Options) (wait.Result, error) {
	return func(_ context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
		for _, o := range objs {
			if o.Object.Kind == "Job" && o.Object.Name == name {
				d := &rollout.Diagnosis{Verdict: rollout.VerdictCrashLoop, Reason: "CrashLoopBackOff", Object: "Job " + name,
					Pod: name + "-x7k2p", Container: "migrate", ExitCode: 1, Message: "back-off restarting failed container"}
				o.Status = rollout.StatusFailed
				return wait.Result{Outcome: wait.OutcomeFailed, Objects: []rollout.ObjectStatus{o}, Diagnosis: d},
					&wait.NotReadyError{Outcome: wait.OutcomeFailed, Objects: []rollout.ObjectStatus{o}}
			}
		}
		return wait.Result{Outcome: wait.OutcomeCurrent, Objects: objs}, nil
	}
}

// hookEvents are the progress lines of the hook and apply phases.
func (f *engFixture) phaseLines(phases ...release.Phase) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ev := range f.events {
		for _, p := range phases {
			if ev.Phase == p {
				out = append(out, string(ev.Phase)+" "+ev.Object+" "+ev.Status)
			}
		}
	}
	return out
}

// TestDeployRunsHooks: hooks are not release objects: they are recorded
// with the revision and run at their events, by weight, before the apply
// (pre-upgrade) or after the rollout (post-upgrade), and deleted as their
// policies say; a test hook runs only with `vllmctl test`.
func TestDeployRunsHooks(t *testing.T) {
	f := newEngFixture(t)
	hooks := []*unstructured.Unstructured{
		hookObj("Job", "migrate", "pre-upgrade", "1", ""),
		hookObj("Job", "backup", "pre-install,pre-upgrade", "-1", "hook-succeeded"),
		hookObj("ConfigMap", "done", "post-upgrade", "", "hook-succeeded"),
		hookObj("Pod", "test-connection", "test", "", ""),
	}
	res, err := f.engine.Deploy(context.Background(), hookSpec(baseSpec(), hooks...))
	require.NoError(t, err)
	require.Len(t, res.Hooks, 1, "on install: the pre-install hook only")
	assert.Equal(t, "backup", res.Hooks[0].Name)
	rec := f.record(t, 1)
	require.Len(t, rec.Hooks, 4, "every hook is recorded")
	assert.NotContains(t, rec.Manifest, "test-connection", "hooks are not in the manifest")
	assert.Nil(t, f.cluster.Object("", "Pod", engNS, "test-connection"), "the test hook is not applied")
	assert.Nil(t, f.cluster.Object("batch", "Job", engNS, "backup"), "deleted: hook-succeeded")

	f.events = nil
	s := baseSpec()
	s.greeting = "v2"
	res, err = f.engine.Deploy(context.Background(), hookSpec(s, hooks...))
	require.NoError(t, err)
	var ran []string
	for _, h := range res.Hooks {
		ran = append(ran, string(h.Event)+" "+h.Name+" "+h.Phase)
	}
	assert.Equal(t, []string{"pre-upgrade backup succeeded", "pre-upgrade migrate succeeded", "post-upgrade done succeeded"}, ran)
	lines := strings.Join(f.phaseLines(release.PhaseHook, release.PhaseApply), "\n")
	assert.Less(t, strings.Index(lines, "hook batch/v1 Job ml/migrate succeeded"), strings.Index(lines, "apply v1 ConfigMap ml/chat-config"),
		"the pre-upgrade hooks complete before the apply:\n%s", lines)
	assert.Less(t, strings.Index(lines, "apply apps/v1 Deployment ml/chat"), strings.Index(lines, "hook v1 ConfigMap ml/done running"),
		"post-upgrade after the apply:\n%s", lines)
	assert.NotNil(t, f.cluster.Object("batch", "Job", engNS, "migrate"), "before-hook-creation only: kept until it runs again")
	assert.Nil(t, f.cluster.Object("", "ConfigMap", engNS, "done"), "hook-succeeded: deleted")

	tr, err := f.engine.Test(context.Background(), release.TestOptions{Name: engRelease})
	require.NoError(t, err)
	assert.True(t, tr.Passed)
	require.Len(t, tr.Tests, 1)
	assert.Equal(t, "test-connection", tr.Tests[0].Name)
	assert.Equal(t, 2, tr.Revision)
}

// TestFailedPreUpgradeHookRollsBack: a pre-upgrade hook Job that fails
// (its pod crash-loops) fails the deploy before anything is applied; with
// rollback on failure the previous revision serves (exit code 3) and the
// failure names the hook's pod.
func TestFailedPreUpgradeHookRollsBack(t *testing.T) {
	f := newEngFixture(t)
	hooks := []*unstructured.Unstructured{hookObj("Job", "migrate", "pre-upgrade", "", "hook-failed")}
	_, err := f.engine.Deploy(context.Background(), hookSpec(baseSpec(), hooks...))
	require.NoError(t, err)

	f.waiter.Script = failJob("migrate")
	s := baseSpec()
	s.greeting = "v2"
	opts := hookSpec(s, hooks...)
	opts.RollbackOnFailure = true
	res, err := f.engine.Deploy(context.Background(), opts)
	require.Error(t, err)
	assert.Equal(t, 3, exitCode(err), "%v", err)
	require.NotNil(t, res.Failure)
	assert.Equal(t, "migrate-x7k2p", res.Failure.Pod)
	assert.Equal(t, "Job migrate", res.Failure.Object)
	assert.Equal(t, "hello", f.configMap("chat-config").Object["data"].(map[string]any)["greeting"], "nothing of the new revision applied")
	assert.Equal(t, storage.StatusFailed, f.statuses(t)[2])
	assert.Equal(t, storage.StatusDeployed, f.statuses(t)[3], "the rollback")
	assert.Nil(t, f.cluster.Object("batch", "Job", engNS, "migrate"), "hook-failed: deleted")

	opts.RollbackOnFailure = false
	_, err = f.engine.Deploy(context.Background(), opts)
	assert.Equal(t, 4, exitCode(err), "not rolled back: %v", err)
}

// TestTestHookFailure: a failing test hook is exit code 4 with its
// diagnosis; a release without test hooks passes with none.
func TestTestHookFailure(t *testing.T) {
	f := newEngFixture(t)
	_, err := f.engine.Deploy(context.Background(), hookSpec(baseSpec()))
	require.NoError(t, err)
	tr, err := f.engine.Test(context.Background(), release.TestOptions{Name: engRelease})
	require.NoError(t, err)
	assert.True(t, tr.Passed)
	assert.Empty(t, tr.Tests)

	_, err = f.engine.Deploy(context.Background(), hookSpec(baseSpec(), hookObj("Job", "smoke", "test", "", "")))
	require.NoError(t, err)
	f.waiter.Script = failJob("smoke")
	tr, err = f.engine.Test(context.Background(), release.TestOptions{Name: engRelease})
	require.Error(t, err)
	assert.Equal(t, 4, exitCode(err))
	assert.Contains(t, err.Error(), "test hook Job/smoke failed: CrashLoopBackOff: pod smoke-x7k2p, container migrate, exit code 1")
	assert.False(t, tr.Passed)
	require.Len(t, tr.Tests, 1)
	assert.Equal(t, "failed", tr.Tests[0].Phase)
	assert.Equal(t, "smoke-x7k2p", tr.Tests[0].Failure.Pod)

	_, err = f.engine.Test(context.Background(), release.TestOptions{Name: "nope"})
	assert.Equal(t, 2, exitCode(err), "unknown release: %v", err)
}

// keepObj is a ConfigMap annotated helm.sh/resource-policy: keep.
func keepObj(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "annotations": map[string]any{charts.AnnotationResourcePolicy: "keep"}},
		"data":     map[string]any{"k": "v"},
	}}
}

// TestResourcePolicyKeep: an object annotated helm.sh/resource-policy:
// keep is neither pruned when the chart stops rendering it nor deleted by
// uninstall, as with Helm.
func TestResourcePolicyKeep(t *testing.T) {
	f := newEngFixture(t)
	_, err := f.engine.Deploy(context.Background(), hookSpec(baseSpec(), keepObj("kept"), keepObj("kept2")))
	require.NoError(t, err)
	res, err := f.engine.Deploy(context.Background(), hookSpec(baseSpec(), keepObj("kept2")))
	require.NoError(t, err)
	assert.Empty(t, res.Pruned, "kept, not pruned")
	assert.NotNil(t, f.configMap("kept"))

	ures, err := f.engine.Uninstall(context.Background(), release.UninstallOptions{Name: engRelease})
	require.NoError(t, err)
	assert.NotNil(t, f.configMap("kept2"), "uninstall keeps it")
	assert.Nil(t, f.configMap("chat-config"), "the rest is deleted")
	var kept []string
	for _, k := range ures.Kept {
		kept = append(kept, k.Object.Name+": "+k.Reason)
	}
	assert.Contains(t, kept, "kept2: helm.sh/resource-policy: keep")
}

// TestUninstallAndRollbackRunTheirHooks: uninstall runs the last
// revision's pre-delete hooks before deleting and post-delete after; a
// failing pre-delete hook fails the uninstall with nothing deleted.
// Rollback runs the target revision's pre-rollback and post-rollback
// hooks.
func TestUninstallAndRollbackRunTheirHooks(t *testing.T) {
	f := newEngFixture(t)
	hooks := []*unstructured.Unstructured{
		hookObj("Job", "drain", "pre-delete", "", ""),
		hookObj("Job", "cleanup", "post-delete", "", "hook-succeeded"),
		hookObj("Job", "before-rb", "pre-rollback", "", ""),
		hookObj("Job", "after-rb", "post-rollback", "", ""),
	}
	_, err := f.engine.Deploy(context.Background(), hookSpec(baseSpec(), hooks...))
	require.NoError(t, err)
	s := baseSpec()
	s.greeting = "v2"
	_, err = f.engine.Deploy(context.Background(), hookSpec(s, hooks...))
	require.NoError(t, err)

	rb, err := f.engine.Rollback(context.Background(), release.RollbackOptions{Name: engRelease, ToRevision: 1})
	require.NoError(t, err)
	var ran []string
	for _, h := range rb.Hooks {
		ran = append(ran, string(h.Event)+" "+h.Name)
	}
	assert.Equal(t, []string{"pre-rollback before-rb", "post-rollback after-rb"}, ran)

	f.waiter.Script = failJob("drain")
	_, err = f.engine.Uninstall(context.Background(), release.UninstallOptions{Name: engRelease})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pre-delete hook Job/drain failed")
	assert.NotNil(t, f.configMap("chat-config"), "nothing deleted")

	f.waiter.Script = nil
	ures, err := f.engine.Uninstall(context.Background(), release.UninstallOptions{Name: engRelease, ForceUnlock: true})
	require.NoError(t, err)
	ran = nil
	for _, h := range ures.Hooks {
		ran = append(ran, string(h.Event)+" "+h.Name+" "+h.Phase)
	}
	assert.Equal(t, []string{"pre-delete drain succeeded", "post-delete cleanup succeeded"}, ran)
	assert.Nil(t, f.configMap("chat-config"))
	assert.NotNil(t, f.cluster.Object("batch", "Job", engNS, "drain"), "hooks are not release objects: left as Helm leaves them")
	assert.Nil(t, f.cluster.Object("batch", "Job", engNS, "cleanup"), "hook-succeeded")
}

// TestDiffListsHooksApart: diff lists the hooks the deploy would run apart
// from the objects it compares (an upgrade: pre- and post-upgrade hooks;
// test hooks never), and hooks never count as changes.
func TestDiffListsHooksApart(t *testing.T) {
	f := newEngFixture(t)
	hooks := []*unstructured.Unstructured{
		hookObj("Job", "migrate", "pre-install,pre-upgrade", "3", ""),
		hookObj("Pod", "test-connection", "test", "", ""),
	}
	opts := hookSpec(baseSpec(), hooks...)
	_, err := f.engine.Deploy(context.Background(), opts)
	require.NoError(t, err)
	rep, err := f.engine.Diff(context.Background(), release.DiffOptions{Name: engRelease, Render: opts.Render})
	require.NoError(t, err)
	for _, o := range rep.Objects {
		assert.NotContains(t, o.Object, "migrate", "hooks are not compared")
		assert.NotContains(t, o.Object, "test-connection", "hooks are not compared")
	}
	require.Len(t, rep.Hooks, 1)
	assert.Equal(t, "batch/v1 Job ml/migrate", rep.Hooks[0].Object)
	assert.Equal(t, []string{"pre-upgrade"}, rep.Hooks[0].Events)
	assert.Equal(t, 3, rep.Hooks[0].Weight)
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b, false))
	assert.Contains(t, b.String(), "Hooks the deploy runs:\n  pre-upgrade batch/v1 Job ml/migrate (weight 3)\n")
}

// TestHookSecretsAreWithheld: the value of a hook's Secret, echoed by a
// failing hook's container, is withheld from the result's hook runs and
// failure, and from what `vllmctl test` reports (the runner teaches the
// Redactor the hooks' Secrets).
func TestHookSecretsAreWithheld(t *testing.T) {
	const value = "hook-s3cr3t-9f2k"
	f := newEngFixture(t)
	red := diff.NewRedactor()
	f.engine.UseRedactor(red)
	secret := hookObj("Secret", "db", "pre-install,test", "-1", "")
	secret.Object["stringData"] = map[string]any{"password": value}
	echo := func(_ context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
		res, err := failJob("migrate")(context.Background(), objs, opts)
		if res.Diagnosis != nil {
			res.Diagnosis.LogTail = []string{"connecting with password " + value}
			res.Diagnosis.Message = "bad password " + value
		}
		return res, err
	}
	f.waiter.Script = echo
	res, err := f.engine.Deploy(context.Background(),
		hookSpec(baseSpec(), secret, hookObj("Job", "migrate", "pre-install,test", "", "")))
	require.Error(t, err)
	out, jerr := json.Marshal(diff.RedactCopy(red, res))
	require.NoError(t, jerr)
	assert.NotContains(t, string(out), value)
	assert.Contains(t, string(out), "connecting with password")
	assert.NotContains(t, red.Err(err).Error(), value)
}

// TestHookLeftByAnEarlierRunIsRefused: a test Pod whose policy does not
// delete it before it runs again (hook-succeeded only), left behind by an
// earlier run that was killed, is not judged on that run's outcome: the
// test fails naming it, as Helm refuses to create it again.
func TestHookLeftByAnEarlierRunIsRefused(t *testing.T) {
	f := newEngFixture(t)
	_, err := f.engine.Deploy(context.Background(), hookSpec(baseSpec(), hookObj("Pod", "smoke", "test", "", "hook-succeeded")))
	require.NoError(t, err)
	left := hookObj("Pod", "smoke", "test", "", "hook-succeeded")
	left.SetNamespace(engNS)
	f.cluster.Put(left)
	tr, err := f.engine.Test(context.Background(), release.TestOptions{Name: engRelease})
	require.Error(t, err)
	assert.Equal(t, 4, exitCode(err))
	assert.Contains(t, err.Error(), "test hook Pod/smoke failed: AlreadyExists")
	require.Len(t, tr.Tests, 1)
	assert.Equal(t, release.HookFailed, tr.Tests[0].Phase)
}

// leanHooks is opts with its ConfigMaps and hooks only, which the fake
// cluster's dry run leaves as they are live.
func leanHooks(opts release.DeployOptions) release.DeployOptions {
	return rebuilt(opts, slices.DeleteFunc(objectsOf(opts), func(o *unstructured.Unstructured) bool {
		_, hook := o.GetAnnotations()[charts.AnnotationHook]
		return o.GetKind() != "ConfigMap" && !hook
	}))
}

// TestHookOnlyChangeIsANewRevision: what a revision records besides its
// objects counts for the up-to-date check and for diff: a deploy that
// changes only a hook (a pre-upgrade Job's image, a test hook's
// annotation) makes a new revision whose record keeps the new hook and
// runs its upgrade hooks, and diff reports the hook's change; the same
// hooks again are up to date.
func TestHookOnlyChangeIsANewRevision(t *testing.T) {
	job := func(image string) *unstructured.Unstructured {
		h := hookObj("Job", "migrate", "pre-upgrade", "", "")
		h.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{
			"restartPolicy": "Never",
			"containers":    []any{map[string]any{"name": "migrate", "image": image}},
		}}}
		return h
	}
	testPod := func(note string) *unstructured.Unstructured {
		h := hookObj("Pod", "smoke", "test", "", "")
		if note != "" {
			h.SetAnnotations(map[string]string{charts.AnnotationHook: "test", "example.com/note": note})
		}
		return h
	}
	cases := []struct {
		name        string
		first, next []*unstructured.Unstructured
		// changed names the hook diff reports ("" for none: up to date).
		changed string
		action  diff.Action
		// ran are the hooks the upgrade runs.
		ran []string
		// keeps is in the new record's hooks.
		keeps string
	}{
		{name: "pre-upgrade Job image", first: []*unstructured.Unstructured{job("busybox:1")}, next: []*unstructured.Unstructured{job("busybox:2")},
			changed: "batch/v1 Job ml/migrate", action: diff.ActionChange, ran: []string{"migrate"}, keeps: "image: busybox:2"},
		{name: "test hook annotation", first: []*unstructured.Unstructured{testPod("")}, next: []*unstructured.Unstructured{testPod("v2")},
			changed: "v1 Pod ml/smoke", action: diff.ActionChange, keeps: "example.com/note: v2"},
		{name: "hook added", next: []*unstructured.Unstructured{job("busybox:1")},
			changed: "batch/v1 Job ml/migrate", action: diff.ActionCreate, ran: []string{"migrate"}, keeps: "name: migrate"},
		{name: "hook removed", first: []*unstructured.Unstructured{testPod("")},
			changed: "v1 Pod ml/smoke", action: diff.ActionPrune},
		{name: "same hooks: up to date", first: []*unstructured.Unstructured{job("busybox:1")}, next: []*unstructured.Unstructured{job("busybox:1")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newEngFixture(t)
			_, err := f.engine.Deploy(context.Background(), leanHooks(hookSpec(baseSpec(), tc.first...)))
			require.NoError(t, err)
			opts := leanHooks(hookSpec(baseSpec(), tc.next...))

			rep, err := f.engine.Diff(context.Background(), release.DiffOptions{Name: engRelease, Render: opts.Render})
			require.NoError(t, err)
			var text strings.Builder
			require.NoError(t, rep.WriteText(&text, false))
			if tc.changed == "" {
				assert.True(t, rep.Empty(), "diff: no changes:\n%s", text.String())
				assert.Empty(t, rep.Recorded)
			} else {
				assert.False(t, rep.Empty(), "diff reports the hook's change")
				require.Len(t, rep.Recorded, 1)
				assert.Equal(t, diff.RecordedHook, rep.Recorded[0].What)
				assert.Equal(t, tc.changed, rep.Recorded[0].Name)
				assert.Equal(t, tc.action, rep.Recorded[0].Action)
				assert.Equal(t, 1, rep.Summary.Recorded)
				assert.Contains(t, text.String(), tc.action.Symbol()+" hook "+tc.changed+"\n")
				assert.Contains(t, text.String(), "1 recorded change (hooks, notes, CRDs)")
			}

			res, err := f.engine.Deploy(context.Background(), opts)
			require.NoError(t, err)
			if tc.changed == "" {
				assert.Equal(t, 1, res.Revision)
				assert.Contains(t, res.Description, "up to date")
				return
			}
			assert.Equal(t, 2, res.Revision, "a new revision")
			assert.NotContains(t, res.Description, "up to date")
			var ran []string
			for _, h := range res.Hooks {
				ran = append(ran, h.Name)
			}
			assert.Equal(t, tc.ran, ran, "the new revision runs its upgrade hooks")
			var kept []string
			for _, h := range f.record(t, 2).Hooks {
				kept = append(kept, h.Manifest)
			}
			require.Len(t, kept, len(tc.next), "the record keeps the new hooks")
			if tc.keeps != "" {
				assert.Contains(t, strings.Join(kept, "---\n"), tc.keeps, "the record keeps the new hook")
			}
		})
	}
}

// TestInterruptDuringPreUpgradeHook: an interrupt while a pre-upgrade hook
// Job runs, before anything of the release is applied, is exit code 130:
// no rollback revision, the revision finished as interrupted (the lock
// released, the previous revision still deployed), and the hook's delete
// policy honoured although the deploy's context has ended.
func TestInterruptDuringPreUpgradeHook(t *testing.T) {
	for _, tc := range []struct {
		policy  string
		deleted bool
	}{
		{policy: "hook-failed", deleted: true},
		{policy: "before-hook-creation", deleted: false},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			f := newEngFixture(t)
			hooks := []*unstructured.Unstructured{hookObj("Job", "migrate", "pre-upgrade", "", tc.policy)}
			_, err := f.engine.Deploy(context.Background(), hookSpec(baseSpec(), hooks...))
			require.NoError(t, err)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f.waiter.Script = func(wctx context.Context, objs []rollout.ObjectStatus, _ wait.Options) (wait.Result, error) {
				for _, o := range objs {
					if o.Object.Kind == "Job" {
						cancel() // SIGINT while the hook runs
						<-wctx.Done()
						return wait.Result{Outcome: wait.OutcomeCanceled, Objects: objs}, wctx.Err()
					}
				}
				return wait.Result{Outcome: wait.OutcomeCurrent, Objects: objs}, nil
			}
			s := baseSpec()
			s.greeting = "v2"
			opts := hookSpec(s, hooks...)
			opts.RollbackOnFailure = true
			res, err := f.engine.Deploy(ctx, opts)
			require.Error(t, err)
			assert.Equal(t, 130, exitCode(err), "%v", err)
			assert.Contains(t, err.Error(), "interrupted during its pre-upgrade hooks, before anything of the release was applied")
			require.NotNil(t, res)
			assert.Nil(t, res.Rollback, "nothing to roll back")
			require.NotNil(t, res.Failure)
			assert.Equal(t, "Interrupted", res.Failure.Reason)
			assert.Equal(t, "hello", f.configMap("chat-config").Object["data"].(map[string]any)["greeting"], "nothing applied")
			st := f.statuses(t)
			require.Len(t, st, 2, "no rollback revision")
			assert.Equal(t, storage.StatusDeployed, st[1])
			assert.Equal(t, storage.StatusFailed, st[2])
			assert.Equal(t, "Upgrade interrupted", f.record(t, 2).Description)
			assert.Equal(t, tc.deleted, f.cluster.Object("batch", "Job", engNS, "migrate") == nil, "the delete policy is honoured")

			// The lock is free: the next deploy goes through.
			f.waiter.Script = nil
			_, err = f.engine.Deploy(context.Background(), hookSpec(s, hooks...))
			require.NoError(t, err)
		})
	}
}

// lateApply is an object client whose apply of the Job named job is cut
// short by an interrupt (cancel) and lands only after the first delete of
// it has found nothing, as the API server finishes a request whose client
// has gone away.
type lateApply struct {
	release.ObjectClient
	job    string
	cancel context.CancelFunc

	mu      sync.Mutex
	pending []*unstructured.Unstructured
}

func (l *lateApply) Apply(ctx context.Context, objs []*unstructured.Unstructured, opts cluster.ApplyOptions) ([]cluster.ApplyResult, error) {
	if len(objs) == 1 && objs[0].GetKind() == "Job" && objs[0].GetName() == l.job && l.cancel != nil {
		l.mu.Lock()
		l.pending = append(l.pending, objs[0].DeepCopy())
		l.mu.Unlock()
		l.cancel()
		return nil, fmt.Errorf("apply batch/v1 Job %s: %w", l.job, ctx.Err())
	}
	return l.ObjectClient.Apply(ctx, objs, opts)
}

func (l *lateApply) Delete(ctx context.Context, obj *unstructured.Unstructured, opts cluster.PruneOptions) (cluster.PruneResult, error) {
	res, err := l.ObjectClient.Delete(ctx, obj, opts)
	l.mu.Lock()
	landing := l.pending
	l.pending = nil
	l.mu.Unlock()
	if len(landing) > 0 {
		_, aerr := l.ObjectClient.Apply(ctx, landing, cluster.ApplyOptions{Namespace: engNS})
		return res, errors.Join(err, aerr)
	}
	return res, err
}

// TestInterruptedHookApplyThatLandsLate: an interrupt that cuts a hook's
// apply short leaves no hook behind when the apply lands after the first
// delete: a hook-failed policy deletes it again.
func TestInterruptedHookApplyThatLandsLate(t *testing.T) {
	f := newEngFixture(t)
	hooks := []*unstructured.Unstructured{hookObj("Job", "migrate", "pre-upgrade", "", "hook-failed")}
	_, err := f.engine.Deploy(context.Background(), hookSpec(baseSpec(), hooks...))
	require.NoError(t, err)
	require.Nil(t, f.cluster.Object("batch", "Job", engNS, "migrate"), "an install runs no pre-upgrade hook")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	late := &lateApply{ObjectClient: f.engine.Objects, job: "migrate", cancel: cancel}
	f.engine.Objects = late
	s := baseSpec()
	s.greeting = "v2"
	_, err = f.engine.Deploy(ctx, hookSpec(s, hooks...))
	require.Error(t, err)
	assert.Equal(t, 130, exitCode(err), "%v", err)
	assert.Nil(t, f.cluster.Object("batch", "Job", engNS, "migrate"), "the hook whose apply landed late is deleted")
}
