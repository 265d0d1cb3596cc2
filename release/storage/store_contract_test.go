package storage

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

// TestStoreContract is the one suite every Store must pass: it runs against
// the in-memory store and the Secrets store (on client-go's fake clientset).
func TestStoreContract(t *testing.T) {
	suite := []struct {
		name string
		run  func(t *testing.T, b storeBackend)
	}{
		{"create and get", contractCreateGet},
		{"create existing revision", contractCreateExists},
		{"create validates", contractCreateValidates},
		{"get missing", contractGetMissing},
		{"update", contractUpdate},
		{"update stale copy conflicts", contractUpdateConflict},
		{"list", contractList},
		{"list all", contractListAll},
		{"delete", contractDelete},
		{"helpers", contractHelpers},
		{"acquire", contractAcquire},
		{"acquire while locked", contractAcquireLocked},
		{"racing acquires", contractAcquireRace},
		{"stale pending taken over", contractAcquireStale},
		{"force unlock", contractAcquireForce},
		{"acquire while holding", contractAcquireHeld},
		{"taken-over holder cannot finish", contractTakenOverHolder},
		{"exactly one deployed", contractExactlyOneDeployed},
		{"uninstalled leaves none deployed", contractUninstalled},
		{"history max", contractPruneHistory},
		{"records stay small", contractRecordSize},
	}
	for _, b := range storeBackends() {
		t.Run(b.name, func(t *testing.T) {
			for _, tc := range suite {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, b) })
			}
		})
	}
}

// putRecords creates records of release name with the given statuses, revision 1
// first.
func putRecords(t *testing.T, s Store, name string, statuses ...Status) []*Release {
	t.Helper()
	out := make([]*Release, len(statuses))
	for i, st := range statuses {
		r := sampleRecord(t, name, i+1, st)
		require.NoError(t, s.Create(context.Background(), r))
		out[i] = r
	}
	return out
}

func recordStatuses(t *testing.T, s Store, name string) []Status {
	t.Helper()
	entries, err := s.List(context.Background(), name)
	require.NoError(t, err)
	out := make([]Status, len(entries))
	for i, e := range entries {
		out[i] = e.Status
		r, err := e.Release()
		require.NoError(t, err)
		require.Equal(t, e.Status, r.Status, "label and body agree")
	}
	return out
}

func contractCreateGet(t *testing.T, b storeBackend) {
	ctx := context.Background()
	s, _ := b.new(t, "ml")
	r := sampleRecord(t, "chat", 1, StatusDeployed)
	require.NoError(t, s.Create(ctx, r))
	assert.Equal(t, s.Namespace(), r.Namespace, "Create sets the namespace")

	got, err := s.Get(ctx, "chat", 1)
	require.NoError(t, err)
	assert.Equal(t, r, got)

	got.Description = "changed"
	again, err := s.Get(ctx, "chat", 1)
	require.NoError(t, err)
	assert.Equal(t, "Upgrade complete", again.Description, "Get returns a copy")
}

func contractCreateExists(t *testing.T, b storeBackend) {
	ctx := context.Background()
	s, _ := b.new(t, "ml")
	putRecords(t, s, "chat", StatusDeployed)
	err := s.Create(ctx, sampleRecord(t, "chat", 1, StatusPendingUpgrade))
	require.ErrorIs(t, err, ErrExists)
	assert.Contains(t, err.Error(), s.Namespace()+"/vllmctl.release.v1.chat.v1")
	assert.Equal(t, []Status{StatusDeployed}, recordStatuses(t, s, "chat"))
}

func contractCreateValidates(t *testing.T, b storeBackend) {
	tests := []struct {
		name   string
		mutate func(r *Release)
		check  func(t *testing.T, err error)
	}{
		{"invalid name", func(r *Release) { r.Name = "Bad_Name" }, func(t *testing.T, err error) {
			var inv *InvalidNameError
			require.ErrorAs(t, err, &inv)
			assert.Equal(t, 2, inv.ExitCode())
		}},
		{"revision 0", func(r *Release) { r.Revision = 0 }, nil},
		{"unknown status", func(r *Release) { r.Status = "uninstalling" }, nil},
		{"other namespace", func(r *Release) { r.Namespace = "other" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := b.new(t, "ml")
			r := sampleRecord(t, "chat", 1, StatusDeployed)
			tt.mutate(r)
			err := s.Create(context.Background(), r)
			require.Error(t, err)
			if tt.check != nil {
				tt.check(t, err)
			}
			all, err := s.ListAll(context.Background(), "")
			require.NoError(t, err)
			assert.Empty(t, b.scope(s, all))
		})
	}
}

