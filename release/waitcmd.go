package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/servecheck"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// OpWait names a wait in a *RolloutError. A wait never takes the release's
// lock, so it has no pending status.
const OpWait storage.Operation = "wait"

// WaitOptions are the inputs of a wait on a release's current revision.
type WaitOptions struct {
	// Name is the release name.
	Name string
	// Timeout bounds the wait. 0 (no --timeout given): it follows the
	// revision's start-up budget (StartupTimeout: DefaultTimeout at least).
	Timeout time.Duration
	// RollbackOnFailure restores the newest good revision (deployed or
	// superseded, at or below the waited one; below it when the analysis
	// refused the waited one) when the wait fails or times out.
	RollbackOnFailure bool
	// RollbackTimeout is the rollback's own time budget (0:
	// DefaultTimeout); it does not share what is left of Timeout.
	RollbackTimeout time.Duration
	// HistoryMax is how many records the rollback keeps (0: unlimited).
	HistoryMax int
	// ForceConflicts lets the rollback take over fields other field
	// managers own (needed when another manager changed the objects).
	ForceConflicts bool
	// Analysis, when set (wait --analysis FILE, validated without a
	// baseline), is baked on the revision's pods once they are Ready and
	// serving; without it the built-in chart's recorded analysis values
	// are, when enabled.
	Analysis *analysis.Config
	// Prometheus is where an analysis' prometheus provider queries
	// (--prometheus-url …).
	Prometheus *analysis.PrometheusEndpoint
}

// Wait waits until the objects of the release's current revision (its
// highest one) are ready, within opts.Timeout:
//
//   - a release without records is a *NotFoundError, and one whose highest
//     revision is uninstalled an *InvalidRevisionError (exit code 2);
//   - a pending revision (another operation holds the lock) is a
//     *LockedError (exit code 5): nothing is waited for;
//   - healthy: the result carries the revision's recorded status, which is
//     left as it is (a failed revision whose objects became healthy stays
//     failed: deploy again or roll back to record a good revision);
//   - with an analysis (opts.Analysis, or the built-in chart's recorded
//     analysis values), it is baked on the revision's Ready pods once
//     they serve, as deploy without --canary does: an invalid spec (a
//     check that needs a baseline included) is exit code 2 before
//     anything is waited for; the report is the result's (no record is
//     written); a failed analysis (verdict AnalysisFailed, or
//     AnalysisInconclusive under inconclusive: fail) is a failed wait,
//     and one inconclusive under inconclusive: hold is one that is never
//     rolled back;
//   - failed or timed out: a *RolloutError (exit code 4) with the
//     diagnosis; with opts.RollbackOnFailure the newest deployed or
//     superseded revision at or below the waited one (below it when the
//     analysis refused it) is restored with a
//     [Engine.Rollback] (taking the lock like `vllmctl rollback`), and the
//     error's exit code is 3 once it is serving. A rollback that cannot
//     take the lock returns its *LockedError (exit code 5).
//
// The result is returned whenever a revision was waited on, also with an
// error.
func (e *Engine) Wait(ctx context.Context, opts WaitOptions) (*Result, error) {
	if err := e.check(needStore, needWaiter); err != nil {
		return nil, err
	}
	clk := e.clock()
	start := storage.Stamp(clk)
	entries, err := storage.HistoryEntries(ctx, e.Store, opts.Name)
	if err != nil {
		return nil, err
	}
	if err := storage.CheckNotHandedOver(entries, e.Namespace(), opts.Name); err != nil {
		return nil, err
	}
	rec, err := e.current(ctx, entries, opts)
	if err != nil {
		return nil, err
	}
	objs, err := cluster.ParseManifest(rec.Manifest)
	if err != nil {
		return nil, &InvalidManifestError{Name: rec.Name, Err: fmt.Errorf("revision %d: %w", rec.Revision, err)}
	}
	// Nothing is rendered: the revision's Secrets are learnt from its
	// record, so that a pod logging one shows it nowhere.
	e.Redactor.AddObjects(objs...)
	cfg, skip, err := analysis.OfWait(opts.Analysis, rec, opts.Prometheus != nil)
	if err != nil {
		return nil, err
	}
	if skip != "" {
		e.emit(rec.Name, rec.Revision, PhaseAnalysis, "", "skipped", skip)
	}
	timeoutNote := ""
	if opts.Timeout <= 0 {
		opts.Timeout = StartupTimeout(objs)
		timeoutNote = followingNote(opts.Timeout)
	}
	res := newResult(rec)
	if len(rec.ReplicaSets) > 0 {
		res.ReplicaSets = slices.Clone(rec.ReplicaSets)
	}
	if cfg != nil {
		timeoutNote += fmt.Sprintf(", then an analysis of %s (%d × %s)", cfg.Duration(), cfg.Count, cfg.Interval)
	}
	e.emit(rec.Name, rec.Revision, PhaseWait, "", "waiting",
		fmt.Sprintf("revision %d (%s: %s), %d object(s), timeout %s%s", rec.Revision, rec.Status, rec.Description, len(objs), opts.Timeout, timeoutNote))

	rec.ServeCheck = nil // the result shows this wait's check only
	wres, f, werr, err := e.await(ctx, rec, objs, opts.Timeout)
	if err != nil {
		return nil, err
	}
	res.ServeCheck = rec.ServeCheck
	if werr == nil && cfg != nil {
		f, werr = e.bakeWait(ctx, rec, cfg, opts.Prometheus, res)
	}
	if werr == nil {
		e.reportHealthy(rec)
	} else {
		err = e.failWait(ctx, rec, entries, res, wres, werr, f, opts)
	}
	res.DurationSeconds = storage.Stamp(clk).Sub(start).Seconds()
	return res, err
}

