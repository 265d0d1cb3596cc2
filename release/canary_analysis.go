package release

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/storage"
)

// errAnalysisFailed is the error of a canary whose analysis failed (or
// was inconclusive under the fail policy).
var errAnalysisFailed = errors.New("the canary analysis refused the new revision")

// defaultPodPort is the port the analysis reaches a pod on when its
// containers name none (vLLM's default).
const defaultPodPort = 8000

// AnalysisHoldError is a canary analysis that was inconclusive under the
// hold policy: the rollout fails without a rollback (exit code 4) and the
// canary stays held, as a canary refused with --no-rollback does.
type AnalysisHoldError struct {
	Name     string
	Revision int
	Reason   string
}

func (e *AnalysisHoldError) Error() string {
	return fmt.Sprintf("release %s revision %d: the canary analysis was inconclusive (%s); inconclusive: hold keeps the canary held", e.Name, e.Revision, e.Reason)
}

// ExitCode is 4: failed, not rolled back.
func (e *AnalysisHoldError) ExitCode() int { return exitcode.Failed }

// analysisOf is the canary analysis of a deploy: the --analysis file's
// (already validated), else the chart's analysis values when the chart is
// the built-in one (its default values carry analysis.enabled) and they
// are enabled. An invalid spec is exit code 2, before anything is
// applied.
func analysisOf(opts DeployOptions, defaults, computed map[string]any) (*analysis.Config, error) {
	cfg := opts.Analysis
	if cfg == nil {
		if d, ok := defaults["analysis"].(map[string]any); !ok || d["enabled"] == nil {
			return nil, nil
		}
		spec, err := analysis.FromValues(computed)
		if err != nil || spec == nil {
			return nil, err
		}
		if cfg, err = spec.Validate("values analysis", opts.Canary != nil); err != nil {
			return nil, err
		}
	}
	if cfg.Provider == analysis.ProviderPrometheus && opts.Prometheus == nil {
		return nil, &analysis.InputError{Source: cfg.Source, Field: "provider", Msg: "prometheus needs --prometheus-url"}
	}
	return cfg, nil
}

// analysisTargets are the Ready canary pods and the Ready stable pods
// (the target Deployments' other pods) with the port to reach each on.
func (d *Engine) analysisTargets(ctx context.Context, targets []canaryTarget, canaryPods []string) (analysis.Targets, error) {
	ns := d.Namespace()
	out := analysis.Targets{Namespace: ns}
	for _, t := range targets {
		dep, err := d.Client.AppsV1().Deployments(t.ref.Namespace).Get(ctx, t.ref.Name, metav1.GetOptions{})
		if err != nil {
			return out, fmt.Errorf("deployment %s/%s: %w", t.ref.Namespace, t.ref.Name, err)
		}
		sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
		if err != nil {
			return out, fmt.Errorf("deployment %s/%s: selector: %w", t.ref.Namespace, t.ref.Name, err)
		}
		pods, err := d.Client.CoreV1().Pods(t.ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return out, fmt.Errorf("deployment %s/%s: list its pods: %w", t.ref.Namespace, t.ref.Name, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil || !podutils.IsPodReady(p) {
				continue
			}
			tg := analysis.Target{Pod: p.Name, Port: podPort(p)}
			if slices.Contains(canaryPods, p.Name) {
				out.Canary = append(out.Canary, tg)
			} else {
				out.Stable = append(out.Stable, tg)
			}
		}
	}
	if len(out.Canary) == 0 {
		return out, fmt.Errorf("none of the canary pods %v is Ready", canaryPods)
	}
	return out, nil
}

// groupAnalysisTargets are the targets of an engine group's canary: the
// pods that serve the release's traffic (serveSelectors: its Service
// selects each group's leader, which alone runs the OpenAI server and its
// /metrics), Ready and not terminating; those among canaryPods (the canary
// groups' pods) are the canary, the other groups' leaders the stable side.
func (d *Engine) groupAnalysisTargets(ctx context.Context, objs []*unstructured.Unstructured, canaryPods []string) (analysis.Targets, error) {
	out := analysis.Targets{Namespace: d.Namespace()}
	pods, err := d.servingPods(ctx, objs)
	if err != nil {
		return out, err
	}
	for i := range pods {
		tg := analysis.Target{Pod: pods[i].Name, Port: podPort(&pods[i])}
		if slices.Contains(canaryPods, tg.Pod) {
			out.Canary = append(out.Canary, tg)
		} else {
			out.Stable = append(out.Stable, tg)
		}
	}
	if len(out.Canary) == 0 {
		return out, fmt.Errorf("no pod of the canary groups %v serves the release's traffic (Ready, selected by its Service)", canaryPods)
	}
	return out, nil
}

// podPort is the port of a pod's container port named http, else of its
// first container's first TCP port, else 8000.
func podPort(p *corev1.Pod) int {
	first := 0
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Protocol != "" && port.Protocol != corev1.ProtocolTCP {
				continue
			}
			if port.Name == "http" {
				return int(port.ContainerPort)
			}
			if first == 0 {
				first = int(port.ContainerPort)
			}
		}
	}
	if first == 0 {
		return defaultPodPort
	}
	return first
}