func contractGetMissing(t *testing.T, b storeBackend) {
	ctx := context.Background()
	tests := []struct {
		name     string
		existing []Status
		rev      int
		want     string
		existRev []int
	}{
		{"unknown revision", []Status{StatusSuperseded, StatusSuperseded, StatusDeployed}, 7,
			"revision 7 of release chat not found; revisions: 1, 2, 3", []int{1, 2, 3}},
		{"unknown release", nil, 1, "release chat not found in namespace %s", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := b.new(t, "ml")
			putRecords(t, s, "chat", tt.existing...)
			_, err := s.Get(ctx, "chat", tt.rev)
			var nf *NotFoundError
			require.ErrorAs(t, err, &nf)
			assert.Equal(t, strings.ReplaceAll(tt.want, "%s", s.Namespace()), err.Error())
			assert.Equal(t, tt.existRev, nf.Existing)
			assert.Equal(t, 2, nf.ExitCode())
		})
	}
}

func contractUpdate(t *testing.T, b storeBackend) {
	ctx := context.Background()
	s, _ := b.new(t, "ml")
	r := putRecords(t, s, "chat", StatusPendingInstall)[0]
	r.Status = StatusDeployed
	r.Description = "Install complete"
	require.NoError(t, s.Update(ctx, r))
	got, err := s.Get(ctx, "chat", 1)
	require.NoError(t, err)
	assert.Equal(t, StatusDeployed, got.Status)
	assert.Equal(t, "Install complete", got.Description)
	assert.Equal(t, []Status{StatusDeployed}, recordStatuses(t, s, "chat"), "the status label follows")

	// Updating the same value again is fine: it carries the new version.
	r.Description = "again"
	require.NoError(t, s.Update(ctx, r))

	missing := sampleRecord(t, "chat", 9, StatusFailed)
	err = s.Update(ctx, missing)
	var nf *NotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, []int{1}, nf.Existing)
}

func contractUpdateConflict(t *testing.T, b storeBackend) {
	ctx := context.Background()
	s, _ := b.new(t, "ml")
	putRecords(t, s, "chat", StatusPendingUpgrade)
	a, err := s.Get(ctx, "chat", 1)
	require.NoError(t, err)
	c, err := s.Get(ctx, "chat", 1)
	require.NoError(t, err)

	a.Status = StatusFailed
	require.NoError(t, s.Update(ctx, a))
	c.Status = StatusDeployed
	err = s.Update(ctx, c)
	var conflict *ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, 5, conflict.ExitCode())
	assert.Equal(t, []Status{StatusFailed}, recordStatuses(t, s, "chat"))
}

func contractList(t *testing.T, b storeBackend) {
	ctx := context.Background()
	s, other := b.new(t, "ml")
	for i := 1; i <= 12; i++ { // revisions 10..12 sort after 9
		require.NoError(t, s.Create(ctx, sampleRecord(t, "chat", i, StatusSuperseded)))
	}
	putRecords(t, s, "chat-2", StatusDeployed)
	require.NoError(t, other("dev").Create(ctx, sampleRecord(t, "chat", 1, StatusDeployed)))

	entries, err := s.List(ctx, "chat")
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Revisions(entries))
	for _, e := range entries {
		assert.Equal(t, s.Namespace(), e.Namespace)
		assert.Equal(t, "chat", e.Name)
	}
	r, err := entries[11].Release()
	require.NoError(t, err)
	assert.Equal(t, 12, r.Revision)

	none, err := s.List(ctx, "absent")
	require.NoError(t, err)
	assert.Empty(t, none)

	_, err = s.List(ctx, "Not Valid")
	var inv *InvalidNameError
	require.ErrorAs(t, err, &inv)
}

