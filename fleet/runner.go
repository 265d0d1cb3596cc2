package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/storage"
)

// GateFunc runs the gate command with vars (NAME=value) added to its
// environment, within timeout: canary.RunGateCommand.
type GateFunc func(ctx context.Context, command string, vars []string, timeout time.Duration) (*storage.GateResult, error)

// Runner runs a fleet file's operations on its targets.
type Runner struct {
	file    *File
	targets map[string]Target

	// Log, when set, receives the fleet's own progress lines (target ""
	// for the fleet's, else the target's name). It is called from several
	// goroutines at once.
	Log func(target, message string)
	// Gate runs the gate command (default canary.RunGateCommand).
	Gate GateFunc
	// GateTimeout bounds the gate (0: DefaultGateTimeout).
	GateTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// NewRunner returns the Runner of f on targets, one per target name of f.
func NewRunner(f *File, targets map[string]Target) (*Runner, error) {
	for _, t := range f.Targets {
		if targets[t.Name] == nil {
			return nil, fmt.Errorf("fleet file %s: target %s: no target built", f.Path, t.Name)
		}
	}
	return &Runner{file: f, targets: targets}, nil
}

func (r *Runner) log(target, format string, args ...any) {
	if r.Log != nil {
		r.Log(target, fmt.Sprintf(format, args...))
	}
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// parallel bounds a wave of n targets.
func (r *Runner) parallel(n int) int {
	if p := r.file.Policy.MaxParallel; p > 0 && p < n {
		return p
	}
	return max(n, 1)
}

// each runs fn on every name with at most limit at once, in order; once
// stop reports true no further name is started (fn is not called for
// it). It returns when every started fn has returned.
func each(names []string, limit int, stop func() bool, fn func(name string)) {
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for _, name := range names {
		sem <- struct{}{}
		if stop() {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(name)
		}()
	}
	wg.Wait()
}

// run is the state of one fleet deploy.
type run struct {
	*Runner
	res  *Result
	rows map[string]*TargetResult
	// mu guards failure and firstErr.
	mu       sync.Mutex
	failure  string
	firstErr error
	gateFail bool
	// refused is set when a wave's preflight refused a target: the fleet
	// stops there and the earlier waves stay as they are (see Deploy).
	refused bool
}

// fail notes the first failure (what stopped the fleet).
func (st *run) fail(msg string, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.failure == "" {
		st.failure = msg
		st.firstErr = err
	}
}

func (st *run) failed() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.failure != ""
}

// Deploy rolls the release out wave by wave:
//
//  1. every target of a wave is deployed with a dry run first (server-side
//     dry run and capacity preflight, nothing recorded); if one is
//     refused (invalid for it, its lock held, its cluster unreachable or
//     refusing), no target of the wave is applied and the fleet stops
//     there with the refusal's exit code, leaving the earlier waves as
//     they are: nothing failed, and the same fleet deploy run again
//     resumes at that wave;
//  2. the targets of the wave are deployed, at most Policy.MaxParallel at
//     once, each with the whole deploy pipeline and its own automatic
//     rollback; once one fails (or ctx ends) no further target is
//     started, the ones in flight finish (their rescue included);
//  3. with Policy.Soak the wave's targets are watched that long, every
//     verdict applied;
//  4. with Policy.Gate the gate runs before the next wave;
//  5. on a failure (a failed target, a failed soak or gate, an interrupt)
//     the onFailure policy runs, on a context of its own when
//     ctx has ended: rollback-fleet rolls every target this run changed
//     (and that is still on the revision it wrote) back to its revision
//     before; rollback-target rolls back only a target whose soak failed
//     (a failed deploy rolled itself back); stop rolls nothing back.
//
// The result is always returned; the error, when the fleet did not
// succeed, is an *Error carrying the exit code (see Worst).
func (r *Runner) Deploy(ctx context.Context) (*Result, error) {
	start := r.now()
	st := &run{Runner: r, rows: map[string]*TargetResult{}, res: &Result{
		File: r.file.Path, Release: r.file.Release, Waves: len(r.file.Waves),
		Policy:  PolicyReport{OnFailure: r.file.Policy.OnFailure, RolledBack: []PolicyRollback{}, NotRolledBack: []PolicyRollback{}},
		Targets: []*TargetResult{},
	}}
	waveOf := map[string]int{}
	for i, w := range r.file.Waves {
		for _, name := range w {
			waveOf[name] = i + 1
		}
	}
	for _, t := range r.file.Targets {
		row := &TargetResult{Name: t.Name, Context: t.Context, Namespace: t.Namespace, Wave: waveOf[t.Name], Outcome: NotStarted}
		st.rows[t.Name] = row
		st.res.Targets = append(st.res.Targets, row)
	}
	completed := false
	for i, wave := range r.file.Waves {
		if ctx.Err() != nil {
			break
		}
		st.res.Wave = i + 1
		r.log("", "wave %d/%d: %s", i+1, len(r.file.Waves), strings.Join(wave, ", "))
		if !st.preflight(ctx, wave) || !st.deployWave(ctx, wave) || !st.soak(ctx, wave) {
			break
		}
		if i == len(r.file.Waves)-1 {
			completed = true
		} else if !st.gate(ctx, i+1) {
			break
		}
	}
	if !completed && ctx.Err() != nil {
		st.res.Interrupted = true
		st.fail("interrupted", ctx.Err())
	}
	if st.failed() && !st.refused {
		st.applyPolicy(context.WithoutCancel(ctx))
	}
	st.finish()
	st.res.DurationSeconds = r.now().Sub(start).Seconds()
	if st.res.ExitCode == exitcode.OK {
		return st.res, nil
	}
	return st.res, &Error{Release: r.file.Release, Code: st.res.ExitCode, Message: st.summary(), Err: st.firstErr}
}

// preflight dry-runs every target of the wave; it reports whether all
// passed. The refused ones are Refused, the others of the wave Skipped.
func (st *run) preflight(ctx context.Context, wave []string) bool {
	st.log("", "preflight (server-side dry run) of %s", strings.Join(wave, ", "))
	var mu sync.Mutex
	var refused []string
	each(wave, st.parallel(len(wave)), func() bool { return ctx.Err() != nil }, func(name string) {
		_, err := st.targets[name].DryRun(ctx)
		if err == nil {
			return
		}
		row := st.rows[name]
		row.Outcome, row.ExitCode = Refused, exitcode.Of(err)
		row.note("preflight", diagnosis(nil, err), err)
		st.log(name, "preflight refused (exit %d): %v", row.ExitCode, err)
		mu.Lock()
		refused = append(refused, name)
		mu.Unlock()
		if ctx.Err() == nil {
			st.fail("preflight of "+name+" refused", err)
			mu.Lock()
			st.refused = true
			mu.Unlock()
		}
	})
	if len(refused) == 0 && ctx.Err() == nil {
		return true
	}
	for _, name := range wave {
		if row := st.rows[name]; row.Outcome == NotStarted {
			row.Outcome = Skipped
		}
		if row := st.rows[name]; row.Outcome == Refused && row.ExitCode == exitcode.Interrupted {
			row.Outcome, row.ExitCode = Skipped, exitcode.OK
		}
	}
	return false
}

// deployWave deploys the wave's targets; it reports whether all of them
// are deployed or up to date.
func (st *run) deployWave(ctx context.Context, wave []string) bool {
	stop := func() bool { return ctx.Err() != nil || st.failed() }
	each(wave, st.parallel(len(wave)), stop, func(name string) { st.deployTarget(ctx, name) })
	ok := true
	for _, name := range wave {
		row := st.rows[name]
		switch row.Outcome {
		case NotStarted:
			row.Outcome, ok = Skipped, false
		case Deployed, UpToDate:
		default:
			ok = false
		}
	}
	return ok && ctx.Err() == nil
}

// deployTarget deploys one target and fills its row.
func (st *run) deployTarget(ctx context.Context, name string) {
	row, t := st.rows[name], st.targets[name]
	start := st.now()
	defer func() { row.DurationSeconds = st.now().Sub(start).Seconds() }()
	before, err := t.Current(ctx)
	if err != nil && ctx.Err() != nil {
		row.Outcome = Skipped // interrupted before anything was written
		return
	}
	if err != nil {
		row.Outcome, row.ExitCode = Refused, exitcode.Of(err)
		row.note("deploy", nil, err)
		st.fail("the records of "+name+" cannot be read", err)
		return
	}
	row.RevisionBefore, row.RevisionAfter = before, before
	st.log(name, "deploying (revision before: %d)", before)
	res, err := t.Deploy(ctx)
	if res != nil {
		row.Analysis = res.Analysis
	}
	if err == nil {
		row.RevisionAfter = res.Revision
		if res != nil && res.UpToDate {
			row.Outcome = UpToDate
			st.log(name, "up to date (revision %d)", res.Revision)
			return
		}
		row.Outcome, row.changed = Deployed, res.Revision != before
		st.log(name, "deployed revision %d", res.Revision)
		return
	}
	row.ExitCode = exitcode.Of(err)
	row.note("deploy", diagnosis(res, err), err)
	switch {
	case res == nil && row.ExitCode == exitcode.Interrupted:
		// Interrupted before anything was written.
		row.Outcome, row.ExitCode, row.Phase, row.Error = Skipped, exitcode.OK, "", ""
		return
	case res == nil:
		row.Outcome = Refused
	case row.ExitCode == exitcode.RolledBack:
		row.Outcome, row.RolledBackTo = RolledBack, res.RolledBackTo
		row.RevisionAfter = res.Revision
		if res.Rollback != nil {
			row.RevisionAfter = res.Rollback.Revision
		}
	default:
		row.Outcome = Failed
		row.RevisionAfter = res.Revision
	}
	st.log(name, "%s (exit %d): %v", row.Outcome, row.ExitCode, err)
	if ctx.Err() == nil || row.Outcome != RolledBack {
		st.fail(fmt.Sprintf("target %s %s", name, row.Outcome), err)
	}
}

// soak watches the wave's targets for Policy.Soak; it reports whether
// all stayed healthy.
func (st *run) soak(ctx context.Context, wave []string) bool {
	d := st.file.Policy.Soak
	if d <= 0 {
		return true
	}
	st.log("", "soak of wave %d for %s", st.res.Wave, d)
	var wg sync.WaitGroup
	for _, name := range wave {
		wg.Add(1)
		go func() {
			defer wg.Done()
			report, err := st.targets[name].Soak(ctx, d)
			if err == nil || ctx.Err() != nil {
				return
			}
			row := st.rows[name]
			if report != nil {
				row.Analysis = report // what failed the soak, measured
			}
			row.Outcome, row.ExitCode = Failed, exitcode.Of(err)
			if row.ExitCode == exitcode.RolledBack || row.ExitCode == exitcode.OK {
				row.ExitCode = exitcode.Failed
			}
			row.note("soak", diagnosis(nil, err), err)
			st.log(name, "soak failed: %v", err)
			st.fail("soak of target "+name+" failed", err)
		}()
	}
	wg.Wait()
	return !st.failed() && ctx.Err() == nil
}

// gate runs the gate after wave (1-based); it reports whether it passed.
func (st *run) gate(ctx context.Context, wave int) bool {
	command := st.file.Policy.Gate
	if command == "" {
		return true
	}
	var done []string
	for _, t := range st.file.Targets {
		if o := st.rows[t.Name].Outcome; o == Deployed || o == UpToDate {
			done = append(done, t.Name)
		}
	}
	vars := []string{
		"VLLMCTL_FLEET_RELEASE=" + st.file.Release,
		"VLLMCTL_FLEET_WAVE=" + strconv.Itoa(wave),
		"VLLMCTL_FLEET_TARGETS=" + strings.Join(done, " "),
		"VLLMCTL_FLEET_FILE=" + st.file.Path,
	}
	run, timeout := st.Gate, st.GateTimeout
	if run == nil {
		run = canary.RunGateCommand
	}
	if timeout <= 0 {
		timeout = DefaultGateTimeout
	}
	st.log("", "gate after wave %d: %s", wave, command)
	g, err := run(ctx, command, vars, timeout)
	if g != nil {
		st.res.Gates = append(st.res.Gates, GateRun{Wave: wave, GateResult: *g})
	}
	switch {
	case ctx.Err() != nil:
		return false
	case err != nil:
		st.gateFail = true
		st.fail(fmt.Sprintf("gate after wave %d could not run", wave), err)
		return false
	case !g.Passed():
		st.gateFail = true
		how := fmt.Sprintf("exited %d", g.ExitCode)
		if g.TimedOut {
			how = "timed out after " + timeout.String()
		}
		st.log("", "gate after wave %d failed: %s", wave, how)
		st.fail(fmt.Sprintf("gate after wave %d %s", wave, how), nil)
		return false
	}
	st.log("", "gate after wave %d passed", wave)
	return true
}

// applyPolicy runs the onFailure policy.
func (st *run) applyPolicy(ctx context.Context) {
	pol := &st.res.Policy
	pol.Applied = true
	var restore []string
	for _, t := range st.file.Targets {
		row := st.rows[t.Name]
		if !row.changed || (row.Outcome != Deployed && row.Outcome != Failed) {
			continue
		}
		switch st.file.Policy.OnFailure {
		case RollbackFleet:
			restore = append(restore, t.Name)
		case RollbackTarget:
			if row.Outcome == Failed && row.Phase == "soak" {
				restore = append(restore, t.Name)
			}
		}
	}
	if len(restore) == 0 {
		st.log("", "policy %s: nothing to roll back", st.file.Policy.OnFailure)
		return
	}
	st.log("", "policy %s: rolling back %s", st.file.Policy.OnFailure, strings.Join(restore, ", "))
	var mu sync.Mutex
	each(restore, st.parallel(len(restore)), func() bool { return false }, func(name string) {
		row := st.rows[name]
		pr := PolicyRollback{Target: name, From: row.RevisionAfter, To: row.RevisionBefore}
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			if pr.Error != "" {
				pol.NotRolledBack = append(pol.NotRolledBack, pr)
			} else {
				pol.RolledBack = append(pol.RolledBack, pr)
			}
		}()
		if row.RevisionBefore == 0 {
			pr.Error = "first install: no revision before to roll back to; left in place"
			st.log(name, "not rolled back: %s", pr.Error)
			if row.Outcome == Deployed {
				row.Outcome = Failed
				row.Phase, row.Error = "rollback", pr.Error
			}
			return
		}
		st.log(name, "rolling back to revision %d", row.RevisionBefore)
		res, err := st.targets[name].Rollback(ctx, row.RevisionBefore)
		if err != nil {
			pr.Error = err.Error()
			row.Outcome = Failed
			row.note("rollback", diagnosis(res, err), err)
			st.log(name, "rollback failed: %v", err)
			return
		}
		pr.Revision = res.Revision
		row.Outcome, row.RolledBackTo, row.RevisionAfter = RolledBack, row.RevisionBefore, res.Revision
		if row.ExitCode == exitcode.Failed && row.Phase == "soak" {
			row.ExitCode = exitcode.RolledBack
		}
		st.log(name, "rolled back to revision %d (revision %d)", row.RevisionBefore, res.Revision)
	})
	order := map[string]int{}
	for i, t := range st.file.Targets {
		order[t.Name] = i
	}
	byFile := func(a, b PolicyRollback) int { return order[a.Target] - order[b.Target] }
	slices.SortFunc(pol.RolledBack, byFile)
	slices.SortFunc(pol.NotRolledBack, byFile)
}

