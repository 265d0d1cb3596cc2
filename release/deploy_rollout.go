package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/groups"
	"github.com/vllmctl/vllmctl/release/servecheck"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// createNamespace creates the release namespace when asked to: the
// records live there, so it must exist before the lock can be taken.
func (e *Engine) createNamespace(ctx context.Context, opts DeployOptions) error {
	if !opts.CreateNamespace {
		return nil
	}
	created, err := e.Objects.Apply(ctx, nil, cluster.ApplyOptions{Namespace: e.Namespace(), CreateNamespace: true})
	for _, a := range created {
		e.emit(opts.Name, 0, PhaseApply, a.Object.String(), string(a.Action), "")
	}
	if err != nil {
		return fmt.Errorf("release %s: create namespace %s: %w", opts.Name, e.Namespace(), err)
	}
	return nil
}

// lock takes the release's lock: the next revision, pending, with the
// chart, the user values and the manifest.
func (e *Engine) lock(ctx context.Context, p *deployPlan) (*storage.Release, error) {
	opts := p.opts
	rec, err := storage.Acquire(ctx, e.Store, opts.Name, storage.OpDeploy, e.lockTerms(storage.LockOptions{
		Holder:  e.holder(),
		Timeout: opts.Timeout,
		Force:   opts.ForceUnlock,
		Clock:   e.clock(),
		Record: &storage.Release{Chart: p.chart, Values: p.values, ComputedValues: p.computed, Notes: p.notes, Manifest: p.manifest,
			Hooks: p.hooks, CRDManifest: e.crdRecord(p), PostRenderer: p.opts.Render.Options.PostRenderer},
		Seen: &p.seen,
	}))
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("release %s: does namespace %s exist? (--create-namespace creates it): %w", opts.Name, e.Namespace(), err)
	}
	if err != nil {
		return nil, err
	}
	e.emit(rec.Name, rec.Revision, PhaseLock, "", string(rec.Status), rec.Description+", held by "+rec.Holder)
	return rec, nil
}

// upToDate answers a deploy that would change nothing while the deployed
// revision is healthy: no lock, no record ("up to date"). The answer holds
// only if the records did not change while it was computed: they are read
// again, and any change sends the deploy to the lock, where the decision
// is taken again (recheck).
func (e *Engine) upToDate(ctx context.Context, p *deployPlan, entries []storage.Entry, start time.Time) (*Result, error) {
	if !p.opts.reconciles() || p.diff == nil || !p.diff.Empty() {
		return nil, nil
	}
	current, err := e.healthyDeployed(ctx, entries)
	if err != nil || current == nil {
		return nil, err
	}
	again, err := e.Store.List(ctx, p.opts.Name)
	if err != nil {
		return nil, fmt.Errorf("release %s: read its records: %w", p.opts.Name, err)
	}
	if !sameEntries(again, entries) {
		return nil, nil
	}
	return e.upToDateResult(current, start), nil
}

// upToDateResult reports a deploy that changes nothing: a done event and
// the result document of the healthy deployed revision current.
func (e *Engine) upToDateResult(current *StatusReport, start time.Time) *Result {
	e.emit(current.Release, current.Revision, PhaseDone, "", "up to date",
		fmt.Sprintf("release %s is up to date (revision %d): nothing to change, no new revision", current.Release, current.Revision))
	return upToDateResult(current, start, e.clock())
}

// recheck takes the decisions made from the records before the lock again
// under it. When another operation wrote a record meanwhile, the objects
// are rendered for the revision the lock holds and what the deploy changes
// is computed again; when nothing would change then and the deployed
// revision is healthy, the pending record is removed and res is the
// up-to-date result: done is true.
func (e *Engine) recheck(ctx context.Context, p *deployPlan, rec *storage.Release, before []storage.Entry, res *Result, start time.Time) (bool, error) {
	entries := p.seen
	if entries == nil {
		var err error
		if entries, err = e.Store.List(ctx, rec.Name); err != nil {
			return true, e.unlock(ctx, rec, fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err))
		}
	}
	entries = without(entries, rec.Revision)
	p.underLock = entries
	if sameEntries(entries, before) {
		return false, nil // the decisions taken before the lock stand
	}
	if err := p.readDeployed(entries); err != nil {
		return true, e.unlock(ctx, rec, fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err))
	}
	if err := e.replan(ctx, p, rec, entries); err != nil {
		return true, e.unlock(ctx, rec, fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err))
	}
	if !p.opts.reconciles() || p.diff == nil || !p.diff.Empty() {
		return false, nil
	}
	current, err := e.healthyDeployed(ctx, entries)
	if err != nil {
		return true, e.unlock(ctx, rec, err)
	}
	if current == nil {
		return false, nil
	}
	if err := e.unlock(ctx, rec, nil); err != nil {
		return true, err
	}
	*res = *e.upToDateResult(current, start)
	return true, nil
}