func contractListAll(t *testing.T, b storeBackend) {
	ctx := context.Background()
	s, other := b.new(t, "ml")
	dev := other("dev")
	ml, dv := s.Namespace(), dev.Namespace()
	putRecords(t, s, "chat", StatusSuperseded, StatusDeployed)
	putRecords(t, s, "embed", StatusDeployed)
	putRecords(t, dev, "chat", StatusFailed)

	type id struct {
		ns, name string
		rev      int
	}
	ids := func(es []Entry) []id {
		var out []id
		for _, e := range b.scope(s, es) {
			out = append(out, id{e.Namespace, e.Name, e.Revision})
		}
		return out
	}
	tests := []struct {
		name string
		ns   string
		want []id
	}{
		{"own namespace", ml, []id{{ml, "chat", 1}, {ml, "chat", 2}, {ml, "embed", 1}}},
		{"other namespace", dv, []id{{dv, "chat", 1}}},
		{"all namespaces", "", []id{{dv, "chat", 1}, {ml, "chat", 1}, {ml, "chat", 2}, {ml, "embed", 1}}},
		{"empty namespace", "nothing-here", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es, err := s.ListAll(ctx, tt.ns)
			require.NoError(t, err)
			assert.Equal(t, tt.want, ids(es))
		})
	}
	all, err := s.ListAll(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, []id{{dv, "chat", 1}, {ml, "chat", 2}, {ml, "embed", 1}}, ids(LatestPerRelease(all)))
}

func contractDelete(t *testing.T, b storeBackend) {
	ctx := context.Background()
	s, _ := b.new(t, "ml")
	putRecords(t, s, "chat", StatusSuperseded, StatusDeployed)
	require.NoError(t, s.Delete(ctx, "chat", 1))
	entries, err := s.List(ctx, "chat")
	require.NoError(t, err)
	assert.Equal(t, []int{2}, Revisions(entries))

	err = s.Delete(ctx, "chat", 1)
	var nf *NotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, "revision 1 of release chat not found; revisions: 2", err.Error())
}

func contractHelpers(t *testing.T, b storeBackend) {
	ctx := context.Background()
	s, _ := b.new(t, "ml")

	_, err := Last(ctx, s, "chat")
	var nf *NotFoundError
	require.ErrorAs(t, err, &nf)
	_, err = History(ctx, s, "chat")
	require.ErrorAs(t, err, &nf)
	next, err := NextRevision(ctx, s, "chat")
	require.NoError(t, err)
	assert.Equal(t, 1, next)

	putRecords(t, s, "chat", StatusSuperseded, StatusDeployed, StatusFailed)
	last, err := Last(ctx, s, "chat")
	require.NoError(t, err)
	assert.Equal(t, 3, last.Revision)
	dep, err := Deployed(ctx, s, "chat")
	require.NoError(t, err)
	assert.Equal(t, 2, dep.Revision)
	next, err = NextRevision(ctx, s, "chat")
	require.NoError(t, err)
	assert.Equal(t, 4, next)
	hist, err := History(ctx, s, "chat")
	require.NoError(t, err)
	require.Len(t, hist, 3)
	assert.Equal(t, StatusFailed, hist[2].Status)
	pending, err := Pending(ctx, s, "chat")
	require.NoError(t, err)
	assert.Empty(t, pending)

	putRecords(t, s, "broken", StatusFailed)
	_, err = Deployed(ctx, s, "broken")
	require.ErrorIs(t, err, ErrNoDeployed)
}

func contractAcquire(t *testing.T, b storeBackend) {
	ctx := context.Background()
	clk := newRecordClock()
	s, _ := b.new(t, "ml")

	r, err := Acquire(ctx, s, "chat", OpDeploy, LockOptions{Holder: "alice@laptop pid 1", Clock: clk, Timeout: 10 * time.Minute,
		Record: &Release{Chart: Chart{Name: "vllm", Version: "0.3.0"}, Manifest: "kind: Deployment\n"}})
	require.NoError(t, err)
	assert.Equal(t, 1, r.Revision)
	assert.Equal(t, StatusPendingInstall, r.Status)
	assert.Equal(t, "Install in progress", r.Description)
	assert.Equal(t, "alice@laptop pid 1", r.Holder)
	assert.Equal(t, "vllm", r.Chart.Name)
	assert.Equal(t, clk.Now(), r.Created)
	stored, err := s.Get(ctx, "chat", 1)
	require.NoError(t, err)
	assert.Equal(t, r, stored)

	clk.Step(time.Minute)
	require.NoError(t, MarkDeployed(ctx, s, r, clk, "Install complete"))

	tests := []struct {
		op   Operation
		want Status
		desc string
	}{
		{OpDeploy, StatusPendingUpgrade, "Upgrade in progress"},
		{OpRollback, StatusPendingRollback, "Rollback in progress"},
		{OpUninstall, StatusPendingUpgrade, "Uninstall in progress"},
	}
	for _, tt := range tests {
		t.Run(string(tt.op), func(t *testing.T) {
			p, err := Acquire(ctx, s, "chat", tt.op, LockOptions{Clock: clk})
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.Status)
			assert.Equal(t, tt.desc, p.Description)
			assert.NotEmpty(t, p.Holder, "defaults to user@host pid")
			require.NoError(t, MarkFailed(ctx, s, p, clk, "", nil))
		})
	}

	_, err = Acquire(ctx, s, "chat", Operation("explode"), LockOptions{Clock: clk})
	require.Error(t, err)
	_, err = Acquire(ctx, s, "Bad Name", OpDeploy, LockOptions{Clock: clk})
	var inv *InvalidNameError
	require.ErrorAs(t, err, &inv)
}