// await waits on objs of rec within timeout. A canary left behind can
// never finish rolling out by itself: it is the failure f at once, rather
// than a timeout on pods that never count as available. werr is the
// wait's failure; err is a failure to look for the leftovers.
func (e *Engine) await(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured,
	timeout time.Duration) (wres wait.Result, f *rollout.Diagnosis, werr, err error) {
	leftovers, err := e.liveCanaryLeftovers(ctx, objs)
	if err != nil {
		return wait.Result{}, nil, nil, fmt.Errorf("wait on release %s revision %d: %w", rec.Name, rec.Revision, err)
	}
	if len(leftovers) > 0 {
		f = canary.LeftoverFailure(rec.Name, leftovers[0])
		return wait.Result{}, f, errors.New(f.Message), nil
	}
	wres, werr = e.watch(ctx, rec, objs, timeout)
	if werr == nil {
		// Ready is not serving: the pods must answer. The report is the
		// result's; the wait writes no record.
		f, werr = e.checkServing(ctx, rec, objs, servecheck.Scope{})
	}
	return wres, f, werr, nil
}

// reportHealthy emits the done event of a healthy wait on rec; its record
// is left as it is.
func (e *Engine) reportHealthy(rec *storage.Release) {
	msg := "healthy"
	if rec.Status != storage.StatusDeployed {
		msg += fmt.Sprintf("; the record stays %s (wait changes no record)", rec.Status)
	}
	e.emit(rec.Name, rec.Revision, PhaseDone, "", string(rec.Status), msg)
}

// failed handles a failed wait on rec (werr; f, when already known): an
// interrupt, another operation started meanwhile, or the *RolloutError,
// after the automatic rollback with opts.RollbackOnFailure.
func (e *Engine) failWait(ctx context.Context, rec *storage.Release, entries []storage.Entry, res *Result,
	wres wait.Result, werr error, f *rollout.Diagnosis, opts WaitOptions) error {
	if ctx.Err() != nil {
		return fmt.Errorf("wait on release %s revision %d: interrupted: %w", rec.Name, rec.Revision, werr)
	}
	if f == nil {
		f = waitFailure(wres, werr)
	}
	res.Failure = f
	rerr := &RolloutError{Namespace: rec.Namespace, Name: rec.Name, Revision: rec.Revision, Op: OpWait, Failure: f, Err: werr}

	// Another operation may have started meanwhile: its rollout is not
	// this wait's to judge, nor to roll back.
	if changed := e.changedMeanwhile(ctx, rec, opts); changed != nil {
		return fmt.Errorf("wait on release %s revision %d: %s; %w", rec.Name, rec.Revision, f.Reason, changed)
	}
	if isAnalysisHold(werr) {
		e.emit(rec.Name, rec.Revision, PhaseDone, "", "unhealthy", f.Reason+" (not rolled back: inconclusive: hold)")
		return rerr
	}
	if !opts.RollbackOnFailure {
		e.emit(rec.Name, rec.Revision, PhaseDone, "", "unhealthy", f.Reason+" (not rolled back: rollback on failure is off)")
		return rerr
	}
	return e.rollbackFailed(ctx, rec, entries, res, f, rerr, opts)
}

