package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// codeErr is an error with an exit code (a refusal: 2, 5, 6).
type codeErr int

func (c codeErr) Error() string { return fmt.Sprintf("refused with %d", int(c)) }
func (c codeErr) ExitCode() int { return int(c) }

// journal records the fakes' calls in order and how many deploys ran at
// once.
type journal struct {
	mu       sync.Mutex
	calls    []string
	inflight int
	peak     int
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, s)
}

func (j *journal) enter() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.inflight++
	j.peak = max(j.peak, j.inflight)
}

func (j *journal) leave() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.inflight--
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.calls)
}

// fake is a Target on no cluster.
type fake struct {
	name string
	j    *journal

	current  int
	upToDate bool
	dryErr   error
	// deploy, when set, replaces the default outcome (a new revision).
	deploy      func(ctx context.Context) (*release.Result, error)
	delay       time.Duration
	rollbackErr error
	soakErr     error
	soakReport  *storage.AnalysisReport
	rolledBack  []int
	rollbackCtx error
	report      *diff.Report
	status      *release.StatusReport
	statusErr   error
}

func (f *fake) Current(context.Context) (int, error) { return f.current, nil }

func (f *fake) DryRun(context.Context) (*release.Result, error) {
	f.j.add("dryrun " + f.name)
	return &release.Result{DryRun: true}, f.dryErr
}

func (f *fake) Deploy(ctx context.Context) (*release.Result, error) {
	f.j.enter()
	defer f.j.leave()
	f.j.add("deploy " + f.name)
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	if f.deploy != nil {
		return f.deploy(ctx)
	}
	if f.upToDate {
		return &release.Result{Revision: f.current, Description: "up to date: Upgrade complete", UpToDate: true}, nil
	}
	return &release.Result{Revision: f.current + 1, Status: storage.StatusDeployed}, nil
}

func (f *fake) Rollback(ctx context.Context, to int) (*release.Result, error) {
	f.j.add(fmt.Sprintf("rollback %s to %d", f.name, to))
	f.rolledBack = append(f.rolledBack, to)
	f.rollbackCtx = ctx.Err()
	if f.rollbackErr != nil {
		return nil, f.rollbackErr
	}
	return &release.Result{Revision: f.current + 2, RolledBackTo: to}, nil
}

func (f *fake) Soak(context.Context, time.Duration) (*storage.AnalysisReport, error) {
	f.j.add("soak " + f.name)
	return f.soakReport, f.soakErr
}

func (f *fake) Diff(context.Context) (*diff.Report, error) { return f.report, nil }

func (f *fake) Status(context.Context) (*release.StatusReport, error) { return f.status, f.statusErr }

// failRolledBack is a deploy that failed and rolled itself back (exit 3).
func failRolledBack(f *fake) func(context.Context) (*release.Result, error) {
	return func(context.Context) (*release.Result, error) {
		d := &rollout.Diagnosis{Reason: "CrashLoopBackOff", Verdict: "CrashLooping", Cause: vllmcause.CauseGPUOOM}
		res := &release.Result{Revision: f.current + 1, RolledBackTo: f.current, Failure: d,
			Rollback: &release.Result{Revision: f.current + 2}}
		return res, &release.RolloutError{Name: "r", Revision: f.current + 1, Failure: d, RolledBackTo: f.current}
	}
}

// failStuck is a deploy that failed and could not roll back (exit 4).
func failStuck(f *fake) func(context.Context) (*release.Result, error) {
	return func(context.Context) (*release.Result, error) {
		d := &rollout.Diagnosis{Reason: "Timeout"}
		return &release.Result{Revision: f.current + 1, Failure: d},
			&release.RolloutError{Name: "r", Revision: f.current + 1, Failure: d, RollbackErr: errors.New("stuck")}
	}
}