func contractAcquireLocked(t *testing.T, b storeBackend) {
	ctx := context.Background()
	clk := newRecordClock()
	s, _ := b.new(t, "ml")
	putRecords(t, s, "chat", StatusDeployed)
	held, err := Acquire(ctx, s, "chat", OpDeploy, LockOptions{Holder: "alice@laptop pid 1", Clock: clk, Lease: 10 * time.Minute})
	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, held.Lease, "the holder's terms are in its record")
	assert.Equal(t, DefaultHeartbeat, held.Renew)

	// Renewed within its lease as far as this clock can tell: live. A
	// waiter's short timeout never makes it stale.
	clk.Step(3 * time.Minute)
	_, err = Acquire(ctx, s, "chat", OpRollback, LockOptions{Holder: "bob@ci pid 2", Clock: clk, Timeout: time.Second})
	var locked *LockedError
	require.ErrorAs(t, err, &locked)
	assert.Equal(t, &LockedError{Namespace: s.Namespace(), Name: "chat", Revision: held.Revision, Status: StatusPendingUpgrade,
		Holder: "alice@laptop pid 1", Description: "Upgrade in progress", Age: 3 * time.Minute, Timeout: 10 * time.Minute}, locked)
	assert.Equal(t, 5, locked.ExitCode())
	assert.Contains(t, err.Error(), "revision 2 is pending-upgrade")
	assert.Contains(t, err.Error(), "alice@laptop pid 1")
	assert.Contains(t, err.Error(), "3m0s")
	assert.Equal(t, []Status{StatusDeployed, StatusPendingUpgrade}, recordStatuses(t, s, "chat"), "nothing changed")

	// Older than its lease by this clock (another machine's clock may be
	// off): it is watched, and a watch cut short by the waiter's timeout
	// leaves it held.
	clk.Step(24 * time.Hour)
	_, err = Acquire(ctx, s, "chat", OpDeploy, LockOptions{Clock: clk, Timeout: 50 * time.Millisecond})
	require.ErrorAs(t, err, &locked)
	assert.Equal(t, []Status{StatusDeployed, StatusPendingUpgrade}, recordStatuses(t, s, "chat"), "nothing changed")
}

func contractAcquireRace(t *testing.T, b storeBackend) {
	const racers = 8
	tests := []struct {
		name  string
		setup []Status
		opts  LockOptions
	}{
		{"fresh release", nil, LockOptions{}},
		{"deployed release", []Status{StatusSuperseded, StatusDeployed}, LockOptions{}},
		{"stale pending", []Status{StatusDeployed, StatusPendingUpgrade}, LockOptions{}},
		{"forced", []Status{StatusDeployed, StatusPendingUpgrade}, LockOptions{Force: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk := newRecordClock()
			clk.Step(time.Hour) // sample records are older than a minute
			s, _ := b.new(t, "ml")
			for _, r := range putRecords(t, s, "chat", tt.setup...) {
				if r.Status.IsPending() {
					r.Lease = 50 * time.Millisecond // its holder died long ago
					require.NoError(t, s.Update(ctx, r))
				}
			}

			var wg sync.WaitGroup
			results := make([]*Release, racers)
			errs := make([]error, racers)
			start := make(chan struct{})
			for i := range racers {
				wg.Go(func() {
					<-start
					opts := tt.opts
					opts.Clock = clk
					opts.Holder = fmt.Sprintf("racer-%d", i)
					results[i], errs[i] = Acquire(ctx, s, "chat", OpDeploy, opts)
				})
			}
			close(start)
			wg.Wait()

			var winners []*Release
			for i := range racers {
				if errs[i] == nil {
					winners = append(winners, results[i])
					continue
				}
				var locked *LockedError
				require.ErrorAs(t, errs[i], &locked, "racer %d", i)
			}
			if !tt.opts.Force {
				require.Len(t, winners, 1, "exactly one racer wins")
			}
			// A forced unlock that looks after a racer won takes that lock
			// over in turn; still, exactly one lock survives and only its
			// holder can finish.
			pending, err := Pending(ctx, s, "chat")
			require.NoError(t, err)
			require.Len(t, pending, 1, "exactly one pending record")
			finished := 0
			for _, w := range winners {
				err := MarkDeployed(ctx, s, w, clk, "")
				if err == nil {
					finished++
					assert.Equal(t, pending[0].Holder, w.Holder)
					assert.Equal(t, pending[0].Revision, w.Revision)
					continue
				}
				var conflict *ConflictError
				require.ErrorAs(t, err, &conflict)
			}
			assert.Equal(t, 1, finished, "exactly one holder can finish")
		})
	}
}

