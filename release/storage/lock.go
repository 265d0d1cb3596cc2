package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"time"

	"k8s.io/utils/clock"
)

// Operation is what an operation holding a release's lock does; it decides
// the pending status of the revision Acquire creates.
type Operation string

// The operations that take a release's lock.
const (
	// OpDeploy installs or upgrades: pending-upgrade when a revision is
	// deployed, pending-install otherwise.
	OpDeploy Operation = "deploy"
	// OpRollback restores an earlier revision: pending-rollback.
	OpRollback Operation = "rollback"
	// OpUninstall deletes the release's objects. The contract has no
	// pending-uninstall status, so its pending record is pending-upgrade,
	// with a description saying it is an uninstall.
	OpUninstall Operation = "uninstall"
)

// pendingStatus returns the status of the pending record op writes.
func (op Operation) pendingStatus(hasDeployed bool) (Status, error) {
	switch op {
	case OpDeploy:
		if hasDeployed {
			return StatusPendingUpgrade, nil
		}
		return StatusPendingInstall, nil
	case OpRollback:
		return StatusPendingRollback, nil
	case OpUninstall:
		return StatusPendingUpgrade, nil
	}
	return "", fmt.Errorf("unknown release operation %q", op)
}

func defaultDescription(op Operation, status Status) string {
	switch {
	case op == OpUninstall:
		return "Uninstall in progress"
	case status == StatusPendingInstall:
		return "Install in progress"
	case status == StatusPendingRollback:
		return "Rollback in progress"
	}
	return "Upgrade in progress"
}

// DefaultLease is how long a pending record may go unrenewed, as watched
// by another operation, before that operation takes the lock over. The
// holder renews it every DefaultHeartbeat, well inside the lease.
const DefaultLease = 2 * time.Minute

// defaultObserve is how often an operation looks at a pending record it
// watches for renewals (a tenth of a shorter lease; never past the
// watch's end).
const defaultObserve = time.Second

// LockOptions tune Acquire.
type LockOptions struct {
	// Holder identifies the caller in the pending record (default:
	// DefaultHolder()).
	Holder string
	// Description of the pending record (default: "Upgrade in progress"
	// and the like).
	Description string
	// Lease and Renew are the terms written into the new pending record
	// (0: DefaultLease, DefaultHeartbeat): the caller promises to rewrite
	// it every Renew.
	Lease time.Duration
	Renew time.Duration
	// Timeout bounds how long Acquire watches another operation's pending
	// record for renewals before giving up (0: as long as that record's
	// lease). It never decides staleness.
	Timeout time.Duration
	// Force takes any pending record over regardless of its age
	// (--force-unlock).
	Force bool
	// Clock stamps the records and measures how long a pending record was
	// watched (default: the wall clock).
	Clock clock.PassiveClock
	// Held is a pending record the caller already holds (for instance the
	// failed upgrade it is about to roll back). It does not count as a
	// conflict and is left as is; finishing it is the caller's job.
	Held *Release
	// Record, when set, is the template of the new pending record: its chart,
	// values, manifest, rollbackOf and replicaSets are copied. Name,
	// namespace, revision, status, holder, description and timestamps are
	// set by Acquire.
	Record *Release
	// Seen, when set, receives the records Acquire listed when it took the
	// lock without taking another pending record over (the records other
	// than the new one, oldest first): under the lock nobody else writes,
	// so the caller need not list them again. It is left nil otherwise.
	Seen *[]Entry
}

// maxAcquireAttempts bounds how often Acquire starts over after losing a
// race it could still win (a takeover or create that another writer beat).
const maxAcquireAttempts = 4

