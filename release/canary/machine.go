package canary

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// canaryHoldTick is how often progress reports the hold while it lasts.
const canaryHoldTick = 15 * time.Second

// errCanaryGate is the error of a canary whose gate refused it.
var errCanaryGate = errors.New("the canary gate refused the new revision")

// Machine is the phase machine of one canary: starting (the canary pods
// become Ready), holding (watched for Hold), gate (the gate command runs
// while they are still watched), promoting (the chart's strategy applied
// again), then the usual rollout, which the deploy watches. Each step's
// I/O is a function, so the machine runs on a fake clock in tests.
type Machine struct {
	Clock clock.WithTicker
	Opts  Options
	// Pods is how many canary pods the targets hold in all.
	Pods   int32
	Report *storage.CanaryReport
	Tick   time.Duration
	// Emit reports a phase's progress.
	Emit func(phase, msg string)
	// Watch waits, with every verdict applied to the canary pods, until
	// they are Ready and until (when not nil) is closed.
	Watch func(ctx context.Context, until <-chan struct{}) (wait.Result, error)
	// Gate runs the gate command once for the Ready canary pods.
	Gate func(ctx context.Context, pods []string) (*storage.GateResult, error)
	// Promote applies the chart's strategy again.
	Promote func(ctx context.Context) error
	// Analyze, when set, runs the canary analysis on the Ready canary pods
	// during the hold, filling report; the hold then lasts until both the
	// hold and the analysis have ended (or the analysis refused).
	Analyze func(ctx context.Context, pods []string, report *storage.AnalysisReport) error
	// Analysis is the analysis' report once the hold began (nil: none).
	Analysis *storage.AnalysisReport
	// Name and Revision name the release in the analysis' errors.
	Name     string
	Revision int
	// Serve, when set, runs the serve check on the Ready canary pods
	// (within ServeTimeout), before the hold; Served is its report.
	Serve        func(ctx context.Context, pods []string) (*rollout.ServeReport, *rollout.Diagnosis, error)
	ServeTimeout time.Duration
	Served       *rollout.ServeReport

	phaseStart time.Time
	// Held is how long holding and the gate took: not counted against the
	// deploy's --timeout.
	Held time.Duration
}

// NewReport starts the report of a canary.
func NewReport(o Options) *storage.CanaryReport {
	return &storage.CanaryReport{Count: o.Count.String(), Hold: o.Hold.String(), Pods: []string{}, Phases: []storage.CanaryPhase{}}
}

// begin starts phase name.
func (c *Machine) begin(name, msg string) {
	c.phaseStart = c.Clock.Now()
	c.Report.Phases = append(c.Report.Phases, storage.CanaryPhase{Name: name, Start: c.phaseStart.UTC()})
	c.Emit(name, msg)
}

// end ends the current phase and returns how long it took.
func (c *Machine) end() time.Duration {
	d := c.Clock.Since(c.phaseStart)
	if n := len(c.Report.Phases); n > 0 {
		c.Report.Phases[n-1].DurationSeconds = d.Seconds()
	}
	return d
}

// Run runs the canary up to and including promotion. On a failure it
// returns the watch's result and error, and the failure when the machine
// itself diagnosed it (a gate that refused); the report's outcome says
// failed or interrupted.
func (c *Machine) Run(ctx context.Context) (wait.Result, *rollout.Diagnosis, error) {
	c.begin(PhaseStarting, fmt.Sprintf("waiting for %d canary pod(s) to be Ready", c.Pods))
	res, err := c.Watch(ctx, nil)
	c.end()
	if err != nil {
		return res, nil, c.failed(ctx, err)
	}
	c.Report.Pods = append([]string{}, res.CanaryPods...)

	if c.Serve != nil {
		if res, f, err := c.checkServing(ctx); err != nil {
			return res, f, err
		}
	}

	if c.Opts.Hold > 0 || c.Analyze != nil {
		msg := fmt.Sprintf("holding %s: %s", c.Opts.Hold, analysis.JoinPods(c.Report.Pods))
		if c.Analyze != nil {
			msg += "; analysing them"
		}
		c.begin(PhaseHolding, msg)
		until := make(chan struct{})
		hctx, stop := context.WithCancel(ctx)
		held := make(chan struct{})
		var analysed chan struct{}
		var aerr error
		if c.Analyze != nil {
			analysed = make(chan struct{})
			report, pods := &storage.AnalysisReport{Outcome: storage.AnalysisRunning, Measurements: []storage.AnalysisMeasurement{}}, c.Report.Pods
			c.Analysis = report
			go func() { defer close(analysed); aerr = c.Analyze(hctx, pods, report) }()
		}
		go func() { defer close(held); c.hold(hctx, until, analysed) }()
		res, err = c.Watch(ctx, until)
		stop()
		<-held
		if analysed != nil {
			<-analysed
			if c.Analysis.Outcome == storage.AnalysisRunning {
				c.Analysis.Outcome, c.Analysis.Reason = storage.AnalysisStopped, "the canary hold ended before the analysis did"
			}
		}
		c.Held += c.end()
		if err != nil {
			return res, nil, c.failed(ctx, err)
		}
		if aerr != nil {
			return res, nil, c.failed(ctx, fmt.Errorf("canary analysis: %w", aerr))
		}
		if c.Analysis != nil {
			if f, err := analysis.Verdict("the canary analysis", c.Name, c.Revision, c.Analysis); err != nil {
				c.Report.Outcome, c.Report.Reason = storage.CanaryFailed, f.Message
				return res, f, err
			}
		}
	}

	if c.Opts.Gate != "" {
		c.begin(PhaseGate, "running the gate: "+c.Opts.Gate)
		var gres *storage.GateResult
		var gerr error
		pods := c.Report.Pods
		res, err = c.watchWhile(ctx, func(ctx context.Context) { gres, gerr = c.Gate(ctx, pods) })
		c.Held += c.end()
		c.Report.Gate = gres
		switch {
		case err != nil:
			return res, nil, c.failed(ctx, err)
		case gerr != nil:
			return res, nil, c.failed(ctx, gerr)
		case !gres.Passed():
			c.Report.Outcome, c.Report.Reason = storage.CanaryFailed, gateMessage(gres)
			return res, gateFailure(gres), fmt.Errorf("%w: %s", errCanaryGate, gateMessage(gres))
		}
		c.Emit(PhaseGate, fmt.Sprintf("passed in %.1fs", gres.DurationSeconds))
	}

	c.begin(PhasePromoting, "applying the chart's strategy")
	err = c.Promote(ctx)
	c.end()
	if err != nil {
		return res, nil, c.failed(ctx, err)
	}
	c.Report.Outcome = storage.CanaryPromoted
	c.begin(PhaseRollout, "the rollout continues with the chart's strategy")
	return res, nil, nil
}

