package analysis

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release/storage"
)

// Runner runs an analysis with Argo Rollouts' semantics (its
// AnalysisTemplate metrics, as its analysis controller judges them):
//
//   - a measurement every Interval, Count of them, each one sample per
//     check, the first one Interval after Start;
//   - a check's measurement passes, fails or is inconclusive by its
//     conditions: a preset passes when value <= max and fails otherwise; a
//     custom metric with only successCondition fails when it is false,
//     with only failureCondition passes when it is false, with both is
//     inconclusive when neither holds; a sample with too few requests
//     (minRequests) or no data is inconclusive without a condition;
//   - a provider error (a failed scrape) is an error measurement: it counts
//     toward neither limit, and consecutiveErrorLimit+1 of them in a row
//     end the check (Argo: phase Error; here: inconclusive, so that the
//     inconclusive policy decides, and the reason names the errors);
//   - the analysis ends early, as Argo's does, once a check has had more
//     failed measurements than its failureLimit (failed), or more
//     inconclusive ones than its inconclusiveLimit (inconclusive);
//   - otherwise, after Count measurements, it passed.
type Runner struct {
	Config   *Config
	Provider Provider
	Clock    clock.WithTicker
	// Emit, when set, receives every measurement as it is taken (the
	// progress lines). It is called from Run's goroutine.
	Emit func(storage.AnalysisMeasurement)
}

// checkState counts a check's measurements.
type checkState struct {
	failed, inconclusive, consecutiveErrors int
}

// Run runs the analysis and fills report (its measurements, outcome and
// reason) as it goes. It returns ctx's error when ctx ends first (the
// report's outcome then stays running).
func (r *Runner) Run(ctx context.Context, report *storage.AnalysisReport) error {
	c := r.Config
	report.Provider, report.Interval, report.Count, report.Inconclusive = r.Provider.Name(), c.Interval.String(), c.Count, c.Inconclusive
	report.Outcome = storage.AnalysisRunning
	if report.Measurements == nil {
		report.Measurements = []storage.AnalysisMeasurement{}
	}
	conds := make([]conditions, len(c.Checks))
	for i, ch := range c.Checks {
		var err error
		if conds[i], err = compileConditions(ch); err != nil {
			return err
		}
	}
	states := make([]checkState, len(c.Checks))
	// A failed start is not an error of its own: the first measurement
	// says it (no earlier scrape of a pod, or Prometheus unreachable) and
	// takes what it missed.
	_ = r.Provider.Start(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	timer := r.Clock.NewTimer(c.Interval)
	defer timer.Stop()
	for n := 1; n <= c.Count; n++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C():
		}
		if n < c.Count {
			timer.Reset(c.Interval)
		}
		samples, err := r.Provider.Measure(ctx, c.Checks)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		at := r.Clock.Now().UTC()
		for i, ch := range c.Checks {
			m := storage.AnalysisMeasurement{Metric: ch.Name, At: at, Condition: ch.Condition()}
			st := &states[i]
			if err != nil {
				// A provider's error quotes what a pod or Prometheus
				// answered: untrusted text, printed and recorded.
				m.Outcome, m.Message = storage.AnalysisError, termout.SanitizeLine(err.Error())
				st.consecutiveErrors++
			} else {
				s := samples[i]
				m.Canary, m.Stable, m.Value, m.CanaryRequests, m.StableRequests = s.Canary, s.Stable, s.Value, s.CanaryRequests, s.StableRequests
				m.Outcome, m.Message = conds[i].judge(ch, s)
				st.consecutiveErrors = 0
				switch m.Outcome {
				case storage.AnalysisFailed:
					st.failed++
				case storage.AnalysisInconclusive:
					st.inconclusive++
				}
			}
			report.Measurements = append(report.Measurements, m)
			if r.Emit != nil {
				r.Emit(m)
			}
		}
		for i, ch := range c.Checks {
			st := states[i]
			switch {
			case st.failed > ch.FailureLimit:
				report.Outcome = storage.AnalysisFailed
				report.Reason = fmt.Sprintf("%s failed %d measurement(s) (failureLimit %d): %s", ch.Name, st.failed, ch.FailureLimit, lastOf(report, ch.Name))
				return nil
			case st.inconclusive > ch.InconclusiveLimit:
				report.Outcome = storage.AnalysisInconclusive
				report.Reason = fmt.Sprintf("%s was inconclusive %d time(s) (inconclusiveLimit %d): %s", ch.Name, st.inconclusive, ch.InconclusiveLimit, lastOf(report, ch.Name))
				return nil
			case st.consecutiveErrors > ch.ConsecutiveErrorLimit:
				report.Outcome = storage.AnalysisInconclusive
				report.Reason = fmt.Sprintf("%s could not be measured %d time(s) in a row (consecutiveErrorLimit %d): %s", ch.Name, st.consecutiveErrors, ch.ConsecutiveErrorLimit, lastOf(report, ch.Name))
				return nil
			}
		}
	}
	report.Outcome = storage.AnalysisPassed
	return nil
}