func contractAcquireStale(t *testing.T, b storeBackend) {
	ctx := context.Background()
	clk := newRecordClock()
	s, _ := b.new(t, "ml")
	putRecords(t, s, "chat", StatusDeployed)
	old, err := Acquire(ctx, s, "chat", OpDeploy, LockOptions{Holder: "ci-job-1", Clock: clk, Lease: 200 * time.Millisecond})
	require.NoError(t, err)

	// Within its lease: live, refused at once.
	clk.Step(100 * time.Millisecond)
	_, err = Acquire(ctx, s, "chat", OpDeploy, LockOptions{Holder: "ci-job-2", Clock: clk})
	var locked *LockedError
	require.ErrorAs(t, err, &locked)

	// Renewed while watched: live. The holder renews it just before the
	// watch's first read, after the watch began from the listed record.
	clk.Step(time.Hour)
	renewing := &renewBeforeGet{Store: s, renew: func() error {
		p, err := s.Get(ctx, "chat", old.Revision)
		if err != nil {
			return err
		}
		p.Updated = p.Updated.Add(time.Second)
		return s.Update(ctx, p)
	}}
	_, err = Acquire(ctx, renewing, "chat", OpDeploy, LockOptions{Holder: "ci-job-2", Clock: clk})
	require.NoError(t, renewing.err)
	require.True(t, renewing.renewed, "the watch read the record")
	require.ErrorAs(t, err, &locked, "renewed while watched")

	// Unrenewed for its whole lease, as watched: stale, taken over.
	clk.Step(time.Hour)
	r, err := Acquire(ctx, s, "chat", OpDeploy, LockOptions{Holder: "ci-job-2", Clock: clk})
	require.NoError(t, err)
	assert.Equal(t, 3, r.Revision)
	assert.Equal(t, "ci-job-2", r.Holder)
	prev, err := s.Get(ctx, "chat", old.Revision)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, prev.Status)
	assert.True(t, strings.HasPrefix(prev.Description, "interrupted: lock taken over by ci-job-2"), prev.Description)
	assert.Contains(t, prev.Description, "as watched by this operation, lease 200ms")
	assert.Equal(t, []Status{StatusDeployed, StatusFailed, StatusPendingUpgrade}, recordStatuses(t, s, "chat"))
}

// renewBeforeGet is a Store whose first Get runs renew first: the
// holder of a watched pending record renewing it while it is watched.
type renewBeforeGet struct {
	Store
	renew   func() error
	renewed bool
	err     error
}

func (r *renewBeforeGet) Get(ctx context.Context, name string, revision int) (*Release, error) {
	if !r.renewed {
		r.renewed = true
		r.err = r.renew()
	}
	return r.Store.Get(ctx, name, revision)
}

func contractAcquireForce(t *testing.T, b storeBackend) {
	ctx := context.Background()
	clk := newRecordClock()
	s, _ := b.new(t, "ml")
	putRecords(t, s, "chat", StatusDeployed)
	_, err := Acquire(ctx, s, "chat", OpDeploy, LockOptions{Holder: "ci-job-1", Clock: clk})
	require.NoError(t, err)
	clk.Step(5 * time.Second)

	r, err := Acquire(ctx, s, "chat", OpRollback, LockOptions{Holder: "oncall", Clock: clk, Timeout: 10 * time.Minute, Force: true})
	require.NoError(t, err)
	assert.Equal(t, StatusPendingRollback, r.Status)
	prev, err := s.Get(ctx, "chat", 2)
	require.NoError(t, err)
	assert.Equal(t, StatusFailed, prev.Status)
	assert.True(t, strings.HasPrefix(prev.Description, "interrupted: lock taken over by oncall"), prev.Description)
	assert.Contains(t, prev.Description, "force-unlock")
}