// runAnalysis runs the analysis of rec on the pods resolve finds (the
// canary pods against the stable pods; or the new pods alone, after a
// rollout without a canary), with its synthetic load while it lasts, filling
// report; every measurement is a progress event. A failure to find the
// pods or to reach them is an inconclusive analysis (the policy
// decides), never an internal error.
func (e *Engine) runAnalysis(ctx context.Context, rec *storage.Release, cfg *analysis.Config, prom *analysis.PrometheusEndpoint,
	resolve func(context.Context) (analysis.Targets, error), report *storage.AnalysisReport) error {
	report.Provider, report.Interval, report.Count, report.Inconclusive = cfg.Provider, cfg.Interval.String(), cfg.Count, cfg.Inconclusive
	inconclusive := func(err error) error {
		report.Outcome, report.Reason = storage.AnalysisInconclusive, err.Error()
		return nil
	}
	if e.PodHTTP == nil && (cfg.Provider == analysis.ProviderScrape || cfg.Load != nil) {
		return inconclusive(errors.New("no way to reach the pods (no port-forward client)"))
	}
	t, err := resolve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return inconclusive(err)
	}
	e.emit(rec.Name, rec.Revision, PhaseAnalysis, "", "started", fmt.Sprintf("%s provider, %d measurement(s) every %s: canary %s against stable %s",
		cfg.Provider, cfg.Count, cfg.Interval, targetNames(t.Canary), targetNames(t.Stable)))
	client := func(pod string, port int, timeout time.Duration) (*http.Client, func()) {
		return e.PodHTTP(t.Namespace, pod, port, timeout)
	}
	var loaded chan *storage.LoadReport
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	if cfg.Load != nil {
		loaded = make(chan *storage.LoadReport, 1)
		l := &analysis.Loader{Load: cfg.Load, Targets: t, Client: client, Clock: e.clock()}
		go func() { loaded <- l.Run(lctx) }()
	}
	var provider analysis.Provider = analysis.NewScraper(t, client, analysis.ScrapeTimeout(cfg.Interval), cfg.MinRequests)
	if cfg.Provider == analysis.ProviderPrometheus {
		pp, err := analysis.NewPrometheus(*prom, t, cfg.Interval, cfg.MinRequests, e.clock())
		if err != nil {
			return inconclusive(err)
		}
		pp.LearnSecret = e.Redactor.AddValues
		provider = pp
	}
	r := &analysis.Runner{Config: cfg, Provider: provider, Clock: e.clock(),
		Emit: func(m storage.AnalysisMeasurement) {
			e.emitEvent(ProgressEvent{Release: rec.Name, Revision: rec.Revision, Phase: PhaseAnalysis, Status: m.Outcome,
				Message: analysis.DescribeMeasurement(m), Measurement: &m})
		}}
	err = r.Run(ctx, report)
	stopLoad()
	if loaded != nil {
		report.Load = <-loaded
	}
	if err != nil {
		return err
	}
	msg := analysis.Summary(report)
	if report.Load != nil {
		msg += fmt.Sprintf("; load sent %d request(s), %d failed, %d dropped", report.Load.Sent, report.Load.Failed, report.Load.Dropped)
	}
	e.emit(rec.Name, rec.Revision, PhaseAnalysis, "", report.Outcome, msg)
	return nil
}

func targetNames(ts []analysis.Target) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Pod
	}
	return joinPods(names)
}

// analysisVerdict turns a finished analysis into the canary's decision:
// nil to go on (passed, or inconclusive under the pass policy), else the
// diagnosis and the error (errAnalysisFailed wrapped; an
// *AnalysisHoldError under the hold policy).
func analysisVerdict(subject, name string, revision int, r *storage.AnalysisReport) (*rollout.Diagnosis, error) {
	switch {
	case r.Outcome == storage.AnalysisPassed:
		return nil, nil
	case r.Outcome == storage.AnalysisInconclusive && r.Inconclusive == analysis.InconclusivePass:
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
			f.Evidence = analysis.DescribeMeasurement(m)
			break
		}
	}
	if r.Outcome != storage.AnalysisFailed && r.Inconclusive == analysis.InconclusiveHold {
		return f, &AnalysisHoldError{Name: name, Revision: revision, Reason: r.Reason}
	}
	return f, fmt.Errorf("%w: %s", errAnalysisFailed, r.Reason)
}
