package release

import (
	"context"
	"errors"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/storage"
)

// bake runs cfg on the Ready pods of the ReplicaSets rec made, as a
// deploy without --canary does after its rollout, and puts the report in
// res (the wait writes no record: the revision keeps the analysis its
// deploy recorded). It returns the diagnosis and error of an analysis
// that refused the revision (analysis.ErrFailed wrapped, or an
// *analysis.HoldError under inconclusive: hold), nil otherwise; an
// interrupt is the end of ctx, without a diagnosis.
func (e *Engine) bakeWait(ctx context.Context, rec *storage.Release, cfg *analysis.Config, prom *analysis.PrometheusEndpoint,
	res *Result) (*rollout.Diagnosis, error) {
	if len(rec.ReplicaSets) == 0 && len(rec.ControllerRevisions) == 0 {
		e.emit(rec.Name, rec.Revision, PhaseAnalysis, "", "skipped", "no pods of a Deployment or an engine group to analyse")
		return nil, nil
	}
	report, err := e.bakeAnalysis(ctx, rec, cfg, prom, "the wait was interrupted before the analysis ended")
	res.Analysis = report
	if err != nil {
		return nil, err
	}
	return analysis.Verdict("the analysis after the rollout", rec.Name, rec.Revision, report)
}

// isAnalysisHold reports whether err is an inconclusive analysis under
// the hold policy: no rollback, whatever the wait's flags say.
func isAnalysisHold(err error) bool {
	var hold *analysis.HoldError
	return errors.As(err, &hold)
}
