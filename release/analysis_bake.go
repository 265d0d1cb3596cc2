package release

import (
	"context"
	"fmt"

	"github.com/vllmctl/vllmctl/internal/podhttp"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/storage"
)

// bakeUnderLock runs cfg on the revision rec wrote once its rollout is
// complete (a deploy without --canary, rollback --analysis): the new pods
// (those of the revision's ReplicaSets, the leaders of its groups) are
// measured alone for interval × count (no baseline: the spec was checked
// to have no check that needs one), with the synthetic load when the spec
// has one, while the revision's lock is kept fresh; the report goes into
// rec. op names the operation in an interrupted report ("deploy"). It
// returns the diagnosis and error of an analysis that refused the
// revision (subject names it in the diagnosis: the operation then fails
// as its rollout would), the error alone when the analysis could not end
// (interrupted, a lost lock), nil otherwise. Pods that crash during the
// bake are not watched: the next `vllmctl wait` or deploy sees them.
func (e *Engine) bakeUnderLock(ctx context.Context, rec *storage.Release, cfg *analysis.Config, prom *analysis.PrometheusEndpoint,
	op, subject string) (*rollout.Diagnosis, error) {
	bctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hb := e.startHeartbeat(bctx, rec, cancel)
	report, err := e.bakeAnalysis(bctx, rec, cfg, prom, "the "+op+" was interrupted before the analysis ended")
	if lost := hb.stop(); lost != nil {
		return nil, lost
	}
	rec.Analysis = report
	if err != nil {
		return nil, err
	}
	return analysis.Verdict(subject, rec.Name, rec.Revision, report)
}

// bakeAnalysis measures the Ready pods of the ReplicaSets rec made alone
// with cfg (an analysis without a baseline) and returns its report; an
// analysis cut short is stopped, with interrupted as its reason. The
// error is the end of ctx (or a provider's failure that is not an
// inconclusive measurement), wrapped naming the release.
func (e *Engine) bakeAnalysis(ctx context.Context, rec *storage.Release, cfg *analysis.Config, prom *analysis.PrometheusEndpoint,
	interrupted string) (*storage.AnalysisReport, error) {
	report := &storage.AnalysisReport{Outcome: storage.AnalysisRunning, Measurements: []storage.AnalysisMeasurement{}}
	e.emit(rec.Name, rec.Revision, PhaseAnalysis, "", "bake", fmt.Sprintf("no canary: the new pods are measured alone for %s", cfg.Duration()))
	resolve := func(ctx context.Context) (analysis.Targets, error) { return e.newPodTargets(ctx, rec) }
	err := e.runAnalysis(ctx, rec, cfg, prom, resolve, report)
	if report.Outcome == storage.AnalysisRunning {
		report.Outcome, report.Reason = storage.AnalysisStopped, interrupted
	}
	if err != nil {
		return report, fmt.Errorf("release %s revision %d: analysis: %w", rec.Name, rec.Revision, err)
	}
	return report, nil
}

// newPodTargets are the pods of revision rec (servecheck.Pods.Revision)
// to measure alone.
func (e *Engine) newPodTargets(ctx context.Context, rec *storage.Release) (analysis.Targets, error) {
	out := analysis.Targets{Namespace: e.Namespace()}
	pods, err := e.pods().Revision(ctx, rec)
	if err != nil {
		return out, err
	}
	for i := range pods {
		out.Canary = append(out.Canary, analysis.Target{Pod: pods[i].Name, Port: podhttp.Port(&pods[i])})
	}
	if len(out.Canary) == 0 {
		return out, fmt.Errorf("no Ready pod of the revision's ReplicaSets or groups to measure")
	}
	return out, nil
}
