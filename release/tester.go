package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/servecheck"
	"github.com/vllmctl/vllmctl/release/storage"
)

// TestOptions tune [Engine.Test].
type TestOptions struct {
	// Name is the release name.
	Name string
	// Timeout bounds each test hook (0: DefaultTimeout).
	Timeout time.Duration
}

// TestResult is the outcome of `vllmctl test`.
type TestResult struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	// Revision is the deployed revision whose test hooks ran.
	Revision int `json:"revision"`
	// Tests are the test hooks that ran, in order: all of them when they
	// pass, up to the first that failed otherwise (as Helm runs them).
	Tests []HookRun `json:"tests"`
	// ServeCheck is the serve check of the pods the release's Services
	// select (the built-in chart's, or with --serve-check), run before
	// the test hooks.
	ServeCheck *rollout.ServeReport `json:"serveCheck,omitempty"`
	// Passed says whether the serve check and every test hook passed.
	Passed          bool    `json:"passed"`
	DurationSeconds float64 `json:"durationSeconds"`
}

// TestFailedError is a test hook that failed, or a serve check (exit
// code 4).
type TestFailedError struct {
	Name     string
	Revision int
	// Err is the test hook that failed; NotServing, when set instead, the
	// failure of the serve check.
	Err        *HookError
	NotServing *rollout.Diagnosis
}

func (e *TestFailedError) Error() string {
	if e.Err == nil && e.NotServing != nil {
		return fmt.Sprintf("release %s revision %d: test failed: serve check: %s", e.Name, e.Revision, e.NotServing.Message)
	}
	return fmt.Sprintf("release %s revision %d: test failed: %s", e.Name, e.Revision, e.Err.detail())
}

func (e *TestFailedError) Unwrap() error {
	if e.Err == nil {
		return nil
	}
	return e.Err
}

// ExitCode is 4: a test failed (contract: `vllmctl test`).
func (e *TestFailedError) ExitCode() int { return exitcode.Failed }

// Test runs the test hooks (helm.sh/hook: test) of the release's deployed
// revision, as `helm test` does: one after the other by weight, each
// deleted first (before-hook-creation, the default) and waited for until
// it completes with the rollout verdicts; the first that fails ends the
// run with a *TestFailedError (exit code 4) and its diagnosis (pod,
// container, reason, exit code, events, last log lines). It takes no lock
// and writes no record. A release without a deployed revision is an error
// (exit code 2); one without test hooks passes with no tests.
func (e *Engine) Test(ctx context.Context, opts TestOptions) (*TestResult, error) {
	if err := e.check(needStore, needObjects, needWaiter); err != nil {
		return nil, err
	}
	if err := storage.ValidateName(opts.Name); err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	start := storage.Stamp(e.clock())
	rec, err := storage.Deployed(ctx, e.Store, opts.Name)
	if err != nil {
		return nil, err
	}
	serve, f, err := e.testServing(ctx, rec)
	if err != nil && f == nil {
		return nil, err
	}
	if f != nil {
		res := &TestResult{Release: rec.Name, Namespace: rec.Namespace, Revision: rec.Revision, Tests: []HookRun{}, ServeCheck: serve}
		res.DurationSeconds = storage.Stamp(e.clock()).Sub(start).Seconds()
		if ctx.Err() != nil {
			return res, err
		}
		return res, &TestFailedError{Name: rec.Name, Revision: rec.Revision, NotServing: f}
	}
	runs, err := e.runHooks(ctx, rec, charts.HookTest, opts.Timeout)
	res := &TestResult{Release: rec.Name, Namespace: rec.Namespace, Revision: rec.Revision, Tests: runs, Passed: err == nil, ServeCheck: serve}
	if res.Tests == nil {
		res.Tests = []HookRun{}
	}
	res.DurationSeconds = storage.Stamp(e.clock()).Sub(start).Seconds()
	var he *HookError
	if errors.As(err, &he) && he.Event == charts.HookTest && ctx.Err() == nil {
		return res, &TestFailedError{Name: rec.Name, Revision: rec.Revision, Err: he}
	}
	return res, err
}

// testServing runs the serve check of rec (when it is on for it) on the
// Ready pods its Services select now, of any revision: what serves the
// release, as the chart's test hook reaches it through the Service.
func (e *Engine) testServing(ctx context.Context, rec *storage.Release) (*rollout.ServeReport, *rollout.Diagnosis, error) {
	cfg, err := e.serveCheckOf(rec)
	if err != nil || cfg == nil {
		return nil, nil, err
	}
	_ = LearnRecord(e.Redactor, rec) // a pod may answer with a Secret's value
	objs, err := cluster.ParseManifest(rec.Manifest)
	if err != nil {
		return nil, nil, &InvalidManifestError{Name: rec.Name, Err: fmt.Errorf("revision %d: %w", rec.Revision, err)}
	}
	return e.runServeCheck(ctx, rec, objs, cfg, servecheck.Scope{Live: true})
}
