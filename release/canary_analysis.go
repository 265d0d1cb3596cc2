package release

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/storage"
)

// groupAnalysisTargets are the targets of an engine group's canary
// (canary.GroupAnalysisTargets) among the pods that serve the release's
// traffic now.
func (e *Engine) groupAnalysisTargets(ctx context.Context, objs []*unstructured.Unstructured, canaryPods []string) (analysis.Targets, error) {
	pods, err := e.pods().Serving(ctx, objs)
	if err != nil {
		return analysis.Targets{Namespace: e.Namespace()}, err
	}
	return canary.GroupAnalysisTargets(e.Namespace(), pods, canaryPods)
}

// runAnalysis runs the analysis cfg of rec (analysis.Session.Run) on the
// pods resolve finds, filling report: its start, each measurement and its
// outcome are PhaseAnalysis events.
func (e *Engine) runAnalysis(ctx context.Context, rec *storage.Release, cfg *analysis.Config, prom *analysis.PrometheusEndpoint,
	resolve func(context.Context) (analysis.Targets, error), report *storage.AnalysisReport) error {
	s := analysis.Session{Config: cfg, Prometheus: prom, PodHTTP: e.PodHTTP, Clock: e.clock(), LearnSecret: e.Redactor.AddValues,
		Emit: func(status, message string) { e.emit(rec.Name, rec.Revision, PhaseAnalysis, "", status, message) },
		Measured: func(m storage.AnalysisMeasurement) {
			e.emitEvent(ProgressEvent{Release: rec.Name, Revision: rec.Revision, Phase: PhaseAnalysis, Status: m.Outcome,
				Message: analysis.DescribeMeasurement(m), Measurement: &m})
		}}
	return s.Run(ctx, resolve, report)
}
