package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/servecheck"
	"github.com/vllmctl/vllmctl/release/storage"
)

// RollbackOptions are the inputs of a rollback.
type RollbackOptions struct {
	// Name is the release name.
	Name string
	// ToRevision is the revision to restore; 0 restores the newest
	// deployed or superseded revision before the current (highest) one.
	ToRevision int
	// Timeout bounds the rollout and is the age after which another
	// operation's pending record counts as stale. 0 (no --timeout given):
	// it follows the restored objects' start-up budget (StartupTimeout:
	// DefaultTimeout at least).
	Timeout time.Duration
	// HistoryMax is how many records to keep (0: unlimited).
	HistoryMax int
	// ForceUnlock takes over another operation's pending record.
	ForceUnlock bool
	// ForceConflicts takes over fields other field managers own.
	ForceConflicts bool
	// Analysis, when set (rollback --analysis FILE, validated without a
	// baseline), bakes the restored pods once they serve, as a wait does:
	// a refusal fails the rollback revision. Prometheus is its
	// prometheus provider's endpoint.
	Analysis   *analysis.Config
	Prometheus *analysis.PrometheusEndpoint
}

// Rollback restores revision opts.ToRevision (see RollbackOptions) as the
// release's next revision: it takes the lock (pending-rollback,
// "Rollback to N"), re-applies revision N's stored manifest (no chart is
// needed), prunes the objects live now that N does not have, discovers the
// ReplicaSets and verifies that every Deployment serves the pod template
// (pod-template-hash) revision N ran, waits, and marks the new revision
// deployed with the description "Rollback to N".
//
// An unknown N is a *NotFoundError listing the revisions (exit code 2); a
// revision that cannot be restored, or no revision to restore, is an
// *InvalidRevisionError (exit code 2). Nothing is changed then. A failed
// rollout is a *RolloutError (exit code 4).
func (e *Engine) Rollback(ctx context.Context, opts RollbackOptions) (*Result, error) {
	if err := e.check(needStore, needObjects, needWaiter, needClient); err != nil {
		return nil, err
	}
	if err := storage.ValidateName(opts.Name); err != nil {
		return nil, err
	}
	if opts.ToRevision < 0 {
		return nil, &InvalidRevisionError{Namespace: e.Namespace(), Name: opts.Name, Revision: opts.ToRevision, Reason: "must be 1 or more (0: the previous good revision)"}
	}
	entries, err := storage.HistoryEntries(ctx, e.Store, opts.Name)
	if err != nil {
		return nil, err
	}
	if err := storage.CheckNotHandedOver(entries, e.Namespace(), opts.Name); err != nil {
		return nil, err
	}
	if opts.ToRevision == 0 {
		// Which revision is the previous good one cannot be known with an
		// unreadable record; an explicit revision that is intact can be
		// restored.
		if err := storage.CheckReadable(entries); err != nil {
			return nil, err
		}
	}
	target, err := e.target(ctx, entries, opts, entries[len(entries)-1].Revision)
	if err != nil {
		return nil, err
	}
	return e.run(ctx, target, nil, opts)
}

// RollbackHeld is Rollback for an operation that holds the release's lock
// with the pending record held, typically the failed deploy it rolls back:
// the new pending-rollback revision is acquired with LockOptions.Held, so
// the lock is never released in between. opts.Name is taken from held;
// with ToRevision 0 the target is the newest deployed or superseded
// revision before held. held itself is left pending: finishing it is the
// caller's job.
func (e *Engine) RollbackHeld(ctx context.Context, held *storage.Release, opts RollbackOptions) (*Result, error) {
	if err := e.check(needStore, needObjects, needWaiter, needClient); err != nil {
		return nil, err
	}
	if held == nil {
		return nil, errors.New("rollback: no held record")
	}
	opts.Name = held.Name
	entries, err := storage.HistoryEntries(ctx, e.Store, held.Name)
	if err != nil {
		return nil, err
	}
	if opts.ToRevision == held.Revision {
		return nil, &InvalidRevisionError{Namespace: e.Namespace(), Name: held.Name, Revision: held.Revision,
			Reason: "is the revision being rolled back", Existing: storage.Revisions(entries)}
	}
	target, err := e.target(ctx, entries, opts, held.Revision)
	if err != nil {
		return nil, err
	}
	return e.run(ctx, target, held, opts)
}

