package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// runWait runs `vllmctl wait args...` on the fakes.
func (f *releaseFakes) runWait(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runRecordCommand(t, f.factory(), newWaitCommand, append([]string{"wait"}, args...)...)
}

// records returns the statuses and descriptions of release chat in ml.
func (f *releaseFakes) records(t *testing.T) ([]storage.Status, []string) {
	t.Helper()
	revs, err := storage.History(context.Background(), f.store.InNamespace("ml"), "chat")
	require.NoError(t, err)
	var statuses []storage.Status
	var descs []string
	for _, r := range revs {
		statuses = append(statuses, r.Status)
		descs = append(descs, r.Description)
	}
	return statuses, descs
}

// failFirst is a waiter script under which the first wait fails with a
// Failed Deployment and later ones succeed.
func failFirst(outcome wait.Outcome) func(context.Context, []rollout.ObjectStatus, wait.Options) (wait.Result, error) {
	var calls atomic.Int32
	fail := releasetest.FailKind("Deployment", outcome, "CrashLoopBackOff: pod chat-1 container vllm")
	return func(ctx context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
		if calls.Add(1) == 1 {
			return fail(ctx, objs, opts)
		}
		return wait.Result{Outcome: wait.OutcomeCurrent, Objects: objs}, nil
	}
}

func TestWaitCommandHealthy(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	before := f.waiter.Calls()

	stdout, stderr, code := f.runWait(t, "chat")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, before+1, f.waiter.Calls(), "one wait")
	assert.Contains(t, stdout, "REVISION: 1\n")
	assert.Contains(t, stdout, "STATUS: deployed\n")
	assert.NotContains(t, stdout, "FAILURE")
	assert.Contains(t, stderr, "chat#1 wait: waiting: revision 1 (deployed: Install complete), 2 object(s), timeout 31m0s, following the startup probe's budget (no --timeout given)\n")
	assert.Contains(t, stderr, "chat#1 done: deployed: healthy")

	stdout, stderr, code = f.runWait(t, "chat", "-o", "json", "--progress", "json")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	var doc map[string]any
	dec := json.NewDecoder(strings.NewReader(stdout))
	require.NoError(t, dec.Decode(&doc))
	assert.False(t, dec.More(), "exactly one JSON document")
	for _, k := range []string{"release", "namespace", "revision", "status", "chart", "appVersion", "replicaSets", "durationSeconds"} {
		assert.Contains(t, doc, k)
	}
	assert.NotContains(t, doc, "failure")
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var ev release.ProgressEvent
		require.NoError(t, json.Unmarshal([]byte(l), &ev), "progress line %q", l)
	}

	statuses, _ := f.records(t)
	assert.Equal(t, []storage.Status{storage.StatusDeployed}, statuses, "records unchanged")
}

func TestWaitCommandFailedWithoutRollback(t *testing.T) {
	for _, outcome := range []wait.Outcome{wait.OutcomeFailed, wait.OutcomeTimeout} {
		t.Run(string(outcome), func(t *testing.T) {
			f := newReleaseFakes()
			for _, tag := range []string{"v0.10.0", "v0.11.0"} {
				_, stderr, code := f.run(t, deployArgs("--set", "image.tag="+tag)...)
				require.Equal(t, 0, code, "stderr: %s", stderr)
			}
			applies := f.cluster.Applies()
			f.waiter.Script = releasetest.FailKind("Deployment", outcome, "CrashLoopBackOff: pod chat-1 container vllm")

			stdout, stderr, code := f.runWait(t, "chat", "--timeout", "30s")
			assert.Equal(t, 4, code, "stderr: %s", stderr)
			assert.Contains(t, stdout, "REVISION: 2\n")
			assert.Contains(t, stdout, "FAILURE: "+map[wait.Outcome]string{wait.OutcomeFailed: "Failed", wait.OutcomeTimeout: "Timeout"}[outcome])
			assert.Contains(t, stdout, "CrashLoopBackOff: pod chat-1 container vllm")
			assert.Contains(t, stderr, "chat#2 done: unhealthy")
			assert.Contains(t, stderr, "Error: release chat revision 2: rollout failed")
			assert.Equal(t, applies, f.cluster.Applies(), "nothing applied")
			statuses, _ := f.records(t)
			assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusDeployed}, statuses, "records unchanged")
		})
	}
}