// rollbackFailed restores the newest good revision after the failed wait
// on rec and returns rerr with the rollback's outcome; a rollback that
// cannot take the lock is its own error.
func (e *Engine) rollbackFailed(ctx context.Context, rec *storage.Release, entries []storage.Entry, res *Result,
	f *rollout.Diagnosis, rerr *RolloutError, opts WaitOptions) error {
	rb, err := e.rollback(ctx, rec, entries, f, opts)
	if rb != nil {
		res.Rollback = rb
	}
	var locked *storage.LockedError
	var conflict *storage.ConflictError
	switch {
	case errors.As(err, &locked) || errors.As(err, &conflict):
		return fmt.Errorf("release %s revision %d: rollout failed (%s); rollback not possible now: %w", rec.Name, rec.Revision, f.Reason, err)
	case err != nil:
		rerr.RollbackErr = err
	default:
		rerr.RolledBackTo = rb.RolledBackTo
		res.RolledBackTo = rb.RolledBackTo
		if now, gerr := e.Store.Get(ctx, rec.Name, rec.Revision); gerr == nil {
			res.Status, res.Description = now.Status, now.Description
		}
	}
	return rerr
}

// current returns the revision to wait on: the release's highest one,
// which must be neither uninstalled nor pending.
func (e *Engine) current(ctx context.Context, entries []storage.Entry, opts WaitOptions) (*storage.Release, error) {
	for _, entry := range slices.Backward(entries) {
		if !entry.Status.IsPending() {
			continue
		}
		p, err := entry.Release()
		if err != nil {
			return nil, err
		}
		locked := storage.LockedBy(p, storage.Stamp(e.clock()).Sub(p.Updated), storage.LeaseOf(p)).Refusing(OpWait)
		return nil, fmt.Errorf("wait on release %s: another operation is in progress (wait for it to finish)%s: %w", opts.Name, e.pendingCanaryNote(ctx, p), locked)
	}
	top := entries[len(entries)-1]
	if top.Status == storage.StatusUninstalled {
		return nil, &InvalidRevisionError{Namespace: e.Namespace(), Name: opts.Name, Revision: top.Revision,
			Reason: "is uninstalled: the release has no objects to wait for", Existing: storage.Revisions(entries)}
	}
	return top.Release()
}

// watch waits for objs with the engine's Waiter, forwarding its events as
// progress of rec. It notes once per Deployment when the pod template
// being rolled out is not the one rec recorded (another manager changed
// it). Nothing is written: the wait holds no lock.
func (e *Engine) watch(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured, timeout time.Duration) (wait.Result, error) {
	events := make(chan rollout.Event)
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		noted := map[string]bool{}
		for ev := range events {
			if e.Progress == nil {
				continue
			}
			e.Progress(ProgressEvent{Time: ev.Time.UTC(), Release: rec.Name, Revision: rec.Revision, Phase: PhaseWait,
				Object: ev.Object.String(), Status: string(ev.Status), Message: ev.Message, Rollout: ev.Rollout, Wait: &ev})
			if msg := drift(rec, ev); msg != "" && !noted[ev.Object.String()] {
				noted[ev.Object.String()] = true
				e.emit(rec.Name, rec.Revision, PhaseReplicaSet, ev.Object.Kind+" "+ev.Object.Namespace+"/"+ev.Object.Name, "changed", msg)
			}
		}
	}()
	res, err := e.Waiter.Wait(ctx, objs, wait.Options{Timeout: timeout, Namespace: e.Namespace(), Events: events,
		Values: ChartValuesMap(rec.Chart)})
	<-forwarded
	return res, err
}

// drift describes a Deployment event whose new ReplicaSet (a StatefulSet
// event whose update revision) is not the one rec recorded for it, or
// returns "".
func drift(rec *storage.Release, ev rollout.Event) string {
	p := ev.Rollout
	if p != nil && p.StatefulSet != "" && p.UpdateRevision != "" {
		i := slices.IndexFunc(rec.ControllerRevisions, func(cr storage.ControllerRevisionRef) bool { return cr.StatefulSet == p.StatefulSet })
		if i < 0 || rec.ControllerRevisions[i].Name == p.UpdateRevision {
			return ""
		}
		want := rec.ControllerRevisions[i]
		return fmt.Sprintf("rolling out ControllerRevision %s, not revision %d's %s (hash %s): "+
			"the pod template was changed outside vllmctl", p.UpdateRevision, rec.Revision, want.Name, want.Hash)
	}
	if p == nil || p.PodTemplateHash == "" {
		return ""
	}
	i := slices.IndexFunc(rec.ReplicaSets, func(rs storage.ReplicaSetRef) bool { return rs.Deployment == ev.Object.Name })
	if i < 0 || rec.ReplicaSets[i].PodTemplateHash == p.PodTemplateHash {
		return ""
	}
	want := rec.ReplicaSets[i]
	return fmt.Sprintf("rolling out ReplicaSet %s (pod-template-hash %s), not revision %d's %s (pod-template-hash %s): "+
		"the pod template was changed outside vllmctl", p.NewReplicaSet, p.PodTemplateHash, rec.Revision, want.Name, want.PodTemplateHash)
}