// target picks the revision to restore: opts.ToRevision, or the newest
// deployed or superseded revision below current.
func (e *Engine) target(ctx context.Context, entries []storage.Entry, opts RollbackOptions, current int) (*storage.Release, error) {
	existing := storage.Revisions(entries)
	invalid := func(rev int, reason string) error {
		return &InvalidRevisionError{Namespace: e.Namespace(), Name: opts.Name, Revision: rev, Reason: reason, Existing: existing}
	}
	var pick *storage.Entry
	if opts.ToRevision > 0 {
		entry, ok := storage.RevisionAmong(entries, opts.ToRevision)
		if !ok {
			return nil, &storage.NotFoundError{Namespace: e.Namespace(), Name: opts.Name, Revision: opts.ToRevision, Existing: existing}
		}
		pick = &entry
		if pick.Status.IsPending() {
			return nil, invalid(pick.Revision, fmt.Sprintf("is %s: its operation has not finished", pick.Status))
		}
	} else {
		for i := len(entries) - 1; i >= 0; i-- {
			entry := entries[i]
			if entry.Revision < current && (entry.Status == storage.StatusDeployed || entry.Status == storage.StatusSuperseded) {
				pick = &entries[i]
				break
			}
		}
		if pick == nil {
			return nil, invalid(0, fmt.Sprintf("no deployed or superseded revision before revision %d to roll back to", current))
		}
	}
	rel, err := pick.Release()
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(rel.Manifest) == "" {
		return nil, invalid(rel.Revision, "has no manifest to restore")
	}
	return rel, nil
}

// run restores target as the next revision; held, when set, is the
// pending record the caller holds.
func (e *Engine) run(ctx context.Context, target *storage.Release, held *storage.Release, opts RollbackOptions) (*Result, error) {
	clk := e.clock()
	start := storage.Stamp(clk)
	n := target.Revision
	objs, err := cluster.ParseManifest(target.Manifest)
	if err != nil {
		return nil, &InvalidManifestError{Name: target.Name, Err: fmt.Errorf("revision %d: %w", n, err)}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = e.followStartup(target.Name, 0, PhaseRollback, objs)
	}
	if _, err := e.serveCheckOf(target); err != nil {
		return nil, err
	}
	crds, err := e.planRollbackCRDs(ctx, target, objs) // crds_rollback.go
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("Rollback to %d", n)

	rec, err := e.lockRollback(ctx, target, held, opts, desc)
	if err != nil {
		return nil, err
	}
	res := newResult(rec)
	res.RolledBackTo = n
	e.emit(rec.Name, rec.Revision, PhaseLock, "", string(rec.Status), rec.Description+", held by "+rec.Holder)

	previous, err := e.objectsBeforeRollback(ctx, rec)
	if err != nil {
		return e.failRollback(ctx, rec, res, start, desc, &rollout.Diagnosis{Reason: "Internal", Message: err.Error()}, err)
	}

	e.Redactor.AddObjects(objs...)
	e.Redactor.AddObjects(previous...)
	if err := e.createCRDs(ctx, crds, objs, rec, res, start.Add(opts.Timeout)); err != nil {
		return e.restoreCRDsFailed(ctx, rec, res, start, desc, err)
	}
	if runs, err := e.runHooks(ctx, rec, charts.HookPreRollback, opts.Timeout); err != nil || len(runs) > 0 {
		res.Hooks = append(res.Hooks, runs...)
		if err != nil {
			return e.hookFailed(ctx, rec, res, start, desc, err)
		}
	}
	applied, err := e.applyRestored(ctx, rec, res, objs, desc, opts.ForceConflicts)
	if err != nil {
		res.sync(rec, start, clk)
		return res, err // the cluster refused: keep the apply error's exit code
	}
	// Restore revision N's set of objects before waiting: what the failed
	// or later revision added goes now.
	pruned, err := e.pruneObjects(ctx, rec, previous, objs)
	res.Pruned = pruned
	if err != nil {
		return e.failRollback(ctx, rec, res, start, desc, &rollout.Diagnosis{Reason: "PruneFailed", Message: err.Error()}, err)
	}

	deadline := start.Add(opts.Timeout)
	remaining := func() time.Duration { return max(deadline.Sub(storage.Stamp(clk)), time.Millisecond) }
	if f, err := e.checkRestored(ctx, rec, target, objs, applied, remaining()); err != nil {
		if lost := lockLost(err); lost != nil {
			return res, lost
		}
		return e.failRollback(ctx, rec, res, start, desc, f, err)
	}

	wres, werr := e.waitObjects(ctx, rec, objs, remaining())
	if lost := lockLost(werr); lost != nil {
		return res, lost
	}
	if werr != nil {
		if ctx.Err() != nil {
			return e.failRollback(ctx, rec, res, start, desc, &rollout.Diagnosis{Reason: "Interrupted", Message: werr.Error()}, werr)
		}
		return e.failRollback(ctx, rec, res, start, desc, waitFailure(wres, werr), werr)
	}
	if f, err := e.checkServing(ctx, rec, objs, servecheck.Scope{}); err != nil {
		if lost := lockLost(err); lost != nil {
			return res, lost
		}
		return e.failRollback(ctx, rec, res, start, desc, f, err)
	}
	if opts.Analysis != nil {
		f, err := e.bakeUnderLock(ctx, rec, opts.Analysis, opts.Prometheus, "rollback", "the analysis after the rollback")
		res.Analysis = rec.Analysis
		if err != nil {
			if lost := lockLost(err); lost != nil {
				return res, lost
			}
			if f == nil { // the analysis could not end
				f = &rollout.Diagnosis{Reason: "AnalysisError", Message: err.Error()}
				if ctx.Err() != nil {
					f.Reason = "Interrupted"
				}
			}
			return e.failRollback(ctx, rec, res, start, desc, f, err)
		}
	}
	runs, err := e.runHooks(ctx, rec, charts.HookPostRollback, opts.Timeout)
	res.Hooks = append(res.Hooks, runs...)
	if err != nil {
		return e.hookFailed(ctx, rec, res, start, desc, err)
	}
	return e.finish(ctx, rec, res, start, desc, opts.HistoryMax)
}

