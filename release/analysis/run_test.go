package analysis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release/storage"
)

// scripted is a provider that answers each measurement from a script: a
// value per check, NaN-free; an error ends as one.
type scripted struct {
	steps []step
	n     int
}

type step struct {
	values []float64 // per check
	err    error
	few    bool // too few requests
}

func (s *scripted) Name() string                { return "scripted" }
func (s *scripted) Start(context.Context) error { return nil }
func (s *scripted) Measure(_ context.Context, checks []Check) ([]Sample, error) {
	st := s.steps[s.n]
	s.n++
	if st.err != nil {
		return nil, st.err
	}
	out := make([]Sample, len(checks))
	for i := range checks {
		v := st.values[i]
		out[i] = Sample{Canary: &v, Value: &v, CanaryRequests: 100}
		if st.few {
			out[i].Inconclusive = "too few"
		}
	}
	return out, nil
}

// runOnFakeClock runs the analysis, stepping the fake clock one interval
// each time the runner waits, until it ends.
func runOnFakeClock(t *testing.T, cfg *Config, p Provider) (*storage.AnalysisReport, []storage.AnalysisMeasurement) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var emitted []storage.AnalysisMeasurement
	r := &Runner{Config: cfg, Provider: p, Clock: clk, Emit: func(m storage.AnalysisMeasurement) { emitted = append(emitted, m) }}
	report := &storage.AnalysisReport{}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background(), report) }()
	for {
		select {
		case err := <-done:
			require.NoError(t, err)
			return report, emitted
		default:
		}
		if clk.HasWaiters() {
			clk.Step(cfg.Interval)
		} else {
			time.Sleep(time.Millisecond) // the runner is measuring
		}
	}
}

func preset(name string, max float64, failureLimit, inconclusiveLimit int) Check {
	return Check{Name: name, Preset: name, Max: max, FailureLimit: failureLimit, InconclusiveLimit: inconclusiveLimit, ConsecutiveErrorLimit: 2}
}

func TestRunnerArgoSemantics(t *testing.T) {
	errScrape := errors.New("scrape pod ns/c1: EOF")
	for _, tc := range []struct {
		name         string
		checks       []Check
		steps        []step
		count        int
		want         string
		measurements int // measurements taken (per check)
		reason       string
	}{
		{"all pass", []Check{preset("errorRatio", 0.05, 0, 0)}, []step{{values: []float64{0.01}}, {values: []float64{0.0}}, {values: []float64{0.05}}}, 3,
			storage.AnalysisPassed, 3, ""},
		{"a failure beyond the limit ends it at once", []Check{preset("errorRatio", 0.05, 0, 0)},
			[]step{{values: []float64{0.01}}, {values: []float64{0.2}}, {values: []float64{0}}}, 3,
			storage.AnalysisFailed, 2, "errorRatio failed 1 measurement(s) (failureLimit 0): errorRatio 0.2"},
		{"failures within the limit pass", []Check{preset("errorRatio", 0.05, 1, 0)},
			[]step{{values: []float64{0.2}}, {values: []float64{0.01}}, {values: []float64{0.01}}}, 3, storage.AnalysisPassed, 3, ""},
		{"second failure beyond limit 1", []Check{preset("errorRatio", 0.05, 1, 0)},
			[]step{{values: []float64{0.2}}, {values: []float64{0.3}}, {values: []float64{0.01}}}, 3, storage.AnalysisFailed, 2, "failed 2 measurement(s) (failureLimit 1)"},
		{"inconclusive beyond its limit", []Check{preset("errorRatio", 0.05, 0, 1)},
			[]step{{few: true, values: []float64{0}}, {few: true, values: []float64{0}}, {values: []float64{0}}}, 3,
			storage.AnalysisInconclusive, 2, "inconclusive 2 time(s) (inconclusiveLimit 1)"},
		{"errors below the consecutive limit are tolerated", []Check{preset("errorRatio", 0.05, 0, 0)},
			[]step{{err: errScrape}, {err: errScrape}, {values: []float64{0}}, {err: errScrape}, {values: []float64{0}}}, 5, storage.AnalysisPassed, 5, ""},
		{"consecutive errors beyond the limit", []Check{preset("errorRatio", 0.05, 0, 0)},
			[]step{{err: errScrape}, {err: errScrape}, {err: errScrape}, {values: []float64{0}}}, 4,
			storage.AnalysisInconclusive, 3, "could not be measured 3 time(s) in a row (consecutiveErrorLimit 2)"},
		{"one check of two fails", []Check{preset("errorRatio", 0.05, 0, 0), preset("ttftP95Ratio", 2, 0, 0)},
			[]step{{values: []float64{0, 1.1}}, {values: []float64{0, 6}}}, 3, storage.AnalysisFailed, 2, "ttftP95Ratio failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &Config{Interval: 10 * time.Second, Count: tc.count, Checks: tc.checks, Inconclusive: InconclusiveFail}
			report, emitted := runOnFakeClock(t, cfg, &scripted{steps: tc.steps})
			assert.Equal(t, tc.want, report.Outcome)
			assert.Len(t, report.Measurements, tc.measurements*len(tc.checks))
			assert.Equal(t, report.Measurements, emitted)
			assert.Contains(t, report.Reason, tc.reason)
			assert.Equal(t, "scripted", report.Provider)
			assert.Equal(t, "10s", report.Interval)
			// One measurement per interval, stamped with its time.
			for i, m := range report.Measurements {
				n := i/len(tc.checks) + 1
				assert.Equal(t, time.Date(2026, 1, 1, 0, 0, 10*n, 0, time.UTC), m.At)
			}
		})
	}
}