// fixture builds a fleet of targets named by waves, each at revision 1.
func fixture(t *testing.T, policy Policy, waves ...[]string) (*Runner, map[string]*fake, *journal) {
	t.Helper()
	j := &journal{}
	f := &File{Path: "/fleet.yaml", Release: "r", Waves: waves, Policy: policy}
	if f.Policy.OnFailure == "" {
		f.Policy.OnFailure = RollbackFleet
	}
	fakes := map[string]*fake{}
	targets := map[string]Target{}
	for _, w := range waves {
		for _, name := range w {
			f.Targets = append(f.Targets, TargetSpec{Name: name, Context: "ctx-" + name, Namespace: "ns"})
			fk := &fake{name: name, j: j, current: 1}
			fakes[name], targets[name] = fk, fk
		}
	}
	r, err := NewRunner(f, targets)
	require.NoError(t, err)
	return r, fakes, j
}

func rollbackTargets(prs []PolicyRollback) []string {
	out := []string{}
	for _, p := range prs {
		out = append(out, p.Target)
	}
	return out
}

func outcomes(res *Result) map[string]Outcome {
	out := map[string]Outcome{}
	for _, row := range res.Targets {
		out[row.Name] = row.Outcome
	}
	return out
}

func TestDeploySucceeds(t *testing.T) {
	r, _, j := fixture(t, Policy{}, []string{"a", "b"}, []string{"c"})
	res, err := r.Deploy(context.Background())
	require.NoError(t, err)
	assert.Equal(t, Succeeded, res.Outcome)
	assert.Equal(t, 0, res.ExitCode)
	assert.Equal(t, 2, res.Wave)
	assert.Equal(t, map[string]Outcome{"a": Deployed, "b": Deployed, "c": Deployed}, outcomes(res))
	assert.False(t, res.Policy.Applied)
	calls := j.list()
	// Wave 1's dry runs, then its deploys, then wave 2's.
	assert.ElementsMatch(t, []string{"dryrun a", "dryrun b"}, calls[:2])
	assert.ElementsMatch(t, []string{"deploy a", "deploy b"}, calls[2:4])
	assert.Equal(t, []string{"dryrun c", "deploy c"}, calls[4:])
	row := res.Targets[0]
	assert.Equal(t, 1, row.RevisionBefore)
	assert.Equal(t, 2, row.RevisionAfter)
	assert.Equal(t, "ctx-a", row.Context)
	assert.Equal(t, 1, row.Wave)
}

func TestMaxParallel(t *testing.T) {
	for _, tt := range []struct {
		maxParallel, want int
	}{{0, 4}, {1, 1}, {2, 2}, {9, 4}} {
		t.Run(fmt.Sprint(tt.maxParallel), func(t *testing.T) {
			r, fakes, j := fixture(t, Policy{MaxParallel: tt.maxParallel}, []string{"a", "b", "c", "d"})
			for _, f := range fakes {
				f.delay = 30 * time.Millisecond
			}
			_, err := r.Deploy(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.want, j.peak)
		})
	}
}

