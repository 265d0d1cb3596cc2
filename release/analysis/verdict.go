package analysis

import (
	"errors"
	"fmt"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/storage"
)

// ErrFailed is the error of a canary whose analysis failed (or
// was inconclusive under the fail policy).
var ErrFailed = errors.New("the canary analysis refused the new revision")

// HoldError is an analysis that was inconclusive under the
// hold policy: the rollout fails without a rollback (exit code 4) and the
// canary stays held, as a canary refused with --no-rollback does.
type HoldError struct {
	Name     string
	Revision int
	Reason   string
}

func (e *HoldError) Error() string {
	return fmt.Sprintf("release %s revision %d: the canary analysis was inconclusive (%s); inconclusive: hold keeps the canary held", e.Name, e.Revision, e.Reason)
}

// ExitCode is 4: failed, not rolled back.
func (e *HoldError) ExitCode() int { return exitcode.Failed }

// Verdict turns a finished analysis into the canary's (or the bake's) decision:
// nil to go on (passed, or inconclusive under the pass policy), else the
// diagnosis and the error (ErrFailed wrapped; a
// *HoldError under the hold policy).
func Verdict(subject, name string, revision int, r *storage.AnalysisReport) (*rollout.Diagnosis, error) {
	switch {
	case r.Outcome == storage.AnalysisPassed:
		return nil, nil
	case r.Outcome == storage.AnalysisInconclusive && r.Inconclusive == InconclusivePass:
		return nil, nil
	}
	f := &rollout.Diagnosis{Reason: string(rollout.VerdictAnalysisFailed), Verdict: rollout.VerdictAnalysisFailed, Cause: "unknown",
		Message: subject + " failed: " + r.Reason}
	f.Hints = []string{"every measurement is in analysis.measurements (-o json) and in `vllmctl status`; compare the canary's figures with the stable pods'"}
	if r.Outcome != storage.AnalysisFailed {
		f.Reason, f.Verdict = string(rollout.VerdictAnalysisInconclusive), rollout.VerdictAnalysisInconclusive
		f.Message = subject + " was inconclusive: " + r.Reason
		f.Hints = []string{"send traffic to the pods during the analysis (the spec's load: {rps: …}), lower minRequests, or choose inconclusive: pass|hold"}
	}
	for i := len(r.Measurements) - 1; i >= 0; i-- {
		if m := r.Measurements[i]; m.Outcome != storage.AnalysisPassed {
			f.Evidence = DescribeMeasurement(m)
			break
		}
	}
	if r.Outcome != storage.AnalysisFailed && r.Inconclusive == InconclusiveHold {
		return f, &HoldError{Name: name, Revision: revision, Reason: r.Reason}
	}
	return f, fmt.Errorf("%w: %s", ErrFailed, r.Reason)
}