func contractAcquireHeld(t *testing.T, b storeBackend) {
	ctx := context.Background()
	clk := newRecordClock()
	s, _ := b.new(t, "ml")
	putRecords(t, s, "chat", StatusDeployed)
	upgrade, err := Acquire(ctx, s, "chat", OpDeploy, LockOptions{Holder: "me", Clock: clk})
	require.NoError(t, err)

	// Roll the failed upgrade back without ever releasing the lock.
	rb, err := Acquire(ctx, s, "chat", OpRollback, LockOptions{Holder: "me", Clock: clk, Held: upgrade,
		Record: &Release{RollbackOf: 1}})
	require.NoError(t, err)
	assert.Equal(t, 3, rb.Revision)
	assert.Equal(t, 1, rb.RollbackOf)
	require.NoError(t, MarkFailed(ctx, s, upgrade, clk, "Upgrade failed", &rollout.Diagnosis{Reason: "CrashLoopBackOff"}))
	require.NoError(t, MarkDeployed(ctx, s, rb, clk, "Rollback to 1"))
	assert.Equal(t, []Status{StatusSuperseded, StatusFailed, StatusDeployed}, recordStatuses(t, s, "chat"))
	failed, err := s.Get(ctx, "chat", 2)
	require.NoError(t, err)
	assert.Equal(t, "CrashLoopBackOff", failed.Failure.Reason)
}

func contractTakenOverHolder(t *testing.T, b storeBackend) {
	ctx := context.Background()
	clk := newRecordClock()
	s, _ := b.new(t, "ml")
	slow, err := Acquire(ctx, s, "chat", OpDeploy, LockOptions{Holder: "slow", Clock: clk, Lease: 50 * time.Millisecond})
	require.NoError(t, err)
	clk.Step(time.Hour)
	_, err = Acquire(ctx, s, "chat", OpDeploy, LockOptions{Holder: "fast", Clock: clk})
	require.NoError(t, err)

	err = MarkDeployed(ctx, s, slow, clk, "Install complete")
	var conflict *ConflictError
	require.ErrorAs(t, err, &conflict, "the slow holder learns it lost the lock")
	assert.Equal(t, []Status{StatusFailed, StatusPendingInstall}, recordStatuses(t, s, "chat"))
}

func contractExactlyOneDeployed(t *testing.T, b storeBackend) {
	ctx := context.Background()
	clk := newRecordClock()
	s, _ := b.new(t, "ml")
	countDeployed := func() int {
		n := 0
		for _, st := range recordStatuses(t, s, "chat") {
			if st == StatusDeployed {
				n++
			}
		}
		return n
	}
	steps := []struct {
		name    string
		op      Operation
		succeed bool
		want    []Status
	}{
		{"install", OpDeploy, true, []Status{StatusDeployed}},
		{"upgrade", OpDeploy, true, []Status{StatusSuperseded, StatusDeployed}},
		{"failed upgrade", OpDeploy, false, []Status{StatusSuperseded, StatusDeployed, StatusFailed}},
		{"rollback", OpRollback, true, []Status{StatusSuperseded, StatusSuperseded, StatusFailed, StatusDeployed}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			clk.Step(time.Minute)
			r, err := Acquire(ctx, s, "chat", st.op, LockOptions{Clock: clk})
			require.NoError(t, err)
			clk.Step(time.Minute)
			if st.succeed {
				require.NoError(t, MarkDeployed(ctx, s, r, clk, ""))
			} else {
				require.NoError(t, MarkFailed(ctx, s, r, clk, "Upgrade failed", nil))
			}
			assert.Equal(t, st.want, recordStatuses(t, s, "chat"))
			assert.Equal(t, 1, countDeployed())
		})
	}

	// An interrupted transition left two deployed: Deployed picks the
	// newest and the next MarkDeployed repairs the rest.
	put2 := sampleRecord(t, "chat", 5, StatusDeployed)
	require.NoError(t, s.Create(ctx, put2))
	dep, err := Deployed(ctx, s, "chat")
	require.NoError(t, err)
	assert.Equal(t, 5, dep.Revision)
	r, err := Acquire(ctx, s, "chat", OpDeploy, LockOptions{Clock: clk})
	require.NoError(t, err)
	require.NoError(t, MarkDeployed(ctx, s, r, clk, ""))
	assert.Equal(t, 1, countDeployed())
	assert.Equal(t, StatusDeployed, recordStatuses(t, s, "chat")[5])
}