func TestPolicies(t *testing.T) {
	tests := []struct {
		name     string
		policy   OnFailure
		failB    func(*fake) func(context.Context) (*release.Result, error)
		firstA   bool // a is a first install
		wantCode int
		wantA    Outcome
		wantB    Outcome
		rolled   []string
		notRolld []string
	}{
		{"rollback-fleet restores the earlier wave", RollbackFleet, failRolledBack, false, 3, RolledBack, RolledBack, []string{"a", "c"}, nil},
		{"rollback-fleet cannot restore a first install", RollbackFleet, failRolledBack, true, 4, Failed, RolledBack, []string{"c"}, []string{"a"}},
		{"rollback-target leaves the earlier wave", RollbackTarget, failRolledBack, false, 3, Deployed, RolledBack, nil, nil},
		{"stop leaves the earlier wave", Stop, failRolledBack, false, 3, Deployed, RolledBack, nil, nil},
		{"rollback-fleet, the failed target not rolled back", RollbackFleet, failStuck, false, 4, RolledBack, Failed, []string{"a", "c"}, nil},
		{"stop, the failed target not rolled back", Stop, failStuck, false, 4, Deployed, Failed, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, fakes, j := fixture(t, Policy{OnFailure: tt.policy}, []string{"a"}, []string{"b", "c"}, []string{"d"})
			fakes["b"].deploy = tt.failB(fakes["b"])
			fakes["c"].delay = 20 * time.Millisecond // in flight when b fails
			if tt.firstA {
				fakes["a"].current = 0
			}
			res, err := r.Deploy(context.Background())
			require.Error(t, err)
			assert.Equal(t, tt.wantCode, exitcode.Of(err))
			assert.Equal(t, tt.wantCode, res.ExitCode)
			assert.Equal(t, FleetFailed, res.Outcome)
			assert.Equal(t, 2, res.Wave)
			got := outcomes(res)
			assert.Equal(t, tt.wantA, got["a"])
			assert.Equal(t, tt.wantB, got["b"])
			assert.Equal(t, NotStarted, got["d"])
			assert.NotContains(t, j.list(), "deploy d")
			assert.True(t, res.Policy.Applied)
			assert.Equal(t, tt.policy, res.Policy.OnFailure)
			assert.ElementsMatch(t, tt.rolled, rollbackTargets(res.Policy.RolledBack), "rolled back")
			if tt.notRolld != nil {
				assert.ElementsMatch(t, tt.notRolld, rollbackTargets(res.Policy.NotRolledBack))
			}
			// c was deployed alongside b: rollback-fleet restores it too.
			if tt.policy == RollbackFleet && got["c"] == RolledBack {
				assert.Equal(t, []int{1}, fakes["c"].rolledBack)
			}
			b := res.Targets[1]
			assert.Equal(t, "deploy", b.Phase)
			if tt.wantB == RolledBack {
				assert.Equal(t, "CrashLoopBackOff", b.Reason)
				assert.Equal(t, "gpu-oom", b.Cause)
				assert.Equal(t, 3, b.ExitCode)
				assert.Equal(t, 3, b.RevisionAfter)
			}
		})
	}
}

func TestRollbackFleetRestoresTheFailedWave(t *testing.T) {
	r, fakes, _ := fixture(t, Policy{MaxParallel: 1}, []string{"a"}, []string{"b", "c"})
	fakes["c"].deploy = failRolledBack(fakes["c"])
	res, err := r.Deploy(context.Background())
	require.Error(t, err)
	assert.Equal(t, 3, exitcode.Of(err))
	assert.Equal(t, map[string]Outcome{"a": RolledBack, "b": RolledBack, "c": RolledBack}, outcomes(res))
	assert.ElementsMatch(t, []string{"a", "b"}, rollbackTargets(res.Policy.RolledBack))
	assert.Equal(t, []int{1}, fakes["a"].rolledBack)
	assert.Empty(t, fakes["c"].rolledBack, "its own automatic rollback restored it")
	assert.Equal(t, 1, res.Targets[0].RolledBackTo)
	assert.Equal(t, 3, res.Targets[0].RevisionAfter)
}

func TestFailureStopsStartingTargets(t *testing.T) {
	r, fakes, j := fixture(t, Policy{MaxParallel: 1, OnFailure: Stop}, []string{"a", "b", "c"})
	fakes["a"].deploy = failRolledBack(fakes["a"])
	res, err := r.Deploy(context.Background())
	require.Error(t, err)
	assert.Equal(t, map[string]Outcome{"a": RolledBack, "b": Skipped, "c": Skipped}, outcomes(res))
	assert.NotContains(t, j.list(), "deploy b")
}