// hookFailed finishes a rollback one of whose hooks failed.
func (e *Engine) hookFailed(ctx context.Context, rec *storage.Release, res *Result, start time.Time, desc string, err error) (*Result, error) {
	if lost := lockLost(err); lost != nil {
		return res, lost
	}
	return e.failRollback(ctx, rec, res, start, desc, hookFailure(err), err)
}

// lock takes the release's lock for the rollback to target: the next
// revision, pending-rollback, with target's chart, values and manifests
// (held, when set, is the pending record the caller already holds).
func (e *Engine) lockRollback(ctx context.Context, target, held *storage.Release, opts RollbackOptions, desc string) (*storage.Release, error) {
	return storage.Acquire(ctx, e.Store, target.Name, storage.OpRollback, e.lockTerms(storage.LockOptions{
		Holder:      e.holder(),
		Description: desc + " in progress",
		Timeout:     opts.Timeout,
		Force:       opts.ForceUnlock,
		Clock:       e.clock(),
		Held:        held,
		Record: &storage.Release{Chart: target.Chart, Values: target.Values, ComputedValues: target.ComputedValues, Notes: target.Notes,
			Manifest: target.Manifest, Hooks: target.Hooks, CRDManifest: target.CRDManifest, RollbackOf: target.Revision,
			PostRenderer: target.PostRenderer},
	}))
}

// failed finishes a rollback that failed under the lock with the
// diagnosis f: the revision rec is marked failed and a *RolloutError
// returned with the result.
func (e *Engine) failRollback(ctx context.Context, rec *storage.Release, res *Result, start time.Time, desc string, f *rollout.Diagnosis, err error) (*Result, error) {
	rerr := &RolloutError{Namespace: rec.Namespace, Name: rec.Name, Revision: rec.Revision, Op: storage.OpRollback, Failure: f, Err: err}
	d := fmt.Sprintf("%s failed: %s", desc, f.Reason)
	if f.Object != "" {
		d += " (" + f.Object + ")"
	}
	var out error = rerr
	if merr := e.markFailed(ctx, rec, d, f); merr != nil {
		out = errors.Join(rerr, merr)
	}
	res.sync(rec, start, e.clock())
	return res, out
}

