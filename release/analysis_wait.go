package release

import (
	"context"
	"errors"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/storage"
)

// waitAnalysisOf is the analysis a wait on rec bakes once the rollout is
// Ready and serving: opts.Analysis (`wait --analysis FILE`, already
// validated without a baseline), else the revision's recorded analysis
// values when its chart is the built-in one and they are enabled. A wait
// has no canary: a --analysis spec with a check that compares with
// stable pods is refused, as deploy without --canary refuses it (exit
// code 2, before anything is waited for); recorded values with such a
// check (written for deploy --canary) are not baked, and skip says why.
func waitAnalysisOf(rec *storage.Release, opts WaitOptions) (cfg *analysis.Config, skip string, err error) {
	cfg = opts.Analysis
	if cfg == nil {
		if !rec.Chart.Builtin {
			return nil, "", nil
		}
		values := rec.ComputedValues
		if values == nil {
			values = rec.Values
		}
		spec, err := analysis.FromValues(values)
		if err != nil || spec == nil {
			return nil, "", err
		}
		if cfg, err = spec.Validate("values analysis", true); err != nil {
			return nil, "", err
		}
		if cfg.NeedsBaseline() {
			return nil, "the revision's analysis values compare the canary with the stable pods (deploy --canary): a wait has no canary, so it bakes none; wait --analysis FILE bakes one without a baseline", nil
		}
	}
	if cfg.Provider == analysis.ProviderPrometheus && opts.Prometheus == nil {
		return nil, "", &analysis.InputError{Source: cfg.Source, Field: "provider", Msg: "prometheus needs --prometheus-url"}
	}
	return cfg, "", nil
}

// bake runs cfg on the Ready pods of the ReplicaSets rec made, as a
// deploy without --canary does after its rollout, and puts the report in
// res (the wait writes no record: the revision keeps the analysis its
// deploy recorded). It returns the diagnosis and error of an analysis
// that refused the revision (errAnalysisFailed wrapped, or an
// *AnalysisHoldError under inconclusive: hold), nil otherwise; an
// interrupt is the end of ctx, without a diagnosis.
func (w *Engine) bakeWait(ctx context.Context, rec *storage.Release, cfg *analysis.Config, prom *analysis.PrometheusEndpoint,
	res *Result) (*rollout.Diagnosis, error) {
	if len(rec.ReplicaSets) == 0 && len(rec.ControllerRevisions) == 0 {
		w.emit(rec.Name, rec.Revision, PhaseAnalysis, "", "skipped", "no pods of a Deployment or an engine group to analyse")
		return nil, nil
	}
	report, err := w.bakeAnalysis(ctx, rec, cfg, prom, "the wait was interrupted before the analysis ended")
	res.Analysis = report
	if err != nil {
		return nil, err
	}
	return analysisVerdict("the analysis after the rollout", rec.Name, rec.Revision, report)
}

// isAnalysisHold reports whether err is an inconclusive analysis under
// the hold policy: no rollback, whatever the wait's flags say.
func isAnalysisHold(err error) bool {
	var hold *AnalysisHoldError
	return errors.As(err, &hold)
}