// replan renders the objects again for the revision the lock holds (when
// it is not the one they were rendered for) and computes again what the
// deploy changes.
func (e *Engine) replan(ctx context.Context, p *deployPlan, rec *storage.Release, entries []storage.Entry) error {
	plan := storage.Plan{Revision: rec.Revision, Upgrade: rec.Status == storage.StatusPendingUpgrade}
	if ro := p.opts.Render.Options; plan != p.plan || ro.ReuseValues || ro.ResetThenReuseValues {
		// With --reuse-values the values depend on the current revision,
		// which another operation may have changed.
		if err := p.build(ctx, plan, entries); err != nil {
			return err
		}
		e.Redactor.AddObjects(p.objs...)
		rec.Manifest, rec.Hooks = p.manifest, p.hooks
		rec.Values, rec.ComputedValues, rec.Notes = p.values, p.computed, p.notes
		if err := e.Store.Update(ctx, rec); err != nil {
			return fmt.Errorf("record the manifest: %w", err)
		}
	}
	if !p.opts.reconciles() {
		return nil
	}
	rep, err := e.withCRDs(p.crds).diff(ctx, rec.Name, entries, p.objs, p.applyOptions(rec.Name))
	if err != nil {
		p.diff = nil // a refusal: the apply reports it
		return nil
	}
	p.diff = rep
	return nil
}

// unlock removes the pending record of a deploy that applied nothing
// (it changed nothing, or failed before the apply) and returns cause.
func (e *Engine) unlock(ctx context.Context, rec *storage.Release, cause error) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storage.FinishTimeout)
	defer cancel()
	if err := e.Store.Delete(fctx, rec.Name, rec.Revision); err != nil {
		return errors.Join(cause, fmt.Errorf("release %s: remove pending revision %d: %w", rec.Name, rec.Revision, err))
	}
	return cause
}