func TestPreflightRefusal(t *testing.T) {
	tests := []struct {
		name     string
		policy   OnFailure
		wave     string // the refused target
		code     int
		want     map[string]Outcome
		rollback bool
	}{
		{"first wave: nothing changed", RollbackFleet, "a", 6,
			map[string]Outcome{"a": Refused, "b": NotStarted, "c": NotStarted}, false},
		{"second wave, rollback-fleet: the first wave stays", RollbackFleet, "c", 6,
			map[string]Outcome{"a": Deployed, "b": Skipped, "c": Refused}, false},
		{"second wave, stop", Stop, "c", 6,
			map[string]Outcome{"a": Deployed, "b": Skipped, "c": Refused}, false},
		{"second wave, invalid input", RollbackTarget, "c", 2,
			map[string]Outcome{"a": Deployed, "b": Skipped, "c": Refused}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, fakes, j := fixture(t, Policy{OnFailure: tt.policy}, []string{"a"}, []string{"b", "c"})
			fakes[tt.wave].dryErr = codeErr(tt.code)
			res, err := r.Deploy(context.Background())
			require.Error(t, err)
			assert.Equal(t, tt.code, exitcode.Of(err))
			assert.Equal(t, tt.want, outcomes(res))
			calls := j.list()
			assert.NotContains(t, calls, "deploy b", "no target of the refused wave is applied")
			assert.NotContains(t, calls, "deploy c")
			if tt.wave == "c" {
				assert.Contains(t, calls, "dryrun b", "every target of the wave is dry-run")
			}
			assert.Equal(t, tt.rollback, slices.Contains(calls, "rollback a to 1"))
			row := res.Targets[slices.IndexFunc(res.Targets, func(r *TargetResult) bool { return r.Name == tt.wave })]
			assert.Equal(t, "preflight", row.Phase)
			assert.Equal(t, tt.code, row.ExitCode)
		})
	}
}

func TestLockHeldAtDeploy(t *testing.T) {
	r, fakes, _ := fixture(t, Policy{OnFailure: Stop}, []string{"a"})
	fakes["a"].deploy = func(context.Context) (*release.Result, error) { return nil, codeErr(5) }
	res, err := r.Deploy(context.Background())
	assert.Equal(t, 5, exitcode.Of(err))
	assert.Equal(t, Refused, res.Targets[0].Outcome)
}

func TestInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, fakes, j := fixture(t, Policy{MaxParallel: 1}, []string{"z"}, []string{"a", "b"}, []string{"c"})
	// a is in flight when Ctrl-C comes: its deploy rolls back on the
	// interrupt, as release.Engine.Deploy does.
	fakes["a"].deploy = func(ctx context.Context) (*release.Result, error) {
		cancel()
		<-ctx.Done()
		return failRolledBack(fakes["a"])(ctx)
	}
	res, err := r.Deploy(ctx)
	require.Error(t, err)
	assert.True(t, res.Interrupted)
	assert.Equal(t, map[string]Outcome{"z": RolledBack, "a": RolledBack, "b": Skipped, "c": NotStarted}, outcomes(res))
	assert.NotContains(t, j.list(), "deploy b")
	// The policy's rollback runs on a context of its own.
	assert.Equal(t, []int{1}, fakes["z"].rolledBack)
	assert.NoError(t, fakes["z"].rollbackCtx)
	assert.Equal(t, 3, exitcode.Of(err))
}

func TestInterruptNothingToRestore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r, _, _ := fixture(t, Policy{OnFailure: Stop, Gate: "true"}, []string{"a"}, []string{"b"})
	r.Gate = func(ctx context.Context, _ string, _ []string, _ time.Duration) (*storage.GateResult, error) {
		cancel()
		return nil, ctx.Err()
	}
	res, err := r.Deploy(ctx)
	assert.Equal(t, exitcode.Interrupted, exitcode.Of(err))
	assert.Equal(t, map[string]Outcome{"a": Deployed, "b": NotStarted}, outcomes(res))
}

