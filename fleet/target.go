package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// Target is what the fleet does on one target: the release operations of
// one cluster context and namespace. [ReleaseTarget] is the real one;
// tests use fakes.
type Target interface {
	// Current returns the release's highest revision (0: no record yet).
	Current(ctx context.Context) (int, error)
	// DryRun runs the deploy with a server-side dry run and the capacity
	// preflight; nothing is changed or recorded.
	DryRun(ctx context.Context) (*release.Result, error)
	// Deploy runs the whole deploy pipeline (preflight, lock, apply,
	// watch, automatic rollback on failure or interrupt). Its result is
	// returned whenever a revision was written, also with an error.
	Deploy(ctx context.Context) (*release.Result, error)
	// Rollback restores revision to as the release's next revision.
	Rollback(ctx context.Context, to int) (*release.Result, error)
	// Soak watches the release's current revision for d with every
	// verdict applied; an error is a failure (or the end of ctx). The
	// report is the last analysis the soak baked (nil: none), also with
	// an error.
	Soak(ctx context.Context, d time.Duration) (*storage.AnalysisReport, error)
	// Diff is what Deploy would change.
	Diff(ctx context.Context) (*diff.Report, error)
	// Status is the release's status.
	Status(ctx context.Context) (*release.StatusReport, error)
}

// DefaultSoakInterval is how often a soak waits on the release again.
const DefaultSoakInterval = 15 * time.Second

// minSoakWait is the least time budget of one wait of a soak: pods of a
// healthy release that are briefly not ready near the soak's end get that
// long before the wait fails.
const minSoakWait = 30 * time.Second

// ReleaseTarget is a Target on a cluster: the operations of package
// release on Engine (built for the target's context and namespace).
type ReleaseTarget struct {
	Engine *release.Engine
	// Options are the deploy's options: Name and Render (the fleet's
	// chart with the shared then the target's values) and the deploy
	// flags. DryRun is set by DryRun only; RollbackOnFailure is always on
	// (the failed target's own automatic rollback runs under every
	// policy).
	Options release.DeployOptions
	// SoakInterval is how often a soak waits on the release again (0:
	// DefaultSoakInterval).
	SoakInterval time.Duration
}

var _ Target = (*ReleaseTarget)(nil)

// Current returns the highest revision of the release's records.
func (t *ReleaseTarget) Current(ctx context.Context) (int, error) {
	entries, err := storage.HistoryEntries(ctx, t.Engine.Store, t.Options.Name)
	var nf *storage.NotFoundError
	switch {
	case errors.As(err, &nf):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("release %s in namespace %s: read its records: %w", t.Options.Name, t.Engine.Namespace(), err)
	case len(entries) == 0:
		return 0, nil
	}
	return entries[len(entries)-1].Revision, nil
}

// DryRun deploys with a server-side dry run.
func (t *ReleaseTarget) DryRun(ctx context.Context) (*release.Result, error) {
	opts := t.Options
	opts.DryRun = true
	return t.Engine.Deploy(ctx, opts)
}

// Deploy deploys, with the automatic rollback on.
func (t *ReleaseTarget) Deploy(ctx context.Context) (*release.Result, error) {
	opts := t.Options
	opts.DryRun = false
	opts.RollbackOnFailure = true
	if opts.ForceUnlock {
		// --force-unlock takes over only a lock that is there (one a
		// killed fleet deploy left): the other targets keep their
		// up-to-date check.
		pending, err := storage.Pending(ctx, t.Engine.Store, opts.Name)
		if err != nil {
			return nil, fmt.Errorf("release %s: read its records: %w", opts.Name, err)
		}
		opts.ForceUnlock = len(pending) > 0
	}
	return t.Engine.Deploy(ctx, opts)
}

// Rollback restores revision to, as `vllmctl rollback --to-revision`.
func (t *ReleaseTarget) Rollback(ctx context.Context, to int) (*release.Result, error) {
	return t.Engine.Rollback(ctx, release.RollbackOptions{
		Name:           t.Options.Name,
		ToRevision:     to,
		Timeout:        t.Options.RollbackTimeout,
		HistoryMax:     t.Options.HistoryMax,
		ForceConflicts: t.Options.ForceConflicts,
	})
}

// Soak waits on the release's current revision again and again (as
// `vllmctl wait`, no rollback) until d has passed: a verdict or a wait
// that times out fails it. Each wait bakes the deploy's analysis
// (Options.Analysis, or the built-in chart's recorded analysis values)
// once the pods serve, with the verdicts of `vllmctl wait`
// (AnalysisFailed, AnalysisInconclusive): a soak lasts at least one
// analysis.
func (t *ReleaseTarget) Soak(ctx context.Context, d time.Duration) (*storage.AnalysisReport, error) {
	interval := t.SoakInterval
	if interval <= 0 {
		interval = DefaultSoakInterval
	}
	w := t.Engine
	deadline := time.Now().Add(d)
	var report *storage.AnalysisReport
	for {
		budget := max(time.Until(deadline), minSoakWait)
		wopts := release.WaitOptions{Name: t.Options.Name, Timeout: budget, Analysis: t.Options.Analysis, Prometheus: t.Options.Prometheus}
		res, err := w.Wait(ctx, wopts)
		if res != nil && res.Analysis != nil {
			report = res.Analysis
		}
		if err != nil {
			return report, fmt.Errorf("soak of release %s in namespace %s: %w", t.Options.Name, t.Engine.Namespace(), err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return report, nil
		}
		timer := time.NewTimer(min(interval, left))
		select {
		case <-ctx.Done():
			timer.Stop()
			return report, fmt.Errorf("soak of release %s in namespace %s: %w", t.Options.Name, t.Engine.Namespace(), ctx.Err())
		case <-timer.C:
		}
	}
}

// Diff is what the deploy would change.
func (t *ReleaseTarget) Diff(ctx context.Context) (*diff.Report, error) {
	return t.Engine.Diff(ctx, release.DiffOptions{
		Name:            t.Options.Name,
		Render:          t.Options.Render,
		ForceConflicts:  t.Options.ForceConflicts,
		CreateNamespace: t.Options.CreateNamespace,
		SkipPreflight:   t.Options.SkipPreflight,
		ModelFit:        t.Options.ModelFit,
	})
}

// Status is the release's status (`vllmctl status`).
func (t *ReleaseTarget) Status(ctx context.Context) (*release.StatusReport, error) {
	return t.Engine.Status(ctx, t.Options.Name)
}