// rollout applies the objects under the lock, records the ReplicaSets,
// waits and finishes the record.
func (e *Engine) rollout(ctx context.Context, p *deployPlan, rec *storage.Release, res *Result, start time.Time) (*Result, error) {
	opts, objs := p.opts, p.objs
	install := rec.Status == storage.StatusPendingInstall

	previous, err := e.previousObjects(ctx, p, rec)
	if err != nil {
		return e.finishFailed(ctx, rec, res, start, opts.verb(install)+" failed: "+err.Error(),
			&rollout.Diagnosis{Reason: "Internal", Message: err.Error()}, err)
	}

	applyOpts := p.applyOptions(rec.Name)
	applyOpts.Namespace, applyOpts.Known = e.Namespace(), p.known
	waves := p.groupWaves(e.Namespace(), install)
	if groups.Has(objs) {
		// Surge groups an interrupted deploy left, then this deploy's own
		// once it ended (after a rollback: they serve meanwhile).
		e.warnIf(rec, e.removeSurge(ctx, rec))
		if len(p.surge) > 0 && len(waves.Wave1) > 0 {
			defer func() { e.warnIf(rec, e.removeSurge(ctx, rec)) }()
		}
	}
	cd, err := e.planCanary(p, rec, res, install, waves)
	if err != nil {
		err = fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err)
		return e.finishFailed(ctx, rec, res, start, opts.verb(install)+" failed: "+err.Error(), &rollout.Diagnosis{Reason: "Internal", Message: err.Error()}, err)
	}
	if err := e.createCRDs(ctx, p.crds, objs, rec, res, start.Add(opts.Timeout)); err != nil {
		return e.crdsFailed(ctx, p, rec, res, start, install, err)
	}
	if r, err := e.deployHooks(ctx, rec, res, opts, install, charts.HookPreInstall, charts.HookPreUpgrade); err != nil {
		return r, err
	}
	if len(p.surge) > 0 && len(waves.Wave1) > 0 {
		wres, f, err := e.addSurge(ctx, rec, res, p.surge, applyOpts, opts.Timeout)
		if lost := lockLost(err); lost != nil {
			return res, lost
		}
		if err != nil {
			return e.waitFailed(ctx, rec, res, start, opts, wres, err, f, install)
		}
	}
	if len(waves.Later) > 0 {
		e.emit(rec.Name, rec.Revision, PhaseApply, "", "wave",
			fmt.Sprintf("%d group(s) change, %d per wave: wave 1 of %d: group(s) %s", waves.Groups, waves.Size, len(waves.Later)+1, groups.Names(waves.Wave1)))
	}
	applied, err := e.applyObjects(ctx, rec, res, waves.WithoutLater(cd.applied(p.objs)), applyOpts)
	if err != nil {
		return e.applyFailed(ctx, rec, res, start, opts, applied, err, install)
	}

	wres, f, werr := e.awaitRollout(ctx, p, rec, res, cd, waves, applyOpts, applied, start, &opts)
	if werr == nil && f == nil && p.analysis != nil && p.opts.Canary == nil {
		// No canary: the analysis bakes the new pods after the rollout.
		if len(rec.ReplicaSets) == 0 && len(rec.ControllerRevisions) == 0 {
			e.emit(rec.Name, rec.Revision, PhaseAnalysis, "", "skipped", "no pods of a Deployment or an engine group to analyse")
		} else {
			f, werr = e.bakeUnderLock(ctx, rec, p.analysis, p.opts.Prometheus, "deploy", "the analysis after the rollout")
			opts.Note = joinNotes(opts.Note, analysis.Summary(rec.Analysis))
		}
	}
	if lost := lockLost(werr); lost != nil {
		return res, lost
	}
	if werr != nil {
		var hold *analysis.HoldError
		if errors.As(werr, &hold) {
			// inconclusive: hold: no rollback, the canary stays held.
			opts.RollbackOnFailure = false
		}
		return e.waitFailed(ctx, rec, res, start, opts, wres, werr, f, install)
	}
	if r, err := e.deployHooks(ctx, rec, res, opts, install, charts.HookPostInstall, charts.HookPostUpgrade); err != nil {
		return r, err
	}
	return e.finishDeployed(ctx, p, rec, res, start, opts, previous, install)
}

// deployHooks runs the deploy's hooks of one side of the apply (onInstall
// on an install, onUpgrade on an upgrade), reporting them in res. A hook
// that fails fails the rollout as a failed wait does (with rollback on
// failure the previous good revision is restored: exit code 3); its
// result and error are then returned.
func (e *Engine) deployHooks(ctx context.Context, rec *storage.Release, res *Result, opts DeployOptions, install bool,
	onInstall, onUpgrade charts.HookEvent) (*Result, error) {
	event := onUpgrade
	if install {
		event = onInstall
	}
	runs, err := e.runHooks(ctx, rec, event, opts.Timeout)
	res.Hooks = append(res.Hooks, runs...)
	if err == nil {
		return nil, nil
	}
	if lost := lockLost(err); lost != nil {
		return res, lost
	}
	if ctx.Err() != nil && (event == charts.HookPreInstall || event == charts.HookPreUpgrade) {
		// Interrupted before anything of the release was applied:
		// nothing to roll back. The revision is finished as
		// interrupted (the lock released) and the exit code is 130.
		f := &rollout.Diagnosis{Reason: "Interrupted", Object: hookFailure(err).Object,
			Message: "the deploy was interrupted during its " + string(event) + " hooks, before anything of the release was applied"}
		ierr := &InterruptedError{Name: rec.Name, Revision: rec.Revision, During: string(event) + " hooks", Err: err}
		return e.finishFailed(ctx, rec, res, storage.Stamp(e.clock()), opts.withNote(opts.verb(install)+" interrupted"), f, ierr)
	}
	return e.rolloutFailed(ctx, rec, res, storage.Stamp(e.clock()), opts, wait.Result{}, err, hookFailure(err), install)
}

// InterruptedError is an operation interrupted (SIGINT, SIGTERM, SIGHUP)
// before anything of the release was applied: exit code 130.
type InterruptedError struct {
	Name     string
	Revision int
	// During names the step the interrupt cut short (e.g.
	// "pre-upgrade hooks").
	During string
	Err    error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("release %s revision %d: interrupted during its %s, before anything of the release was applied: %v",
		e.Name, e.Revision, e.During, e.Err)
}

