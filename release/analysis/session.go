package analysis

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/release/storage"
)

// Session is one analysis as an operation runs it: its spec, the way to
// the pods, and where its progress goes.
type Session struct {
	Config *Config
	// Prometheus is the endpoint of the prometheus provider.
	Prometheus *PrometheusEndpoint
	// PodHTTP returns an HTTP client to a pod's port through the API
	// server's port-forward, and the function that closes its idle
	// connections (nil: the pods cannot be reached).
	PodHTTP func(namespace, pod string, port int, timeout time.Duration) (*http.Client, func())
	Clock   clock.WithTicker
	// LearnSecret learns the Prometheus bearer token, so that whoever
	// prints the progress can withhold it.
	LearnSecret func(...string)
	// Emit reports the analysis' start and outcome (status, message).
	Emit func(status, message string)
	// Measured reports each measurement.
	Measured func(m storage.AnalysisMeasurement)
}

// Run runs the analysis on the pods resolve finds (the canary pods against
// the stable pods; or the new pods alone, after a rollout without a
// canary), with its synthetic load while it lasts, filling report; every
// measurement goes to Measured. A failure to find the
// pods or to reach them is an inconclusive analysis (the policy
// decides), never an internal error.
func (s Session) Run(ctx context.Context, resolve func(context.Context) (Targets, error), report *storage.AnalysisReport) error {
	cfg := s.Config
	report.Provider, report.Interval, report.Count, report.Inconclusive = cfg.Provider, cfg.Interval.String(), cfg.Count, cfg.Inconclusive
	inconclusive := func(err error) error {
		report.Outcome, report.Reason = storage.AnalysisInconclusive, err.Error()
		return nil
	}
	if s.PodHTTP == nil && (cfg.Provider == ProviderScrape || cfg.Load != nil) {
		return inconclusive(errors.New("no way to reach the pods (no port-forward client)"))
	}
	t, err := resolve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return inconclusive(err)
	}
	s.Emit("started", fmt.Sprintf("%s provider, %d measurement(s) every %s: canary %s against stable %s",
		cfg.Provider, cfg.Count, cfg.Interval, targetNames(t.Canary), targetNames(t.Stable)))
	client := func(pod string, port int, timeout time.Duration) (*http.Client, func()) {
		return s.PodHTTP(t.Namespace, pod, port, timeout)
	}
	var loaded chan *storage.LoadReport
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	if cfg.Load != nil {
		loaded = make(chan *storage.LoadReport, 1)
		l := &Loader{Load: cfg.Load, Targets: t, Client: client, Clock: s.Clock}
		go func() { loaded <- l.Run(lctx) }()
	}
	var provider Provider = NewScraper(t, client, ScrapeTimeout(cfg.Interval), cfg.MinRequests)
	if cfg.Provider == ProviderPrometheus {
		pp, err := NewPrometheus(*s.Prometheus, t, cfg.Interval, cfg.MinRequests, s.Clock)
		if err != nil {
			return inconclusive(err)
		}
		pp.LearnSecret = s.LearnSecret
		provider = pp
	}
	r := &Runner{Config: cfg, Provider: provider, Clock: s.Clock, Emit: s.Measured}
	err = r.Run(ctx, report)
	stopLoad()
	if loaded != nil {
		report.Load = <-loaded
	}
	if err != nil {
		return err
	}
	msg := Summary(report)
	if report.Load != nil {
		msg += fmt.Sprintf("; load sent %d request(s), %d failed, %d dropped", report.Load.Sent, report.Load.Failed, report.Load.Dropped)
	}
	s.Emit(report.Outcome, msg)
	return nil
}

func targetNames(ts []Target) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Pod
	}
	return JoinPods(names)
}

// JoinPods names pods for progress ("no pods" when there is none).
func JoinPods(pods []string) string {
	if len(pods) == 0 {
		return "no pods"
	}
	return strings.Join(pods, ", ")
}