// lastOf describes the last measurement of metric.
func lastOf(report *storage.AnalysisReport, metric string) string {
	for i := len(report.Measurements) - 1; i >= 0; i-- {
		if m := report.Measurements[i]; m.Metric == metric {
			return DescribeMeasurement(m)
		}
	}
	return ""
}

// DescribeMeasurement is one measurement in a line: "ttftP95Ratio 6.1
// (canary 0.122, stable 0.02; value <= 2): failed".
func DescribeMeasurement(m storage.AnalysisMeasurement) string {
	fig := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.4g", *p)
	}
	s := fmt.Sprintf("%s %s (canary %s, stable %s; %s; requests %g/%g): %s", m.Metric, fig(m.Value), fig(m.Canary), fig(m.Stable), m.Condition,
		m.CanaryRequests, m.StableRequests, m.Outcome)
	if m.Message != "" {
		s += ": " + m.Message
	}
	return s
}

// conditions are a check's compiled conditions (custom metrics).
type conditions struct {
	success, failure func([]float64) (bool, error)
}

func compileConditions(ch Check) (conditions, error) {
	var c conditions
	var err error
	if ch.SuccessCondition != "" {
		if c.success, err = CompileCondition(ch.SuccessCondition); err != nil {
			return c, err
		}
	}
	if ch.FailureCondition != "" {
		if c.failure, err = CompileCondition(ch.FailureCondition); err != nil {
			return c, err
		}
	}
	return c, nil
}

// judge is a sample's outcome, and a message when it is not plain.
func (c conditions) judge(ch Check, s Sample) (string, string) {
	if s.Inconclusive != "" {
		return storage.AnalysisInconclusive, s.Inconclusive
	}
	if ch.Preset != "" {
		if s.Value == nil {
			return storage.AnalysisInconclusive, "no value"
		}
		if *s.Value <= ch.Max {
			return storage.AnalysisPassed, ""
		}
		return storage.AnalysisFailed, ""
	}
	result := s.Result
	if result == nil && s.Value != nil {
		result = []float64{*s.Value}
	}
	eval := func(f func([]float64) (bool, error)) (bool, string) {
		ok, err := f(result)
		if err != nil {
			return false, err.Error()
		}
		return ok, ""
	}
	// Argo: the failure condition first, then the success condition;
	// with both and neither true, inconclusive.
	if c.failure != nil {
		bad, msg := eval(c.failure)
		if msg != "" {
			return storage.AnalysisError, msg
		}
		if bad {
			return storage.AnalysisFailed, ""
		}
	}
	if c.success != nil {
		ok, msg := eval(c.success)
		switch {
		case msg != "":
			return storage.AnalysisError, msg
		case ok:
			return storage.AnalysisPassed, ""
		case c.failure != nil:
			return storage.AnalysisInconclusive, "neither condition holds"
		default:
			return storage.AnalysisFailed, ""
		}
	}
	return storage.AnalysisPassed, ""
}

// Summary is a report in a line, for the revision's description and
// `history`: "analysis passed (15 measurements)", "analysis failed:
// ttftP95Ratio 6.1 (…)".
func Summary(r *storage.AnalysisReport) string {
	if r == nil {
		return ""
	}
	s := fmt.Sprintf("analysis %s (%d measurement(s))", r.Outcome, len(r.Measurements))
	if r.Reason != "" && r.Outcome != storage.AnalysisPassed {
		s = fmt.Sprintf("analysis %s: %s", r.Outcome, r.Reason)
	}
	return s
}

// ScrapeTimeout is how long a scrape may take: the
// interval, at most 30s.
func ScrapeTimeout(interval time.Duration) time.Duration {
	return min(interval, 30*time.Second)
}