// previousObjects returns the objects of the release's live revisions
// before rec: what the rollback prunes unless rec has them too.
func (e *Engine) objectsBeforeRollback(ctx context.Context, rec *storage.Release) ([]*unstructured.Unstructured, error) {
	live, err := e.liveRevisions(ctx, rec.Name, rec.Revision)
	var previous []*unstructured.Unstructured
	if err == nil {
		previous, err = manifestObjects(live)
	}
	if err != nil {
		return nil, fmt.Errorf("release %s: read the previous revisions: %w", rec.Name, err)
	}
	return previous, nil
}

// applyObjects applies the restored objects, reporting each in res and
// the progress events. When the cluster refuses, rec is marked failed
// (desc names the rollback) and the apply error returned.
func (e *Engine) applyRestored(ctx context.Context, rec *storage.Release, res *Result, objs []*unstructured.Unstructured,
	desc string, force bool) ([]cluster.ApplyResult, error) {
	applied, err := e.Objects.Apply(ctx, objs, cluster.ApplyOptions{Namespace: e.Namespace(), Release: rec.Name, Force: force, NoCreateNamespaceFlag: true})
	res.Applied = applied
	for _, a := range applied {
		e.emit(rec.Name, rec.Revision, PhaseApply, a.Object.String(), string(a.Action), "")
	}
	e.emitCanaryLeftovers(rec, beforeObjects(applied), fmt.Sprintf("the rollback restored revision %d's pod template and strategy", rec.RollbackOf))
	if err != nil {
		err = fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err)
		if mf := e.markFailed(ctx, rec, desc+" failed: "+applyFailure(err).Reason, applyFailure(err)); mf != nil {
			err = errors.Join(err, mf)
		}
		return applied, err
	}
	return applied, nil
}

// checkRestored discovers the ReplicaSets within timeout and verifies
// that every Deployment serves the pod template target ran. A failure is
// returned with its diagnosis; a lock taken over meanwhile is its
// *storage.ConflictError, without one.
func (e *Engine) checkRestored(ctx context.Context, rec, target *storage.Release, objs []*unstructured.Unstructured,
	applied []cluster.ApplyResult, timeout time.Duration) (*rollout.Diagnosis, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	err := e.discoverReplicaSets(rctx, rec, objs, applied)
	cancel()
	if err != nil {
		if lost := lockLost(err); lost != nil {
			return nil, lost
		}
		err = fmt.Errorf("release %s revision %d: find ReplicaSets: %w", rec.Name, rec.Revision, err)
		return replicaSetFailure(err), err
	}
	if f := e.verify(rec, target); f != nil {
		return f, errors.New(f.Message)
	}
	rctx, cancel = context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := e.rescue(rctx, rec, objs); err != nil {
		err = fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err)
		return &rollout.Diagnosis{Reason: "RescueFailed", Message: err.Error()}, err
	}
	return nil, nil
}