func TestRunnerCustomConditions(t *testing.T) {
	v := func(f float64) Sample { return Sample{Value: &f} }
	for _, tc := range []struct {
		name             string
		success, failure string
		sample           Sample
		want             string
	}{
		{"success holds", "result[0] < 1", "", v(0.5), storage.AnalysisPassed},
		{"success false: failed", "result[0] < 1", "", v(2), storage.AnalysisFailed},
		{"failure holds", "", "result[0] > 1", v(2), storage.AnalysisFailed},
		{"failure false: passed", "", "result[0] > 1", v(0.5), storage.AnalysisPassed},
		{"both, neither: inconclusive", "result[0] < 1", "result[0] > 2", v(1.5), storage.AnalysisInconclusive},
		{"both, failure wins", "result[0] > 0", "result[0] > 2", v(3), storage.AnalysisFailed},
		{"empty result: error", "result[0] < 1", "", Sample{Result: []float64{}}, storage.AnalysisError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := Check{Name: "m", SuccessCondition: tc.success, FailureCondition: tc.failure}
			c, err := compileConditions(ch)
			require.NoError(t, err)
			got, _ := c.judge(ch, tc.sample)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRunnerStopsWithContext(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	r := &Runner{Config: &Config{Interval: time.Minute, Count: 3, Checks: []Check{preset("errorRatio", 1, 0, 0)}}, Provider: &scripted{}, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	report := &storage.AnalysisReport{}
	go func() { done <- r.Run(ctx, report) }()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	assert.Equal(t, storage.AnalysisRunning, report.Outcome)
	assert.Empty(t, report.Measurements)
}

// TestRunnerSanitisesProviderErrors: a provider's error quotes what a pod
// or Prometheus answered (escape sequences, megabytes of it): the
// measurement's message and the report's reason are sanitised and
// clipped before they are printed or recorded.
func TestRunnerSanitisesProviderErrors(t *testing.T) {
	hostile := errors.New("prometheus answered 500: \x1b]0;owned\x07\x1b[2J" + strings.Repeat("x", 1<<20))
	cfg := &Config{Interval: 10 * time.Second, Count: 3, Checks: []Check{preset("errorRatio", 1, 0, 0)}, Inconclusive: InconclusiveFail}
	report, emitted := runOnFakeClock(t, cfg, &scripted{steps: []step{{err: hostile}, {err: hostile}, {err: hostile}}})
	assert.Equal(t, storage.AnalysisInconclusive, report.Outcome)
	require.NotEmpty(t, emitted)
	for _, m := range append(emitted, report.Measurements...) {
		assert.Equal(t, storage.AnalysisError, m.Outcome)
		assert.NotContains(t, m.Message, "\x1b")
		assert.NotContains(t, m.Message, "\x07")
		assert.Contains(t, m.Message, `\x1b]0;owned`)
		assert.LessOrEqual(t, len(m.Message), termout.MaxLineBytes)
	}
	assert.NotContains(t, report.Reason, "\x1b")
	assert.Less(t, len(report.Reason), 2*termout.MaxLineBytes)
}