func contractUninstalled(t *testing.T, b storeBackend) {
	ctx := context.Background()
	clk := newRecordClock()
	s, _ := b.new(t, "ml")
	putRecords(t, s, "chat", StatusSuperseded, StatusDeployed)
	r, err := Acquire(ctx, s, "chat", OpUninstall, LockOptions{Clock: clk})
	require.NoError(t, err)
	require.NoError(t, MarkUninstalled(ctx, s, r, clk, "Uninstallation complete"))
	assert.Equal(t, []Status{StatusSuperseded, StatusSuperseded, StatusUninstalled}, recordStatuses(t, s, "chat"))
	_, err = Deployed(ctx, s, "chat")
	require.ErrorIs(t, err, ErrNoDeployed)

	// Deploying again installs.
	again, err := Acquire(ctx, s, "chat", OpDeploy, LockOptions{Clock: clk})
	require.NoError(t, err)
	assert.Equal(t, StatusPendingInstall, again.Status)
}

func contractPruneHistory(t *testing.T, b storeBackend) {
	S, D, F, P, U := StatusSuperseded, StatusDeployed, StatusFailed, StatusPendingUpgrade, StatusUninstalled
	tests := []struct {
		name        string
		records     []Status
		max         int
		wantDeleted []int
		wantLeft    []int
	}{
		{"unlimited", []Status{S, S, S, D}, 0, nil, []int{1, 2, 3, 4}},
		{"negative is unlimited", []Status{S, S, D}, -1, nil, []int{1, 2, 3}},
		{"under the limit", []Status{S, D}, 10, nil, []int{1, 2}},
		{"oldest go first", []Status{S, S, S, S, D}, 3, []int{1, 2}, []int{3, 4, 5}},
		{"deployed is oldest", []Status{D, F, F, F, F}, 2, []int{2, 3, 4}, []int{1, 5}},
		{"max 1 keeps deployed", []Status{S, D, F}, 1, []int{1, 3}, []int{2}},
		{"pending kept", []Status{S, S, D, P}, 1, []int{1, 2}, []int{3, 4}},
		{"uninstalled pruned", []Status{U, S, D}, 2, []int{1}, []int{2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s, _ := b.new(t, "ml")
			putRecords(t, s, "chat", tt.records...)
			putRecords(t, s, "other", S, S, S, D)
			deleted, err := PruneHistory(ctx, s, "chat", tt.max)
			require.NoError(t, err)
			assert.Equal(t, tt.wantDeleted, deleted)
			entries, err := s.List(ctx, "chat")
			require.NoError(t, err)
			assert.Equal(t, tt.wantLeft, Revisions(entries))
			others, err := s.List(ctx, "other")
			require.NoError(t, err)
			assert.Len(t, others, 4, "other releases untouched")
		})
	}
}

func contractRecordSize(t *testing.T, b storeBackend) {
	ctx := context.Background()
	s, _ := b.new(t, "ml")
	const n = 300
	for i := 1; i <= n; i++ {
		require.NoError(t, s.Create(ctx, sampleRecord(t, "chat", i, StatusSuperseded)))
	}
	r := sampleRecord(t, "chat", n, StatusSuperseded)
	r.Namespace = s.Namespace()
	data, err := Encode(r)
	require.NoError(t, err)
	assert.Less(t, len(data), 100<<10, "a record is < 100 KiB")
	t.Logf("record: %d bytes compressed, manifest %d bytes", len(data), len(r.Manifest))

	// How long reading it takes is BenchmarkHistory300's to measure, not a
	// timed assertion's (it failed on a loaded machine).
	hist, err := History(ctx, s, "chat")
	require.NoError(t, err)
	assert.Len(t, hist, n)
	if sec, ok := s.(*Secrets); ok {
		list, err := sec.client.CoreV1().Secrets(s.Namespace()).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, list.Items, n)
		for _, item := range list.Items {
			size := 0
			for k, v := range item.Data {
				size += len(k) + len(v)
			}
			require.Less(t, size, 100<<10, "Secret %s", item.Name)
		}
	}
}