// Acquire takes the lock of release name for op: it creates the release's
// next revision as a pending record and returns it. The caller finishes that
// record (MarkDeployed, MarkFailed, MarkUninstalled or an Update) when done.
//
// If a pending record of the release exists, Acquire fails with a
// *LockedError naming it, unless the record was last written longer ago
// than opts.Timeout or opts.Force is set: then the lock is taken over, and
// once the new pending record exists the old one is marked failed
// ("interrupted: lock taken over by ..."). Two callers racing for the same
// revision cannot both win: the create of an existing record fails and the
// loser gets a *LockedError.
func Acquire(ctx context.Context, s Store, name string, op Operation, opts LockOptions) (*Release, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if _, err := op.pendingStatus(false); err != nil {
		return nil, err
	}
	clk := clockOr(opts.Clock)
	holder := opts.Holder
	if holder == "" {
		holder = DefaultHolder()
	}
	// A forced unlock takes over only the pending records present at the
	// first look, never the lock a racing writer took meanwhile.
	forceable := map[int]bool{}
	var lastErr error
	for attempt := range maxAcquireAttempts {
		r, err := tryAcquire(ctx, s, name, op, holder, clk, opts, attempt == 0, forceable)
		if err == nil {
			return r, nil
		}
		if !errors.Is(err, errRetry) {
			return nil, err
		}
		lastErr = err
	}
	// Still losing races: report whoever holds the lock now.
	if locked := currentHolder(ctx, s, name, clk, opts); locked != nil {
		return nil, locked
	}
	return nil, fmt.Errorf("acquire lock of release %s in namespace %s: %w", name, s.Namespace(), lastErr)
}

// errRetry marks a lost race after which Acquire looks again.
var errRetry = errors.New("lost a race for the release lock")

