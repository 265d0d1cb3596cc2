package release_test

import (
	"context"
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

// TestWaitLockedNamesTheRecordsLease: wait never takes a lock over; its
// refusal says so, and the lease it names is the pending record's own,
// not wait's --timeout. Both when the lock is held as the wait starts and
// when another operation takes it while the wait fails.
func TestWaitLockedNamesTheRecordsLease(t *testing.T) {
	ctx := context.Background()
	const wantNote = "; wait takes no lock and never takes one over: run it again once that operation ends, " +
		"or see `vllmctl history chat -n ml` (deploy, rollback and uninstall take the lock over once they watched it unrenewed for its lease of 1m30s)"
	acquire := func(ctx context.Context, f *engFixture) {
		_, err := storage.Acquire(ctx, f.store, engRelease, storage.OpDeploy,
			storage.LockOptions{Holder: "bob@ci pid 7", Clock: releasetest.ClockFunc(f.tick), Lease: 90 * time.Second})
		require.NoError(t, err)
	}
	check := func(t *testing.T, err error) {
		t.Helper()
		var locked *storage.LockedError
		require.ErrorAs(t, err, &locked)
		assert.Equal(t, 90*time.Second, locked.Timeout, "the record's lease")
		assert.Equal(t, release.OpWait, locked.NoTakeover)
		assert.Equal(t, 5, exitCode(err))
		assert.Contains(t, err.Error(), "is locked by another operation: revision 2 is pending-upgrade (Upgrade in progress), held by bob@ci pid 7 for ")
		assert.Contains(t, err.Error(), wantNote)
		assert.NotContains(t, err.Error(), "lease of 3s", "not wait's timeout")
		assert.NotContains(t, err.Error(), "--force-unlock", "wait has no --force-unlock")
	}

	t.Run("held as the wait starts", func(t *testing.T) {
		f := newEngFixture(t)
		f.deploy(t, baseSpec())
		acquire(ctx, f)
		_, err := f.engine.Wait(ctx, release.WaitOptions{Name: engRelease, Timeout: 3 * time.Second})
		check(t, err)
	})

	t.Run("taken while the wait fails", func(t *testing.T) {
		f := newEngFixture(t)
		f.deploy(t, baseSpec())
		fail := releasetest.FailKind("Deployment", wait.OutcomeFailed, "CrashLoopBackOff")
		f.waiter.Script = func(ctx context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
			acquire(ctx, f)
			return fail(ctx, objs, opts)
		}
		_, err := f.engine.Wait(ctx, release.WaitOptions{Name: engRelease, Timeout: 3 * time.Second, RollbackOnFailure: true})
		check(t, err)
	})
}

// TestLockedErrorMessage: what the holder of a lock is told, by whether
// the refused operation takes locks over.
func TestLockedErrorMessage(t *testing.T) {
	base := storage.LockedError{Namespace: "ml", Name: "chat", Revision: 4, Status: storage.StatusPendingUpgrade,
		Holder: "bob@ci pid 7", Description: "Upgrade in progress", Age: 125 * time.Second}
	const head = "release chat in namespace ml is locked by another operation: revision 4 is pending-upgrade (Upgrade in progress), held by bob@ci pid 7 for 2m5s"
	for _, tc := range []struct {
		name       string
		lease      time.Duration
		noTakeover storage.Operation
		want       string
	}{
		{"takes locks over", 2 * time.Minute, "",
			head + "; it is taken over once watched unrenewed for its lease of 2m0s, or now with --force-unlock"},
		{"only forced", 0, "", head + "; use --force-unlock to take it over"},
		{"wait", 2 * time.Minute, release.OpWait,
			head + "; wait takes no lock and never takes one over: run it again once that operation ends, or see `vllmctl history chat -n ml` " +
				"(deploy, rollback and uninstall take the lock over once they watched it unrenewed for its lease of 2m0s)"},
		{"wait, no lease", 0, release.OpWait,
			head + "; wait takes no lock and never takes one over: run it again once that operation ends, or see `vllmctl history chat -n ml`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := base
			e.Timeout, e.NoTakeover = tc.lease, tc.noTakeover
			assert.Equal(t, tc.want, e.Error())
			assert.Equal(t, 5, e.ExitCode())
		})
	}
}
