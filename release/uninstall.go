package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// UninstallOptions are the inputs of an uninstall.
type UninstallOptions struct {
	// Name is the release name.
	Name string
	// KeepHistory keeps the records, the last one marked uninstalled,
	// instead of deleting them.
	KeepHistory bool
	// Timeout is the age after which another operation's pending record
	// counts as stale (0: DefaultTimeout).
	Timeout time.Duration
	// ForceUnlock takes over another operation's pending record.
	ForceUnlock bool
}

// UninstallResult is the outcome of an uninstall.
type UninstallResult struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	// Revision is the uninstalled record's revision (KeepHistory), else the
	// revision of the lock that was deleted with the other records.
	Revision int `json:"revision"`
	// Status is uninstalled; with the records deleted it reports that too.
	Status storage.Status `json:"status"`
	// Deleted are the objects deleted (foreground), in deletion order.
	Deleted []object.Ref `json:"deleted"`
	// Kept are the objects left alone (not managed by the release any
	// more, namespaces), with why.
	Kept []cluster.PruneResult `json:"kept,omitempty"`
	// KeptCRDs are the CustomResourceDefinitions the release's revisions
	// created: never deleted.
	KeptCRDs []string `json:"keptCRDs,omitempty"`
	// KeptHistory says whether the records were kept.
	KeptHistory bool `json:"keptHistory"`
	// Hooks are the pre-delete and post-delete hooks that ran.
	Hooks []HookRun `json:"hooks,omitempty"`
	// DeletedRecords are the revisions whose records were deleted.
	DeletedRecords  []int   `json:"deletedRecords,omitempty"`
	DurationSeconds float64 `json:"durationSeconds"`
}

// Uninstall takes the release's lock ("Uninstall in progress"), deletes
// the objects of its live revisions (the deployed one and any later
// failed ones) in reverse apply order with foreground propagation (only
// objects still labelled as the release's; namespaces are never deleted),
// then deletes every record, or with KeepHistory marks the new record
// uninstalled (the deployed one superseded). A release without records is
// a *NotFoundError (exit code 2).
func (e *Engine) Uninstall(ctx context.Context, opts UninstallOptions) (*UninstallResult, error) {
	if err := e.check(needStore, needObjects); err != nil {
		return nil, err
	}
	clk := e.clock()
	start := storage.Stamp(clk)
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	entries, err := storage.HistoryEntries(ctx, e.Store, opts.Name)
	if err != nil {
		return nil, err
	}
	if err := storage.CheckNotHandedOver(entries, e.Namespace(), opts.Name); err != nil {
		return nil, err
	}
	last, err := entries[len(entries)-1].Release()
	if err != nil {
		return nil, err
	}
	res := &UninstallResult{Release: opts.Name, Namespace: e.Namespace(), Deleted: []object.Ref{}, KeptHistory: opts.KeepHistory}
	if last.Status == storage.StatusUninstalled && opts.KeepHistory {
		// Already uninstalled with its history kept: nothing to do.
		res.Revision, res.Status = last.Revision, last.Status
		return res, nil
	}

	rec, err := storage.Acquire(ctx, e.Store, opts.Name, storage.OpUninstall, e.lockTerms(storage.LockOptions{
		Holder:  e.holder(),
		Timeout: opts.Timeout,
		Force:   opts.ForceUnlock,
		Clock:   clk,
		Record:  &storage.Release{Chart: last.Chart, Values: last.Values, ComputedValues: last.ComputedValues, Notes: last.Notes, Hooks: last.Hooks},
	}))
	if err != nil {
		return nil, err
	}
	res.Revision = rec.Revision
	e.emit(rec.Name, rec.Revision, PhaseLock, "", string(rec.Status), rec.Description+", held by "+rec.Holder)

	if err := e.deleteHooksRun(ctx, rec, res, charts.HookPreDelete, opts.Timeout); err != nil {
		return res, err
	}
	if err := e.deleteObjects(ctx, rec, res); err != nil {
		return res, e.deleteFailed(ctx, rec, res, err)
	}
	res.KeptCRDs = e.keptCRDs(rec, entries)
	if err := e.deleteHooksRun(ctx, rec, res, charts.HookPostDelete, opts.Timeout); err != nil {
		return res, err
	}

	if opts.KeepHistory {
		if err := e.markUninstalled(ctx, rec, res); err != nil {
			return res, err
		}
		res.DurationSeconds = storage.Stamp(clk).Sub(start).Seconds()
		return res, nil
	}
	if err := e.deleteRecords(ctx, rec, res); err != nil {
		return res, err
	}
	res.DurationSeconds = storage.Stamp(clk).Sub(start).Seconds()
	return res, nil
}