// tryAcquire makes one attempt at the lock: it lists the records, decides
// whether every other pending record can be taken over, creates the next
// revision pending and retires the records it took over. A lost race is
// errRetry.
func tryAcquire(ctx context.Context, s Store, name string, op Operation, holder string, clk clock.PassiveClock, opts LockOptions,
	first bool, forceable map[int]bool) (*Release, error) {
	entries, err := s.List(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := CheckNotHandedOver(entries, s.Namespace(), name); err != nil {
		return nil, err
	}
	now := Stamp(clk)
	plan := PlanOf(entries)
	pending, err := pendingOthers(entries, opts, first, forceable)
	if err != nil {
		return nil, err
	}

	// Refuse unless every pending record can be taken over: forced, or
	// watched going unrenewed for its whole lease.
	stale, err := staleReasons(ctx, s, pending, now, clk, opts, forceable)
	if err != nil {
		return nil, err
	}

	// Create the next revision first: that create is the one step racing
	// writers cannot both win. Only the winner then retires the records it
	// took over.
	r, err := newPendingRecord(s, name, op, holder, plan, now, opts)
	if err != nil {
		return nil, err
	}
	if err := s.Create(ctx, r); err != nil {
		if errors.Is(err, ErrExists) {
			return nil, fmt.Errorf("%w: %w", errRetry, err)
		}
		return nil, errors.Join(err, dropLostCreate(ctx, s, r))
	}

	if err := takeOverAll(ctx, s, r, pending, holder, now, stale); err != nil {
		return nil, err
	}
	if opts.Seen != nil && len(pending) == 0 {
		*opts.Seen = entries
	}
	return r, nil
}

// pendingOthers returns the pending records among entries other than the
// one the caller holds (opts.Held). On the first attempt it notes their
// revisions in forceable: a forced unlock takes over only those.
func pendingOthers(entries []Entry, opts LockOptions, first bool, forceable map[int]bool) ([]*Release, error) {
	var pending []*Release
	for _, e := range entries {
		if !e.Status.IsPending() || (opts.Held != nil && e.Revision == opts.Held.Revision) {
			continue
		}
		p, err := e.Release()
		if err != nil {
			return nil, err
		}
		pending = append(pending, p)
		if first {
			forceable[p.Revision] = true
		}
	}
	return pending, nil
}

// staleReasons returns, by revision, why each pending record can be taken
// over: forced (opts.Force, for a record in forceable), or watched going
// unrenewed for its whole lease. A record that cannot be taken over is
// watchLease's error.
func staleReasons(ctx context.Context, s Store, pending []*Release, now time.Time, clk clock.PassiveClock, opts LockOptions,
	forceable map[int]bool) (map[int]string, error) {
	stale := map[int]string{}
	for _, p := range pending {
		if opts.Force && forceable[p.Revision] {
			stale[p.Revision] = fmt.Sprintf("force-unlock, after %s", now.Sub(p.Updated).Truncate(time.Second))
			continue
		}
		why, err := watchLease(ctx, s, p, clk, opts)
		if err != nil {
			return nil, err
		}
		stale[p.Revision] = why
	}
	return stale, nil
}

// newPendingRecord returns the pending record op writes as the revision
// plan implies: opts.Record's chart, values (user and computed), notes, manifests, post-renderer, rollbackOf and
// replicaSets, with the lock's holder, lease terms, description and
// timestamps. Nothing is written.
func newPendingRecord(s Store, name string, op Operation, holder string, plan Plan, now time.Time, opts LockOptions) (*Release, error) {
	status, err := op.pendingStatus(plan.Upgrade)
	if err != nil {
		return nil, err
	}
	r := &Release{}
	if t := opts.Record; t != nil {
		r.Chart = t.Chart
		r.Values = t.Values
		r.ComputedValues = t.ComputedValues
		r.Notes = t.Notes
		r.Manifest = t.Manifest
		r.CRDManifest = t.CRDManifest
		r.Hooks = t.Hooks
		r.PostRenderer = t.PostRenderer
		r.RollbackOf = t.RollbackOf
		r.ReplicaSets = t.ReplicaSets
		r.ControllerRevisions = t.ControllerRevisions
	}
	r.Name = name
	r.Namespace = s.Namespace()
	r.Revision = plan.Revision
	r.Status = status
	r.Holder = holder
	r.Lease, r.Renew = opts.lease(), opts.renew()
	r.Description = opts.Description
	if r.Description == "" {
		r.Description = defaultDescription(op, status)
	}
	r.Created, r.Updated = now, now
	return r, nil
}

// takeOverAll retires the pending records the new lock r took over, each
// marked failed with its reason from stale. When one cannot be retired, r
// is given back (marked failed) rather than stranded, and the error is
// returned.
func takeOverAll(ctx context.Context, s Store, r *Release, pending []*Release, holder string, now time.Time, stale map[int]string) error {
	for _, p := range pending {
		if err := takeOver(ctx, s, p, holder, now, stale[p.Revision]); err != nil {
			// Do not strand the lock just taken: give it back.
			r.Status = StatusFailed
			r.Description = "lock not acquired: " + err.Error()
			if uerr := s.Update(ctx, r); uerr != nil {
				err = errors.Join(err, uerr)
			}
			return err
		}
	}
	return nil
}

// lease returns the lease written into new pending records.
func (opts LockOptions) lease() time.Duration {
	if opts.Lease > 0 {
		return opts.Lease
	}
	return max(DefaultLease, 3*opts.renew())
}

// renew returns the renewal interval written into new pending records.
func (opts LockOptions) renew() time.Duration {
	if opts.Renew > 0 {
		return opts.Renew
	}
	return DefaultHeartbeat
}

// LeaseOf is the lease a pending record's holder wrote (DefaultLease for
// records written before leases).
func LeaseOf(p *Release) time.Duration {
	if p.Lease > 0 {
		return p.Lease
	}
	return DefaultLease
}

// watchLease decides whether the pending record p can be taken over. A
// record this process's clock sees renewed within its lease is live (a
// *LockedError at once): clocks of two machines only ever delay a
// takeover. Otherwise p is watched, with this process's own clock, for
// its whole lease: any renewal (a rewrite by its holder) means its holder
// is alive (*LockedError); a record that finished meanwhile makes Acquire
// look again (errRetry); unrenewed for the lease, it is stale and the
// reason is returned. opts.Timeout, when shorter than the lease, bounds
// the watch: the lock is then still held (*LockedError).
func watchLease(ctx context.Context, s Store, p *Release, clk clock.PassiveClock, opts LockOptions) (string, error) {
	lease := LeaseOf(p)
	if age := Stamp(clk).Sub(p.Updated); age <= lease {
		return "", LockedBy(p, age, lease)
	}
	observe := min(defaultObserve, lease/10)
	start, startReal := clk.Now(), time.Now()
	for {
		// This process's own clock (monotonic), or the injected one.
		watched := max(clk.Now().Sub(start), time.Since(startReal))
		if watched >= lease {
			return fmt.Sprintf("not renewed for %s as watched by this operation, lease %s", watched.Truncate(time.Second), lease), nil
		}
		if opts.Timeout > 0 && watched >= opts.Timeout {
			return "", LockedBy(p, Stamp(clk).Sub(p.Updated), lease)
		}
		next := min(observe, lease-watched)
		if opts.Timeout > 0 {
			next = min(next, opts.Timeout-watched)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(next):
		}
		fresh, err := s.Get(ctx, p.Name, p.Revision)
		var nf *NotFoundError
		switch {
		case errors.As(err, &nf):
			return "", errRetry
		case err != nil:
			return "", err
		case !fresh.Status.IsPending():
			return "", errRetry
		case !fresh.Updated.Equal(p.Updated) || fresh.Holder != p.Holder:
			return "", LockedBy(fresh, 0, LeaseOf(fresh))
		}
	}
}

// takeOver marks the pending record p failed, saying who took its lock over
// and why. Should p change meanwhile it is read again; if its holder
// finished it in the meantime it is left alone.
func takeOver(ctx context.Context, s Store, p *Release, holder string, now time.Time, why string) error {
	for range maxAcquireAttempts {
		was := p.Description
		p.Status = StatusFailed
		p.Description = fmt.Sprintf("interrupted: lock taken over by %s (%s); was: %s", holder, why, was)
		p.Updated = now
		err := s.Update(ctx, p)
		var conflict *ConflictError
		var nf *NotFoundError
		switch {
		case err == nil, errors.As(err, &nf):
			return nil
		case !errors.As(err, &conflict):
			return err
		}
		fresh, err := s.Get(ctx, p.Name, p.Revision)
		if errors.As(err, &nf) {
			return nil
		}
		if err != nil {
			return err
		}
		if !fresh.Status.IsPending() {
			return nil
		}
		p = fresh
	}
	return fmt.Errorf("take over release %s revision %d: it keeps changing", p.Name, p.Revision)
}

// currentHolder returns a *LockedError for the newest pending record of
// release name not held by the caller, or nil.
func currentHolder(ctx context.Context, s Store, name string, clk clock.PassiveClock, opts LockOptions) *LockedError {
	pending, err := Pending(ctx, s, name)
	if err != nil {
		return nil
	}
	for i := len(pending) - 1; i >= 0; i-- {
		p := pending[i]
		if opts.Held != nil && p.Revision == opts.Held.Revision {
			continue
		}
		return LockedBy(p, Stamp(clk).Sub(p.Updated), LeaseOf(p))
	}
	return nil
}

func LockedBy(p *Release, age, timeout time.Duration) *LockedError {
	return &LockedError{
		Namespace:   p.Namespace,
		Name:        p.Name,
		Revision:    p.Revision,
		Status:      p.Status,
		Holder:      p.Holder,
		Description: p.Description,
		Age:         age,
		Timeout:     timeout,
	}
}

// DefaultHolder identifies this process: user@host pid N.
func DefaultHolder() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return fmt.Sprintf("%s@%s pid %d", name, host, os.Getpid())
}