func TestResumeSkipsUpToDate(t *testing.T) {
	r, fakes, _ := fixture(t, Policy{}, []string{"a"}, []string{"b"})
	fakes["a"].upToDate = true
	res, err := r.Deploy(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]Outcome{"a": UpToDate, "b": Deployed}, outcomes(res))
	assert.Equal(t, 1, res.Targets[0].RevisionAfter)
}

func TestResumeUpToDateIsNotRolledBack(t *testing.T) {
	r, fakes, _ := fixture(t, Policy{}, []string{"a"}, []string{"b"})
	fakes["a"].upToDate = true
	fakes["b"].deploy = failRolledBack(fakes["b"])
	res, err := r.Deploy(context.Background())
	assert.Equal(t, 3, exitcode.Of(err))
	assert.Equal(t, UpToDate, res.Targets[0].Outcome, "this run did not change it")
	assert.Empty(t, fakes["a"].rolledBack)
}

func TestSoak(t *testing.T) {
	for _, tt := range []struct {
		policy OnFailure
		code   int
		wantB  Outcome
		rolled []string
	}{
		{RollbackFleet, 3, RolledBack, []string{"a", "b"}},
		{RollbackTarget, 3, RolledBack, []string{"b"}},
		{Stop, 4, Failed, nil},
	} {
		t.Run(string(tt.policy), func(t *testing.T) {
			r, fakes, j := fixture(t, Policy{Soak: time.Minute, OnFailure: tt.policy}, []string{"a", "b"}, []string{"c"})
			fakes["b"].soakErr = &release.RolloutError{Name: "r", Failure: &rollout.Diagnosis{Reason: "CrashLoopBackOff"}}
			res, err := r.Deploy(context.Background())
			assert.Equal(t, tt.code, exitcode.Of(err))
			assert.Equal(t, tt.wantB, outcomes(res)["b"])
			assert.Equal(t, "soak", res.Targets[1].Phase)
			assert.Equal(t, "CrashLoopBackOff", res.Targets[1].Reason)
			assert.ElementsMatch(t, tt.rolled, rollbackTargets(res.Policy.RolledBack))
			assert.Contains(t, j.list(), "soak a")
			assert.NotContains(t, j.list(), "dryrun c")
		})
	}
}

func TestGate(t *testing.T) {
	for _, tt := range []struct {
		policy OnFailure
		exit   int
		code   int
	}{
		{RollbackFleet, 0, 0},
		{RollbackFleet, 1, 3},
		{RollbackTarget, 1, 4},
		{Stop, 1, 4},
	} {
		t.Run(fmt.Sprintf("%s exit %d", tt.policy, tt.exit), func(t *testing.T) {
			r, fakes, j := fixture(t, Policy{Gate: "check", OnFailure: tt.policy}, []string{"a", "b"}, []string{"c"}, []string{"d"})
			fakes["b"].upToDate = true
			var envs [][]string
			r.Gate = func(_ context.Context, command string, vars []string, timeout time.Duration) (*storage.GateResult, error) {
				assert.Equal(t, "check", command)
				assert.Equal(t, DefaultGateTimeout, timeout)
				envs = append(envs, vars)
				return &storage.GateResult{Command: command, ExitCode: tt.exit}, nil
			}
			res, err := r.Deploy(context.Background())
			assert.Equal(t, tt.code, exitcode.Of(err))
			require.NotEmpty(t, envs)
			assert.Equal(t, []string{"VLLMCTL_FLEET_RELEASE=r", "VLLMCTL_FLEET_WAVE=1", "VLLMCTL_FLEET_TARGETS=a b", "VLLMCTL_FLEET_FILE=/fleet.yaml"}, envs[0])
			if tt.exit == 0 {
				// Between waves only: not after the last.
				assert.Len(t, envs, 2)
				assert.Equal(t, "VLLMCTL_FLEET_TARGETS=a b c", envs[1][2])
				return
			}
			assert.Len(t, res.Gates, 1)
			assert.NotContains(t, j.list(), "dryrun c")
			assert.Equal(t, tt.policy == RollbackFleet, slices.Contains(j.list(), "rollback a to 1"))
			assert.Empty(t, fakes["b"].rolledBack, "b was up to date: nothing of this run to undo")
			assert.Contains(t, err.Error(), "gate after wave 1 exited 1")
		})
	}
}