// Unwrap returns the underlying error.
func (e *InterruptedError) Unwrap() error { return e.Err }

// ExitCode is 130.
func (e *InterruptedError) ExitCode() int { return exitcode.Interrupted }

// previousObjects returns the objects of the release's live revisions
// before rec, among the records known under the lock: what the deploy
// prunes unless rec has them too.
func (e *Engine) previousObjects(ctx context.Context, p *deployPlan, rec *storage.Release) ([]*unstructured.Unstructured, error) {
	live, err := e.liveRevisionsAmong(ctx, p.underLock, rec.Name, rec.Revision)
	var previous []*unstructured.Unstructured
	if err == nil {
		previous, err = manifestObjects(live)
	}
	if err != nil {
		return nil, fmt.Errorf("release %s: read the previous revisions: %w", rec.Name, err)
	}
	return previous, nil
}

// applyObjects applies objs under the lock, reporting each in res and the
// progress events, and notes the canaries this deploy replaced.
func (e *Engine) applyObjects(ctx context.Context, rec *storage.Release, res *Result, objs []*unstructured.Unstructured,
	applyOpts cluster.ApplyOptions) ([]cluster.ApplyResult, error) {
	applied, err := e.Objects.Apply(ctx, objs, applyOpts)
	res.Applied = applied
	for _, a := range applied {
		e.emit(rec.Name, rec.Revision, PhaseApply, a.Object.String(), string(a.Action), "")
	}
	e.emitCanaryLeftovers(rec, beforeObjects(applied), "this deploy replaced that strategy with its own")
	if err != nil {
		return applied, fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err)
	}
	return applied, nil
}

// applyFailed finishes a deploy whose apply the cluster refused. Refused
// midway on an upgrade with RollbackOnFailure, what was applied before the
// refusal is restored to the previous good revision (exit code 3).
func (e *Engine) applyFailed(ctx context.Context, rec *storage.Release, res *Result, start time.Time, opts DeployOptions,
	applied []cluster.ApplyResult, err error, install bool) (*Result, error) {
	f := applyFailure(err)
	if opts.RollbackOnFailure && !install && changedAny(applied) {
		return e.rolloutFailed(ctx, rec, res, start, opts, wait.Result{}, err, f, install)
	}
	return e.finishFailed(ctx, rec, res, start, opts.verb(install)+" failed: "+f.Reason, f, err)
}

// awaitRollout discovers the ReplicaSets, then runs the canary when there
// is one, then waits, within the timeout (extended by the time the canary
// was held); the canary's summary is added to opts.Note. It returns the
// wait's result and failure (werr; f, when already known). A lock taken
// over during the discovery is werr as it is.
func (e *Engine) awaitRollout(ctx context.Context, p *deployPlan, rec *storage.Release, res *Result, cd *canaryDeploy, waves groups.Plan, applyOpts cluster.ApplyOptions,
	applied []cluster.ApplyResult, start time.Time, opts *DeployOptions) (wres wait.Result, f *rollout.Diagnosis, werr error) {
	objs, clk := waves.First, e.clock()
	deadline := start.Add(opts.Timeout)
	remaining := func() time.Duration { return max(deadline.Sub(storage.Stamp(clk)), time.Millisecond) }
	rctx, cancel := context.WithTimeout(ctx, remaining())
	err := e.discoverReplicaSets(rctx, rec, objs, applied)
	cancel()
	switch {
	case err != nil:
		if lost := lockLost(err); lost != nil {
			return wait.Result{}, nil, lost
		}
		werr = fmt.Errorf("release %s revision %d: find ReplicaSets: %w", rec.Name, rec.Revision, err)
		f = replicaSetFailure(werr)
	case cd != nil:
		wres, f, werr = e.runCanary(ctx, p, rec, cd, applyOpts, remaining)
		deadline = deadline.Add(cd.run.Held)
		opts.Note = joinNotes(opts.Note, canary.Summary(rec.Canary))
		if rec.Analysis != nil {
			opts.Note = joinNotes(opts.Note, analysis.Summary(rec.Analysis))
		}
		if werr == nil {
			wres, werr = e.waitObjects(ctx, rec, objs, remaining())
			cd.run.Finish()
		}
	default:
		wres, werr = e.waitObjects(ctx, rec, objs, remaining())
	}
	if werr == nil && f == nil && len(waves.Later) > 0 {
		wres, f, werr = e.rollWaves(ctx, rec, res, waves, applyOpts, opts.Timeout)
	}
	if cd == nil && rec.Canary != nil {
		opts.Note = joinNotes(opts.Note, canary.Summary(rec.Canary))
	}
	if werr == nil && f == nil {
		// Ready is not serving: every new pod must answer.
		f, werr = e.checkServing(ctx, rec, p.objs, servecheck.Scope{})
	}
	return wres, f, werr
}