// deleteHooksRun runs the pre-delete or post-delete hooks of rec (the
// last revision's): a hook that fails fails the uninstall (rec is marked
// failed; the records stay).
func (e *Engine) deleteHooksRun(ctx context.Context, rec *storage.Release, res *UninstallResult, event charts.HookEvent, timeout time.Duration) error {
	runs, err := e.runHooks(ctx, rec, event, timeout)
	res.Hooks = append(res.Hooks, runs...)
	if err == nil {
		return nil
	}
	if lost := lockLost(err); lost != nil {
		return lost
	}
	err = fmt.Errorf("uninstall release %s: %w", rec.Name, err)
	if merr := e.markFailed(ctx, rec, "Uninstall failed: "+hookFailure(err).Reason, hookFailure(err)); merr != nil {
		err = errors.Join(err, merr)
	}
	res.Status = rec.Status
	return err
}

// deleteObjects deletes the objects of the release's live revisions
// (foreground, reverse apply order; namespaces and objects no longer
// labelled as the release's are kept), reporting each in res.
func (e *Engine) deleteObjects(ctx context.Context, rec *storage.Release, res *UninstallResult) error {
	objs, err := e.liveObjects(ctx, rec)
	if err != nil {
		return err
	}
	results, err := e.Objects.Prune(ctx, objs, nil, cluster.PruneOptions{Release: rec.Name, Namespace: e.Namespace()})
	for _, r := range results {
		e.emit(rec.Name, rec.Revision, PhaseDelete, r.Object.String(), string(r.Action), r.Reason)
		switch r.Action {
		case cluster.PruneDeleted:
			res.Deleted = append(res.Deleted, r.Object)
		case cluster.PruneKept:
			res.Kept = append(res.Kept, r)
		}
	}
	return err
}

// deleteFailed marks rec failed after the objects could not be deleted and
// returns the error, with the failure to mark it when there is one.
func (e *Engine) deleteFailed(ctx context.Context, rec *storage.Release, res *UninstallResult, err error) error {
	err = fmt.Errorf("uninstall release %s: %w", rec.Name, err)
	if merr := e.markFailed(ctx, rec, "Uninstall failed: "+err.Error(), &rollout.Diagnosis{Reason: "DeleteFailed", Message: err.Error()}); merr != nil {
		err = errors.Join(err, merr)
	}
	res.Status = rec.Status
	return err
}

// markUninstalled keeps the records: rec is marked uninstalled (the
// deployed revision superseded).
func (e *Engine) markUninstalled(ctx context.Context, rec *storage.Release, res *UninstallResult) error {
	if err := storage.MarkUninstalled(ctx, e.Store, rec, e.clock(), "Uninstallation complete"); err != nil {
		return fmt.Errorf("mark release %s revision %d uninstalled: %w", rec.Name, rec.Revision, err)
	}
	e.emit(rec.Name, rec.Revision, PhaseDone, "", string(rec.Status), "Uninstallation complete")
	res.Status = rec.Status
	return nil
}

// deleteRecords deletes every record of the release, the lock rec last,
// noting each revision in res.
func (e *Engine) deleteRecords(ctx context.Context, rec *storage.Release, res *UninstallResult) error {
	all, err := e.Store.List(ctx, rec.Name)
	if err != nil {
		return err
	}
	for _, entry := range all {
		if entry.Revision == rec.Revision {
			continue
		}
		if err := e.deleteRecord(ctx, rec.Name, entry.Revision); err != nil {
			return err
		}
		res.DeletedRecords = append(res.DeletedRecords, entry.Revision)
	}
	if err := e.deleteRecord(ctx, rec.Name, rec.Revision); err != nil {
		return err
	}
	res.DeletedRecords = append(res.DeletedRecords, rec.Revision)
	res.Status = storage.StatusUninstalled
	e.emit(rec.Name, rec.Revision, PhaseDone, "", string(storage.StatusUninstalled), fmt.Sprintf("%d record(s) deleted", len(res.DeletedRecords)))
	return nil
}

func (e *Engine) deleteRecord(ctx context.Context, name string, revision int) error {
	err := e.Store.Delete(ctx, name, revision)
	var nf *storage.NotFoundError
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("delete record of release %s revision %d: %w", name, revision, err)
	}
	return nil
}

// liveObjects returns the objects of the release's live revisions without
// repeats (the newest revision's copy wins), in apply order.
func (e *Engine) liveObjects(ctx context.Context, rec *storage.Release) ([]*unstructured.Unstructured, error) {
	live, err := e.liveRevisions(ctx, rec.Name, rec.Revision)
	if err != nil {
		return nil, err
	}
	slices.Reverse(live) // newest first
	objs, err := manifestObjects(live)
	if err != nil {
		return nil, err
	}
	type key struct{ group, kind, namespace, name string }
	seen := map[key]bool{}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		ref := object.RefOf(o)
		k := key{ref.Group, ref.Kind, ref.Namespace, ref.Name}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, o)
	}
	charts.SortObjects(out)
	return out, nil
}