func TestPolicyRollbackFails(t *testing.T) {
	r, fakes, _ := fixture(t, Policy{}, []string{"a"}, []string{"b"})
	fakes["a"].rollbackErr = &release.RolloutError{Name: "r", Failure: &rollout.Diagnosis{Reason: "Timeout"}}
	fakes["b"].deploy = failRolledBack(fakes["b"])
	res, err := r.Deploy(context.Background())
	assert.Equal(t, 4, exitcode.Of(err))
	assert.Equal(t, Failed, res.Targets[0].Outcome)
	assert.Equal(t, "rollback", res.Targets[0].Phase)
	assert.Equal(t, []string{"a"}, rollbackTargets(res.Policy.NotRolledBack))
}

func TestWorst(t *testing.T) {
	tests := []struct {
		codes []int
		want  int
	}{
		{nil, 0},
		{[]int{0, 3}, 3},
		{[]int{3, 6}, 6},
		{[]int{6, 4}, 4},
		{[]int{2, 5}, 5},
		{[]int{130, 3}, 3},
		{[]int{130, 0}, 130},
		{[]int{1, 6}, 1},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Worst(tt.codes...), "%v", tt.codes)
	}
}

func TestDiff(t *testing.T) {
	r, fakes, _ := fixture(t, Policy{}, []string{"a"}, []string{"b"})
	fakes["b"].report = &diff.Report{Objects: []diff.ObjectDiff{{}}}
	res, err := r.Diff(context.Background())
	require.NoError(t, err)
	assert.True(t, res.Changes)
	assert.False(t, res.Targets[0].Changes)
	assert.True(t, res.Targets[1].Changes)
	assert.Equal(t, 2, res.Targets[1].Wave)
}

func TestStatus(t *testing.T) {
	r, fakes, _ := fixture(t, Policy{}, []string{"a", "b", "c"})
	fakes["a"].status = &release.StatusReport{Revision: 3, Status: storage.StatusDeployed, ChartInfo: release.ChartInfo{Chart: "vllm-1.0.0"},
		Objects: []release.LiveObject{{Status: "Current"}, {Status: "Current"}}}
	fakes["b"].statusErr = &storage.NotFoundError{Name: "r"}
	fakes["c"].statusErr = codeErr(6)
	res, err := r.Status(context.Background())
	assert.Equal(t, 6, exitcode.Of(err))
	a := res.Targets[0]
	assert.Equal(t, TargetStatus{Name: "a", Context: "ctx-a", Namespace: "ns", Wave: 1, Revision: 3, Status: "deployed",
		Chart: "vllm-1.0.0", Ready: true, ReadyObjects: 2, Objects: 2}, *a)
	assert.Equal(t, "not-installed", res.Targets[1].Status)
	assert.Equal(t, 6, res.Targets[2].ExitCode)
}

func TestGateRunsWithTheFleetEnvironment(t *testing.T) {
	r, _, _ := fixture(t, Policy{Gate: `test "$VLLMCTL_FLEET_WAVE" = 1 && test "$VLLMCTL_FLEET_TARGETS" = "a b" && test "$VLLMCTL_FLEET_RELEASE" = r && test "$VLLMCTL_FLEET_FILE" = /fleet.yaml`},
		[]string{"a", "b"}, []string{"c"})
	res, err := r.Deploy(context.Background())
	require.NoError(t, err)
	require.Len(t, res.Gates, 1)
	assert.Equal(t, 1, res.Gates[0].Wave)
	assert.Equal(t, 0, res.Gates[0].ExitCode)

	r, _, _ = fixture(t, Policy{Gate: "echo no; exit 7", OnFailure: Stop}, []string{"a"}, []string{"b"})
	res, err = r.Deploy(context.Background())
	assert.Equal(t, 4, exitcode.Of(err))
	assert.Equal(t, 7, res.Gates[0].ExitCode)
	assert.Equal(t, []string{"no"}, res.Gates[0].OutputTail)
}