// checkServing runs the serve check on the canary pods while they are
// still watched; a pod that does not serve fails the canary
// (VerdictNotServing) before the hold and the gate.
func (c *Machine) checkServing(ctx context.Context) (wait.Result, *rollout.Diagnosis, error) {
	c.begin(PhaseServeCheck, "checking that the canary pods serve: "+analysis.JoinPods(c.Report.Pods))
	var f *rollout.Diagnosis
	var serr error
	pods := c.Report.Pods
	res, err := c.watchWhile(ctx, func(ctx context.Context) { c.Served, f, serr = c.Serve(ctx, pods) })
	c.Held += c.end()
	switch {
	case err != nil:
		return res, nil, c.failed(ctx, err)
	case f != nil:
		c.Report.Outcome, c.Report.Reason = storage.CanaryFailed, f.Message
		if ctx.Err() != nil {
			c.Report.Outcome = storage.CanaryInterrupted
		}
		return res, f, serr
	case serr != nil:
		return res, nil, c.failed(ctx, serr)
	}
	return res, nil, nil
}

// watchWhile runs do while the canary pods stay watched: the watch ends
// when do returns, and do's context ends when the watch fails first. It
// returns once both ended, with the watch's result and error.
func (c *Machine) watchWhile(ctx context.Context, do func(ctx context.Context)) (wait.Result, error) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		do(dctx)
	}()
	res, err := c.Watch(ctx, done)
	cancel()
	<-done
	return res, err
}

// Finish ends the last phase (the rollout after promotion) of a canary.
func (c *Machine) Finish() { c.end() }

// failed records how the canary ended and returns err.
func (c *Machine) failed(ctx context.Context, err error) error {
	c.Report.Outcome, c.Report.Reason = storage.CanaryFailed, err.Error()
	if ctx.Err() != nil {
		c.Report.Outcome = storage.CanaryInterrupted
	}
	return err
}

// hold closes until when the hold has passed and the analysis (when
// analysed is not nil) has ended, or at once when the analysis ended
// with anything but passed; it reports progress every tick, and returns
// when ctx ends.
func (c *Machine) hold(ctx context.Context, until chan<- struct{}, analysed <-chan struct{}) {
	var timerC <-chan time.Time
	if c.Opts.Hold > 0 {
		timer := c.Clock.NewTimer(c.Opts.Hold)
		defer timer.Stop()
		timerC = timer.C()
	}
	holding, analysing := timerC != nil, analysed != nil
	tick := c.Tick
	if tick <= 0 {
		tick = canaryHoldTick
	}
	ticker := c.Clock.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timerC:
			c.Emit(PhaseHolding, fmt.Sprintf("held %s", c.Opts.Hold))
			holding, timerC = false, nil
			if analysing {
				c.Emit(PhaseHolding, "the hold lasts until the analysis ends")
			}
		case <-analysed:
			analysing, analysed = false, nil
			if c.Analysis.Outcome != storage.AnalysisPassed {
				close(until)
				return
			}
		case <-ticker.C():
			c.Emit(PhaseHolding, fmt.Sprintf("holding %s of %s", c.Clock.Since(c.phaseStart).Round(time.Second), c.Opts.Hold))
		}
		if !holding && !analysing {
			close(until)
			return
		}
	}
}

// gateMessage says how a gate that refused ended.
func gateMessage(g *storage.GateResult) string {
	if g.TimedOut {
		return fmt.Sprintf("the canary gate %q did not finish within its timeout (%.0fs)", g.Command, g.DurationSeconds)
	}
	return fmt.Sprintf("the canary gate %q exited %d", g.Command, g.ExitCode)
}

// gateFailure is the diagnosis of a gate that refused the canary.
func gateFailure(g *storage.GateResult) *rollout.Diagnosis {
	f := &rollout.Diagnosis{Reason: "CanaryGateFailed", Verdict: "CanaryGateFailed", Cause: "unknown", Message: gateMessage(g), LogTail: g.OutputTail,
		ExitCode: int32(g.ExitCode)}
	if g.TimedOut {
		f.Reason, f.Verdict = "CanaryGateTimeout", "CanaryGateTimeout"
		f.Hints = []string{"raise --canary-gate-timeout, or make the gate command finish sooner"}
	}
	if len(g.OutputTail) > 0 {
		f.Evidence = g.OutputTail[len(g.OutputTail)-1]
	}
	return f
}