func TestWaitCommandRollsBack(t *testing.T) {
	f := newReleaseFakes()
	for _, tag := range []string{"v0.10.0", "v0.11.0"} {
		_, stderr, code := f.run(t, deployArgs("--set", "image.tag="+tag)...)
		require.Equal(t, 0, code, "stderr: %s", stderr)
	}
	f.waiter.Script = failFirst(wait.OutcomeFailed)

	stdout, stderr, code := f.runWait(t, "chat", "--rollback-on-failure", "-o", "json")
	require.Equal(t, 3, code, "stderr: %s", stderr)
	res := &release.Result{}
	require.NoError(t, json.Unmarshal([]byte(stdout), res))
	assert.Equal(t, 2, res.Revision, "the waited revision")
	assert.Equal(t, storage.StatusSuperseded, res.Status, "superseded by the rollback")
	assert.Equal(t, 2, res.RolledBackTo, "the deployed revision itself is the newest good one")
	require.NotNil(t, res.Failure)
	assert.Equal(t, "Failed", res.Failure.Reason)
	assert.Contains(t, stderr, "chat#2 rollback: started: rollout failed: Failed; restoring revision 2")
	assert.Contains(t, stderr, "chat#3 done: deployed: Rollback to 2")
	assert.Contains(t, stderr, "rolled back to revision 2")

	statuses, descs := f.records(t)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusDeployed}, statuses)
	assert.Equal(t, "Rollback to 2", descs[2])
}

func TestWaitCommandFailedRevisionRollsBackToTheLastGoodOne(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs("--set", "image.tag=v0.10.0")...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	f.waiter.Script = releasetest.FailKind("Deployment", wait.OutcomeTimeout, "1 out of 2 new replicas have been updated")
	_, stderr, code = f.run(t, deployArgs("--set", "image.tag=v0.11.0", "--no-rollback", "--timeout", "1m")...)
	require.Equal(t, 4, code, "stderr: %s", stderr)

	f.waiter.Script = failFirst(wait.OutcomeTimeout)
	_, stderr, code = f.runWait(t, "chat", "--rollback-on-failure", "--timeout", "1m")
	require.Equal(t, 3, code, "stderr: %s", stderr)
	assert.Contains(t, stderr, "chat#2 wait: waiting: revision 2 (failed: Upgrade failed: Timeout (Deployment/chat))")
	assert.Contains(t, stderr, "restoring revision 1")
	statuses, descs := f.records(t)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusFailed, storage.StatusDeployed}, statuses)
	assert.Equal(t, "Rollback to 1", descs[2])
}

func TestWaitCommandFailedRevisionNowHealthyKeepsItsRecord(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs("--set", "image.tag=v0.10.0")...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	f.waiter.Script = releasetest.FailKind("Deployment", wait.OutcomeTimeout, "1 out of 2 new replicas have been updated")
	_, stderr, code = f.run(t, deployArgs("--set", "image.tag=v0.11.0", "--no-rollback", "--timeout", "1m")...)
	require.Equal(t, 4, code, "stderr: %s", stderr)

	f.waiter.Script = nil
	stdout, stderr, code := f.runWait(t, "chat", "--rollback-on-failure")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "REVISION: 2\n")
	assert.Contains(t, stdout, "STATUS: failed\n")
	assert.Contains(t, stderr, "chat#2 done: failed: healthy; the record stays failed (wait changes no record)")
	statuses, _ := f.records(t)
	assert.Equal(t, []storage.Status{storage.StatusDeployed, storage.StatusFailed}, statuses, "records unchanged")
}