// rescue frees every StatefulSet among objs from the pods left on a bad
// revision (cluster.RescueStatefulSet): the rollout failure `kubectl
// rollout undo` cannot undo. Each eviction is reported.
func (e *Engine) rescue(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		ref := object.RefOf(obj)
		if !cluster.IsStatefulSet(ref) {
			continue
		}
		ns := ref.Namespace
		if ns == "" {
			ns = e.Namespace()
		}
		_, err := cluster.RescueStatefulSet(ctx, e.Client, e.clock(), ns, ref.Name, func(ev cluster.RescueEvent) {
			e.emit(rec.Name, rec.Revision, PhaseRollback, "Pod "+ns+"/"+ev.Pod, ev.Action,
				fmt.Sprintf("StatefulSet %s: %s", ref.Name, ev.Message))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// finish marks the healthy rollback deployed with the description desc,
// then deletes the records beyond historyMax.
func (e *Engine) finish(ctx context.Context, rec *storage.Release, res *Result, start time.Time, desc string, historyMax int) (*Result, error) {
	clk := e.clock()
	if err := storage.MarkDeployed(ctx, e.Store, rec, clk, desc); err != nil {
		res.sync(rec, start, clk)
		return res, fmt.Errorf("mark release %s revision %d deployed: %w", rec.Name, rec.Revision, err)
	}
	e.emit(rec.Name, rec.Revision, PhaseDone, "", string(rec.Status), desc)
	err := e.pruneHistory(ctx, rec, historyMax)
	res.sync(rec, start, clk)
	return res, err
}

// templateRef is one workload's recorded pod template revision, as verify
// compares them: a Deployment's ReplicaSet or a StatefulSet's
// ControllerRevision.
type templateRef struct {
	owner, name, hash string
	revision          int64
}

// templateKind says how verify names a kind's revisions.
type templateKind struct {
	kind, verb, unit, hashName, revisionName string
}

func replicaSetRefs(refs []storage.ReplicaSetRef) []templateRef {
	out := make([]templateRef, len(refs))
	for i, r := range refs {
		out[i] = templateRef{r.Deployment, r.Name, r.PodTemplateHash, r.Revision}
	}
	return out
}

func controllerRevisionRefs(refs []storage.ControllerRevisionRef) []templateRef {
	out := make([]templateRef, len(refs))
	for i, r := range refs {
		out[i] = templateRef{r.StatefulSet, r.Name, r.Hash, r.Revision}
	}
	return out
}

// verify checks that every Deployment serves, and every StatefulSet
// updates to, the pod template revision target ran: the ReplicaSet or
// ControllerRevision found now has the hash target recorded (the
// controller reuses it and gives it a new revision number). It returns
// the failure when one does not.
func (e *Engine) verify(rec, target *storage.Release) *rollout.Diagnosis {
	deploymentTemplates := templateKind{"Deployment", "serves", "ReplicaSet", "pod-template-hash", "Deployment revision"}
	statefulSetTemplates := templateKind{"StatefulSet", "updates to", "ControllerRevision", "hash", "revision"}
	if f := e.verifyTemplates(rec, target, deploymentTemplates, replicaSetRefs(rec.ReplicaSets), replicaSetRefs(target.ReplicaSets)); f != nil {
		return f
	}
	return e.verifyTemplates(rec, target, statefulSetTemplates, controllerRevisionRefs(rec.ControllerRevisions), controllerRevisionRefs(target.ControllerRevisions))
}

// verifyTemplates is verify for the workloads of one kind k.
func (e *Engine) verifyTemplates(rec, target *storage.Release, k templateKind, found, recorded []templateRef) *rollout.Diagnosis {
	for _, want := range recorded {
		i := slices.IndexFunc(found, func(got templateRef) bool { return got.owner == want.owner })
		if i < 0 {
			continue
		}
		got := found[i]
		if got.hash != want.hash {
			return &rollout.Diagnosis{
				Reason: "PodTemplateMismatch",
				Object: objectName(k.kind, want.owner),
				Message: fmt.Sprintf("%s %s %s %s %s (%s %s), but revision %d ran %s (%s %s): "+
					"its pod template differs from revision %d's (fields set by another field manager?)",
					k.kind, want.owner, k.verb, k.unit, got.name, k.hashName, got.hash, target.Revision, want.name, k.hashName, want.hash, target.Revision),
			}
		}
		e.emit(rec.Name, rec.Revision, PhaseRollback, k.kind+" "+e.Namespace()+"/"+want.owner, "verified",
			fmt.Sprintf("%s %s of revision %d restored (%s %s), now %s %d",
				k.unit, got.name, target.Revision, k.hashName, got.hash, k.revisionName, got.revision))
	}
	return nil
}

// InvalidRevisionError reports a revision that cannot be rolled back to,
// or that there is none (exit code 2).
type InvalidRevisionError struct {
	Namespace string
	Name      string
	// Revision is the revision asked for (0: the default target).
	Revision int
	Reason   string
	Existing []int
}

func (e *InvalidRevisionError) Error() string {
	var b strings.Builder
	if e.Revision != 0 {
		fmt.Fprintf(&b, "release %s: revision %d %s", e.Name, e.Revision, e.Reason)
	} else {
		fmt.Fprintf(&b, "release %s: %s", e.Name, e.Reason)
	}
	if len(e.Existing) > 0 {
		revs := make([]string, len(e.Existing))
		for i, r := range e.Existing {
			revs[i] = strconv.Itoa(r)
		}
		fmt.Fprintf(&b, "; revisions: %s", strings.Join(revs, ", "))
	}
	return b.String()
}

// ExitCode is 2: invalid input.
func (e *InvalidRevisionError) ExitCode() int { return exitcode.Invalid }