// stamp is the time records are stamped with: UTC, without the monotonic
// reading, so that it survives an encode/decode round trip unchanged.
// A nil clock is the wall clock.
func Stamp(clk clock.PassiveClock) time.Time {
	return clockOr(clk).Now().UTC()
}

// clockOr returns clk, or the wall clock when clk is nil.
func clockOr(clk clock.PassiveClock) clock.PassiveClock {
	if clk == nil {
		return clock.RealClock{}
	}
	return clk
}

// dropLostCreate removes the pending record r when its create reached the
// store although the answer was lost (an interrupt or a connection cut
// mid-request): left behind, it would hold the lock for its whole lease
// with nobody renewing it. Only a record this very attempt wrote (same
// holder, same creation time) is removed, on a context of its own.
func dropLostCreate(ctx context.Context, s Store, r *Release) error {
	fctx, cancel := FinishContext(ctx)
	defer cancel()
	cur, err := s.Get(fctx, r.Name, r.Revision)
	var nf *NotFoundError
	switch {
	case errors.As(err, &nf):
		return nil
	case err != nil:
		return fmt.Errorf("release %s: check whether pending revision %d was written: %w", r.Name, r.Revision, err)
	case !cur.Status.IsPending() || cur.Holder != r.Holder || !cur.Created.Equal(r.Created):
		return nil
	}
	if err := s.Delete(fctx, r.Name, r.Revision); err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("release %s: remove pending revision %d written by an interrupted lock: %w", r.Name, r.Revision, err)
	}
	return nil
}

// DefaultHeartbeat is how often an operation rewrites its pending record
// while it waits, so that the lock never looks stale while its holder is
// alive.
const DefaultHeartbeat = DefaultLease / 3

// FinishTimeout bounds the writes that finish a record after the
// operation's own context ended (an interrupted deploy is still marked
// failed).
const FinishTimeout = 30 * time.Second

// FinishContext returns a context for the writes that finish an operation:
// ctx's values without its cancellation, bounded by FinishTimeout.
func FinishContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), FinishTimeout)
}