func TestWaitCommandNoGoodRevision(t *testing.T) {
	f := newReleaseFakes()
	f.waiter.Script = releasetest.FailKind("Deployment", wait.OutcomeFailed, "CrashLoopBackOff")
	_, stderr, code := f.run(t, deployArgs("--no-rollback")...)
	require.Equal(t, 4, code, "stderr: %s", stderr)

	stdout, stderr, code := f.runWait(t, "chat", "--rollback-on-failure")
	assert.Equal(t, 4, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "FAILURE: Failed")
	assert.Contains(t, stderr, "automatic rollback failed: release chat: no deployed or superseded revision up to revision 1 to roll back to")
	statuses, _ := f.records(t)
	assert.Equal(t, []storage.Status{storage.StatusFailed}, statuses, "records unchanged")
}

func TestWaitCommandLocked(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	_, err := storage.Acquire(context.Background(), f.store.InNamespace("ml"), "chat", storage.OpDeploy,
		storage.LockOptions{Holder: "bob@ci pid 7", Clock: releasetest.ClockFunc(func() time.Time { return f.now })})
	require.NoError(t, err)
	calls := f.waiter.Calls()

	stdout, stderr, code := f.runWait(t, "chat")
	assert.Equal(t, 5, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "Error: wait on release chat: another operation is in progress (wait for it to finish): "+
		"release chat in namespace ml is locked by another operation: revision 2 is pending-upgrade (Upgrade in progress), held by bob@ci pid 7")
	assert.Equal(t, calls, f.waiter.Calls(), "nothing waited for")
}

func TestWaitCommandAnotherOperationStartsMeanwhile(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	fail := releasetest.FailKind("Deployment", wait.OutcomeFailed, "CrashLoopBackOff")
	f.waiter.Script = func(ctx context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
		// A deploy by someone else takes the lock while we wait.
		_, err := storage.Acquire(ctx, f.store.InNamespace("ml"), "chat", storage.OpDeploy,
			storage.LockOptions{Holder: "bob@ci pid 7", Clock: releasetest.ClockFunc(func() time.Time { return f.now })})
		require.NoError(t, err)
		return fail(ctx, objs, opts)
	}

	stdout, stderr, code := f.runWait(t, "chat", "--rollback-on-failure")
	assert.Equal(t, 5, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "FAILURE: Failed")
	assert.Contains(t, stderr, "Error: wait on release chat revision 1: Failed; release chat in namespace ml is locked by another operation: revision 2 is pending-upgrade")
	assert.NotContains(t, stderr, "rollback: started")
	statuses, _ := f.records(t)
	assert.Equal(t, []storage.Status{storage.StatusDeployed, storage.StatusPendingUpgrade}, statuses, "no rollback")
}

func TestWaitCommandRefuses(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	_, stderr, code = f.run(t, "uninstall", "chat", "--keep-history")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	calls := f.waiter.Calls()

	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"unknown release", []string{"nope"}, "Error: release nope not found in namespace ml\n"},
		{"uninstalled release", []string{"chat"}, "Error: release chat: revision 2 is uninstalled: the release has no objects to wait for; revisions: 1, 2\n"},
		{"invalid release name", []string{"Chat_1"}, `Error: invalid release name "Chat_1"`},
		{"no release", nil, "accepts 1 arg(s), received 0"},
		{"bad timeout", []string{"chat", "--timeout", "0s"}, "--timeout 0s: must be positive"},
		{"bad output", []string{"chat", "-o", "wide"}, `--output "wide": want table, json or yaml`},
		{"bad progress", []string{"chat", "--progress", "fancy"}, `--progress "fancy"`},
		{"bad verdict", []string{"chat", "--max-restarts", "0"}, "--max-restarts 0: must be 1 or more"},
		{"bad history max", []string{"chat", "--history-max", "-1"}, "--history-max -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := f.runWait(t, tt.args...)
			assert.Equal(t, 2, code, "stderr: %s", stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tt.wantStderr)
		})
	}
	assert.Equal(t, calls, f.waiter.Calls(), "nothing waited for")
}