// waitFailed finishes a rollout whose ReplicaSet discovery, canary or wait
// failed (werr; f, when already known).
func (e *Engine) waitFailed(ctx context.Context, rec *storage.Release, res *Result, start time.Time, opts DeployOptions,
	wres wait.Result, werr error, f *rollout.Diagnosis, install bool) (*Result, error) {
	if ctx.Err() != nil {
		// Interrupted mid-rollout: the new revision never became
		// healthy, so it is rolled back like a failed one when that is
		// enabled (the rescue runs on its own context); otherwise the
		// record is finished as interrupted.
		f := &rollout.Diagnosis{Reason: "Interrupted", Message: "the deploy was interrupted before the rollout completed: " + werr.Error()}
		if opts.RollbackOnFailure {
			return e.rolloutFailed(ctx, rec, res, start, opts, wres, werr, f, install)
		}
		return e.finishFailed(ctx, rec, res, start, opts.withNote(opts.verb(install)+" interrupted"), f, werr)
	}
	return e.rolloutFailed(ctx, rec, res, start, opts, wres, werr, f, install)
}

// finishDeployed finishes a healthy rollout: rec is marked deployed, then
// what the previous revisions had and this one has not is pruned, then
// the records beyond opts.HistoryMax are deleted.
func (e *Engine) finishDeployed(ctx context.Context, p *deployPlan, rec *storage.Release, res *Result, start time.Time, opts DeployOptions,
	previous []*unstructured.Unstructured, install bool) (*Result, error) {
	clk := e.clock()
	desc := "Upgrade complete"
	if install {
		desc = "Install complete"
	}
	desc = opts.withNote(desc)
	if err := e.markDeployed(ctx, p, rec, desc); err != nil {
		res.sync(rec, start, clk)
		return res, fmt.Errorf("mark release %s revision %d deployed: %w", rec.Name, rec.Revision, err)
	}
	e.emit(rec.Name, rec.Revision, PhaseDone, "", string(rec.Status), desc)
	var errs []error
	pruned, err := e.pruneObjects(ctx, rec, previous, p.objs)
	res.Pruned = pruned
	errs = append(errs, err)
	errs = append(errs, e.PruneHistoryAmong(ctx, rec, opts.HistoryMax, p.afterDeployed(rec)))
	res.sync(rec, start, clk)
	return res, errors.Join(errs...)
}

// changedAny reports whether an apply created or changed any object.
func changedAny(applied []cluster.ApplyResult) bool {
	for _, a := range applied {
		if a.Action == cluster.ActionCreated || a.Action == cluster.ActionConfigured {
			return true
		}
	}
	return false
}

// lockLost returns err when it says the lock was taken over.
func lockLost(err error) error {
	var conflict *storage.ConflictError
	if errors.As(err, &conflict) {
		return err
	}
	return nil
}

// finishFailed marks rec failed and returns the result with err.
func (e *Engine) finishFailed(ctx context.Context, rec *storage.Release, res *Result, start time.Time, desc string, f *rollout.Diagnosis, err error) (*Result, error) {
	if merr := e.markFailed(ctx, rec, desc, f); merr != nil {
		err = errors.Join(err, merr)
	}
	res.sync(rec, start, e.clock())
	return res, err
}