// TestAnalysisVerdicts: a target whose deploy's analysis refused it
// (rolled back by its own deploy, exit 3), or whose soak's analysis did
// (exit 4), carries the verdict into its row, and the onFailure policy
// applies as to any other failure.
func TestAnalysisVerdicts(t *testing.T) {
	refused := &rollout.Diagnosis{Reason: string(rollout.VerdictAnalysisFailed), Verdict: rollout.VerdictAnalysisFailed, Cause: "unknown",
		Message: "the analysis after the rollout failed: errorRatio 0.25 > 0.05", Evidence: "errorRatio 0.25"}
	t.Run("deploy, rollback-fleet", func(t *testing.T) {
		r, fakes, _ := fixture(t, Policy{}, []string{"a"}, []string{"b"}, []string{"c"})
		b := fakes["b"]
		b.deploy = func(context.Context) (*release.Result, error) {
			res := &release.Result{Revision: 2, RolledBackTo: 1, Failure: refused, Rollback: &release.Result{Revision: 3},
				Analysis: &storage.AnalysisReport{Provider: "scrape", Outcome: storage.AnalysisFailed, Reason: "errorRatio failed"}}
			return res, &release.RolloutError{Name: "r", Revision: 2, Failure: refused, RolledBackTo: 1}
		}
		res, err := r.Deploy(context.Background())
		assert.Equal(t, 3, exitcode.Of(err))
		row := res.Targets[1]
		assert.Equal(t, RolledBack, row.Outcome)
		assert.Equal(t, "deploy", row.Phase)
		assert.Equal(t, "AnalysisFailed", row.Verdict)
		assert.Equal(t, "AnalysisFailed", row.Reason)
		require.NotNil(t, row.Analysis, "the deploy's analysis report is the row's")
		assert.Equal(t, storage.AnalysisFailed, row.Analysis.Outcome)
		assert.Equal(t, []string{"a"}, rollbackTargets(res.Policy.RolledBack), "rollback-fleet restores the earlier wave")
		assert.Equal(t, NotStarted, outcomes(res)["c"])
	})
	t.Run("soak, rollback-target", func(t *testing.T) {
		r, fakes, j := fixture(t, Policy{Soak: time.Minute, OnFailure: RollbackTarget}, []string{"a", "b"}, []string{"c"})
		inconclusive := &rollout.Diagnosis{Reason: string(rollout.VerdictAnalysisInconclusive), Verdict: rollout.VerdictAnalysisInconclusive}
		fakes["b"].soakErr = fmt.Errorf("soak of release r in namespace ns: %w",
			&release.RolloutError{Name: "r", Revision: 2, Op: release.OpWait, Failure: inconclusive})
		fakes["b"].soakReport = &storage.AnalysisReport{Provider: "scrape", Outcome: storage.AnalysisInconclusive, Reason: "too few requests"}
		res, err := r.Deploy(context.Background())
		assert.Equal(t, 3, exitcode.Of(err))
		row := res.Targets[1]
		assert.Equal(t, RolledBack, row.Outcome)
		assert.Equal(t, "soak", row.Phase)
		assert.Equal(t, "AnalysisInconclusive", row.Verdict)
		require.NotNil(t, row.Analysis, "the soak's analysis report is the row's")
		assert.Equal(t, "too few requests", row.Analysis.Reason)
		assert.Equal(t, []string{"b"}, rollbackTargets(res.Policy.RolledBack))
		assert.Equal(t, Deployed, outcomes(res)["a"])
		assert.NotContains(t, j.list(), "dryrun c")
	})
}