// finish settles the fleet's outcome and exit code: the worst of the
// targets' codes (see Worst), where a target left failed or not rolled
// back by the policy is 4; a failed gate is 3 when the policy rolled
// every changed target back (rollback-fleet), 4 otherwise; an interrupt
// that left nothing to restore is 130.
func (st *run) finish() {
	res := st.res
	if !st.failed() {
		res.Outcome = Succeeded
		return
	}
	res.Outcome, res.Failure = FleetFailed, st.failure
	code := exitcode.OK
	for _, row := range res.Targets {
		c := row.ExitCode
		if row.Outcome == Failed {
			c = exitcode.Failed
		}
		code = Worst(code, c)
	}
	if len(res.Policy.NotRolledBack) > 0 {
		code = Worst(code, exitcode.Failed)
	}
	if st.gateFail {
		if st.file.Policy.OnFailure == RollbackFleet {
			code = Worst(code, exitcode.RolledBack)
		} else {
			code = Worst(code, exitcode.Failed)
		}
	}
	if code == exitcode.OK {
		code = exitcode.Interrupted
		if !res.Interrupted {
			code = exitcode.Failed
		}
	}
	res.ExitCode = code
}

// summary is the fleet error's message.
func (st *run) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "failed in wave %d of %d: %s", st.res.Wave, st.res.Waves, st.failure)
	if st.firstErr != nil && !errors.Is(st.firstErr, context.Canceled) {
		fmt.Fprintf(&b, ": %v", st.firstErr)
	}
	pol := st.res.Policy
	fmt.Fprintf(&b, "; policy %s", pol.OnFailure)
	if len(pol.RolledBack) > 0 {
		fmt.Fprintf(&b, ": rolled back %s", names(pol.RolledBack))
	}
	if len(pol.NotRolledBack) > 0 {
		fmt.Fprintf(&b, "; not rolled back: %s", names(pol.NotRolledBack))
	}
	return b.String()
}

func names(prs []PolicyRollback) string {
	out := make([]string, len(prs))
	for i, p := range prs {
		out[i] = p.Target
	}
	return strings.Join(out, ", ")
}