// rolloutFailed handles a failed ReplicaSet discovery or wait: diagnosis
// (f, when already known), the automatic rollback while the lock is held,
// then the failed record.
func (e *Engine) rolloutFailed(ctx context.Context, rec *storage.Release, res *Result, start time.Time, opts DeployOptions,
	wres wait.Result, werr error, f *rollout.Diagnosis, install bool) (*Result, error) {
	if f == nil {
		f = waitFailure(wres, werr)
	}
	rerr := &RolloutError{Namespace: rec.Namespace, Name: rec.Name, Revision: rec.Revision, Op: storage.OpDeploy, Failure: f, Err: werr, Install: install}
	desc := fmt.Sprintf("%s failed: %s", opts.verb(install), f.Reason)
	if f.Object != "" {
		desc += " (" + f.Object + ")"
	}
	desc = opts.withNote(desc)
	if opts.RollbackOnFailure {
		e.emit(rec.Name, rec.Revision, PhaseRollback, "", "started", "rollout failed: "+f.Reason)
		rb, err := e.autoRollback(ctx, rec, opts)
		res.Rollback = rb
		switch {
		case err != nil:
			rerr.RollbackErr = err
			desc += "; automatic rollback failed"
		case rb != nil && rb.RolledBackTo > 0:
			rerr.RolledBackTo = rb.RolledBackTo
			res.RolledBackTo = rb.RolledBackTo
			desc += fmt.Sprintf("; rolled back to %d", rb.RolledBackTo)
		}
	}
	return e.finishFailed(ctx, rec, res, start, desc, f, rerr)
}

// autoRollback restores the newest good revision while the failed
// revision's lock is still held, on a context of its own (an interrupt of
// the deploy stops the wait, never the rescue) bounded by its own budget.
func (e *Engine) autoRollback(ctx context.Context, failed *storage.Release, opts DeployOptions) (*Result, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.RollbackTimeout)
	defer cancel()
	return e.RollbackHeld(rctx, failed, RollbackOptions{
		Timeout:        opts.RollbackTimeout,
		HistoryMax:     opts.HistoryMax,
		ForceConflicts: opts.ForceConflicts,
	})
}

// dryRun applies every object with a server-side dry run; nothing is
// recorded.
func (e *Engine) dryRun(ctx context.Context, p *deployPlan, start time.Time) (*Result, error) {
	opts := p.opts
	status := storage.StatusPendingInstall
	if p.plan.Upgrade {
		status = storage.StatusPendingUpgrade
	}
	res := newResult(&storage.Release{Name: opts.Name, Namespace: e.Namespace(), Revision: p.plan.Revision, Status: status, Chart: p.chart})
	res.DryRun = true
	res.Description = "Dry run complete"
	applyOpts := p.applyOptions(opts.Name)
	applyOpts.Namespace, applyOpts.DryRun = e.Namespace(), true
	applied, err := e.withCRDs(p.crds).Objects.Apply(ctx, p.objs, applyOpts)
	res.Applied = applied
	for _, a := range applied {
		msg := "dry run"
		if a.Unvalidated {
			msg = "dry run, not validated: its namespace does not exist yet"
		}
		e.emit(opts.Name, res.Revision, PhaseApply, a.Object.String(), string(a.Action), msg)
	}
	res.DurationSeconds = storage.Stamp(e.clock()).Sub(start).Seconds()
	if err != nil {
		// As the deploy would be refused: no result, the dry run's code
		// (2 for an invalid object).
		return nil, &DryRunError{Name: opts.Name, Err: err}
	}
	// Whose objects they are, as the deploy would check it.
	var live []*unstructured.Unstructured
	for _, a := range applied {
		if a.Before != nil {
			live = append(live, a.Before)
		}
	}
	if foreign := foreignObjects(opts.Name, e.Namespace(), live); len(foreign) > 0 {
		if !opts.TakeOwnership {
			return nil, &OwnershipError{Name: opts.Name, Objects: foreign}
		}
		res.Description = joinNotes(res.Description, ownershipNote(foreign))
	}
	return res, nil
}

// markDeployed marks rec deployed and supersedes the deployed revision,
// among the records known under the lock when they are.
func (e *Engine) markDeployed(ctx context.Context, p *deployPlan, rec *storage.Release, desc string) error {
	return storage.MarkDeployedAmong(ctx, e.Store, rec, e.clock(), desc, p.underLock)
}

// afterDeployed returns the release's records once rec is deployed, as
// known under the lock (nil: unknown): the deployed one superseded, rec
// last.
func (p *deployPlan) afterDeployed(rec *storage.Release) []storage.Entry {
	if p.underLock == nil {
		return nil
	}
	out := make([]storage.Entry, 0, len(p.underLock)+1)
	for _, e := range p.underLock {
		if e.Status == storage.StatusDeployed {
			e.Status = storage.StatusSuperseded
		}
		out = append(out, e)
	}
	return append(out, storage.Entry{Namespace: rec.Namespace, Name: rec.Name, Revision: rec.Revision, Status: rec.Status})
}
