package fleet

import (
	"errors"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// Outcome is what became of one target in a fleet deploy.
type Outcome string

// The outcomes of a target.
const (
	// Deployed: a new revision is deployed and serving.
	Deployed Outcome = "deployed"
	// UpToDate: nothing to change; no revision written.
	UpToDate Outcome = "up-to-date"
	// Failed: the target failed and is not restored (its automatic
	// rollback failed, it was a first install, its soak failed and no
	// policy rolled it back, or the policy's rollback of it failed).
	Failed Outcome = "failed"
	// RolledBack: the target is back on its revision before the run (its
	// deploy's automatic rollback, or the fleet policy's rollback).
	RolledBack Outcome = "rolled-back"
	// Skipped: its wave ran but the target was not started (another
	// target of the wave failed or was refused, or an interrupt).
	Skipped Outcome = "skipped"
	// NotStarted: the fleet stopped before its wave.
	NotStarted Outcome = "not-started"
	// Refused: its preflight (dry run) or its deploy was refused before
	// anything was applied (invalid input, lock held, cluster refused or
	// unreachable).
	Refused Outcome = "refused"
)

// FleetOutcome is the fleet deploy's overall outcome.
type FleetOutcome string

// The fleet outcomes.
const (
	Succeeded   FleetOutcome = "succeeded"
	FleetFailed FleetOutcome = "failed"
)

// TargetResult is one target's row of the result document.
type TargetResult struct {
	Name      string `json:"name"`
	Context   string `json:"context"`
	Namespace string `json:"namespace"`
	// Wave is the target's wave, 1-based.
	Wave int `json:"wave"`
	// RevisionBefore is the release's highest revision before the run
	// (0: none, a first install); RevisionAfter after it (the policy's
	// rollback included).
	RevisionBefore int     `json:"revisionBefore"`
	RevisionAfter  int     `json:"revisionAfter"`
	Outcome        Outcome `json:"outcome"`
	// Phase is where the target failed or was refused: preflight,
	// deploy, soak or rollback.
	Phase string `json:"phase,omitempty"`
	// Verdict, Reason and Cause are the failure diagnosis's.
	Verdict string `json:"verdict,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Cause   string `json:"cause,omitempty"`
	// Error is the error of the target's operation, if any.
	Error string `json:"error,omitempty"`
	// ExitCode is the target's own exit code, as `vllmctl deploy` on it
	// would exit (0 for a target the fleet policy rolled back).
	ExitCode int `json:"exitCode"`
	// RolledBackTo is the revision restored (automatic or policy
	// rollback).
	RolledBackTo int `json:"rolledBackTo,omitempty"`
	// Analysis is what the analysis of the target's deploy measured (the
	// bake after its rollout), when one ran; a soak's analyses are in its
	// progress lines and, when one refused, in Verdict and Reason.
	Analysis        *storage.AnalysisReport `json:"analysis,omitempty"`
	DurationSeconds float64                 `json:"durationSeconds"`

	// changed: this run wrote a serving revision (deployed, or deployed
	// then failed its soak).
	changed bool
}

// PolicyRollback is one rollback the onFailure policy ran (or could not).
type PolicyRollback struct {
	Target string `json:"target"`
	// From is the revision that was serving; To the one restored.
	From int `json:"from"`
	To   int `json:"to"`
	// Revision is the rollback's own revision.
	Revision int `json:"revision,omitempty"`
	// Error says why the target was not rolled back.
	Error string `json:"error,omitempty"`
}

// PolicyReport is what the onFailure policy did.
type PolicyReport struct {
	OnFailure OnFailure `json:"onFailure"`
	// Applied is set when a failure made the policy act.
	Applied bool `json:"applied"`
	// RolledBack are the targets the policy restored; NotRolledBack the
	// ones it could not (a first install has no revision before).
	RolledBack    []PolicyRollback `json:"rolledBack"`
	NotRolledBack []PolicyRollback `json:"notRolledBack"`
}

// GateRun is one run of the gate between two waves.
type GateRun struct {
	// Wave is the wave just finished, 1-based.
	Wave int `json:"wave"`
	storage.GateResult
}

// Result is the document of `vllmctl fleet deploy`.
type Result struct {
	File    string       `json:"file"`
	Release string       `json:"release"`
	Outcome FleetOutcome `json:"outcome"`
	// Wave is the last wave started (1-based; 0: none), Waves how many
	// the file has.
	Wave  int `json:"wave"`
	Waves int `json:"waves"`
	// Failure says what stopped the fleet.
	Failure string `json:"failure,omitempty"`
	// Interrupted is set when an interrupt stopped the fleet.
	Interrupted bool            `json:"interrupted,omitempty"`
	Policy      PolicyReport    `json:"policy"`
	Gates       []GateRun       `json:"gates,omitempty"`
	Targets     []*TargetResult `json:"targets"`
	ExitCode    int             `json:"exitCode"`
	// DurationSeconds is the whole run's.
	DurationSeconds float64 `json:"durationSeconds"`
}

// Error is the error of a fleet operation that did not succeed; its exit
// code is the fleet's.
type Error struct {
	Release string
	Code    int
	Message string
	// Err is the first target error, if any.
	Err error
}

func (e *Error) Error() string { return "fleet " + e.Release + ": " + e.Message }

// Unwrap returns the first target error.
func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the fleet's exit code.
func (e *Error) ExitCode() int { return e.Code }

// severity orders exit codes from harmless to worst: a target left
// broken (4, or an internal error) outranks a refusal (6, 5, 2, where
// nothing of that target was applied), which outranks a failure that was
// rolled back (3) and an interrupt that left nothing to restore (130).
func severity(code int) int {
	switch code {
	case exitcode.OK:
		return 0
	case exitcode.Interrupted:
		return 1
	case exitcode.RolledBack:
		return 2
	case exitcode.Invalid:
		return 3
	case exitcode.InProgress:
		return 4
	case exitcode.Cluster:
		return 5
	case exitcode.Internal:
		return 6
	}
	return 7 // exitcode.Failed and anything unknown
}

// Worst returns the worst of codes by severity.
func Worst(codes ...int) int {
	w := exitcode.OK
	for _, c := range codes {
		if severity(c) > severity(w) {
			w = c
		}
	}
	return w
}

// diagnosis finds the failure diagnosis of a deploy: the result's, else
// the *release.RolloutError's.
func diagnosis(res *release.Result, err error) *rollout.Diagnosis {
	if res != nil && res.Failure != nil {
		return res.Failure
	}
	var re *release.RolloutError
	if errors.As(err, &re) {
		return re.Failure
	}
	return nil
}

// note sets the row's failure fields from err and its diagnosis.
func (t *TargetResult) note(phase string, f *rollout.Diagnosis, err error) {
	t.Phase = phase
	if f != nil {
		t.Verdict, t.Reason, t.Cause = string(f.Verdict), f.Reason, string(f.Cause)
	}
	if err != nil {
		t.Error = err.Error()
	}
}

// TargetDiff is one target's row of `vllmctl fleet diff`.
type TargetDiff struct {
	Name      string `json:"name"`
	Context   string `json:"context"`
	Namespace string `json:"namespace"`
	Wave      int    `json:"wave"`
	// Changes is set when the deploy would change something.
	Changes bool         `json:"changes"`
	Report  *diff.Report `json:"report,omitempty"`
	Error   string       `json:"error,omitempty"`
	// ExitCode is 0 (no changes), 1 (changes) or the error's.
	ExitCode int `json:"exitCode"`
}

// DiffResult is the document of `vllmctl fleet diff`.
type DiffResult struct {
	File    string        `json:"file"`
	Release string        `json:"release"`
	Changes bool          `json:"changes"`
	Targets []*TargetDiff `json:"targets"`
}

// TargetStatus is one target's row of `vllmctl fleet status`.
type TargetStatus struct {
	Name      string `json:"name"`
	Context   string `json:"context"`
	Namespace string `json:"namespace"`
	Wave      int    `json:"wave"`
	// Revision is the release's highest revision (0: not installed) and
	// Status its record status ("not-installed" without records).
	Revision   int    `json:"revision"`
	Status     string `json:"status"`
	Chart      string `json:"chart,omitempty"`
	AppVersion string `json:"appVersion,omitempty"`
	// Ready is set when every object of the revision is Current;
	// ReadyObjects counts them (of Objects).
	Ready        bool   `json:"ready"`
	ReadyObjects int    `json:"readyObjects"`
	Objects      int    `json:"objects"`
	Error        string `json:"error,omitempty"`
	ExitCode     int    `json:"exitCode"`
}

// StatusResult is the document of `vllmctl fleet status`.
type StatusResult struct {
	File    string          `json:"file"`
	Release string          `json:"release"`
	Targets []*TargetStatus `json:"targets"`
}