// changedMeanwhile reports another operation that started on the release
// while rec was waited on: a pending record (*LockedError) or a newer
// revision (*ConflictError). It returns nil when nothing changed or the
// records cannot be read.
func (e *Engine) changedMeanwhile(ctx context.Context, rec *storage.Release, opts WaitOptions) error {
	entries, err := e.Store.List(ctx, rec.Name)
	if err != nil {
		return nil
	}
	for _, entry := range slices.Backward(entries) {
		if entry.Status.IsPending() {
			p, err := entry.Release()
			if err != nil {
				return nil
			}
			return storage.LockedBy(p, storage.Stamp(e.clock()).Sub(p.Updated), storage.LeaseOf(p)).Refusing(OpWait)
		}
		if entry.Revision > rec.Revision {
			return &storage.ConflictError{Namespace: rec.Namespace, Name: rec.Name, Revision: rec.Revision,
				Err: fmt.Errorf("revision %d (%s) was written while waiting", entry.Revision, entry.Status)}
		}
	}
	return nil
}

// rollback restores the newest good revision at or below rec, on a
// context of its own (an interrupt stops the wait, never the rescue)
// bounded by opts.RollbackTimeout.
func (e *Engine) rollback(ctx context.Context, rec *storage.Release, entries []storage.Entry, f *rollout.Diagnosis, opts WaitOptions) (*Result, error) {
	// An analysis judged the waited revision's own manifest: restoring it
	// would change nothing, so the rollback goes below it. Other failures
	// may come from changes made outside vllmctl, which restoring the
	// waited revision undoes.
	below := rec.Revision
	if f.Verdict == rollout.VerdictAnalysisFailed || f.Verdict == rollout.VerdictAnalysisInconclusive {
		below--
	}
	target := 0
	for _, entry := range slices.Backward(entries) {
		if entry.Revision <= below && (entry.Status == storage.StatusDeployed || entry.Status == storage.StatusSuperseded) {
			target = entry.Revision
			break
		}
	}
	if target == 0 {
		return nil, &InvalidRevisionError{Namespace: e.Namespace(), Name: rec.Name,
			Reason: fmt.Sprintf("no deployed or superseded revision up to revision %d to roll back to", below), Existing: storage.Revisions(entries)}
	}
	budget := opts.RollbackTimeout
	if budget <= 0 {
		budget = DefaultTimeout
	}
	e.emit(rec.Name, rec.Revision, PhaseRollback, "", "started",
		fmt.Sprintf("rollout failed: %s; restoring revision %d", f.Reason, target))
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	rb := e
	res, err := rb.Rollback(rctx, RollbackOptions{
		Name:           rec.Name,
		ToRevision:     target,
		Timeout:        budget,
		HistoryMax:     opts.HistoryMax,
		ForceConflicts: opts.ForceConflicts,
	})
	if err != nil {
		return res, fmt.Errorf("roll back to revision %d: %w", target, err)
	}
	return res, nil
}

// pendingCanaryNote says, for a pending revision p, whether its Deployments
// hold a canary ("" when not, or when that cannot be read): a deploy that
// died during its canary leaves both its lock and its canary behind.
func (e *Engine) pendingCanaryNote(ctx context.Context, p *storage.Release) string {
	objs, err := cluster.ParseManifest(p.Manifest)
	if err != nil {
		return ""
	}
	leftovers, err := e.liveCanaryLeftovers(ctx, objs)
	if err != nil || len(leftovers) == 0 {
		return ""
	}
	return fmt.Sprintf("; %s. If that deploy died, a deploy takes its lock over once the lease has run out (or at once with --force-unlock) and holds the canary again; vllmctl rollback %s restores the deployed revision",
		leftovers[0], p.Name)
}
