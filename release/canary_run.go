package release

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// canaryHoldTick is how often progress reports the hold while it lasts.
const canaryHoldTick = 15 * time.Second

// errCanaryGate is the error of a canary whose gate refused it.
var errCanaryGate = errors.New("the canary gate refused the new revision")

// canaryRun is the phase machine of one canary: starting (the canary pods
// become Ready), holding (watched for Hold), gate (the gate command runs
// while they are still watched), promoting (the chart's strategy applied
// again), then the usual rollout, which the deploy watches. Each step's
// I/O is a function, so the machine runs on a fake clock in tests.
type canaryRun struct {
	clk  clock.WithTicker
	opts CanaryOptions
	// pods is how many canary pods the targets hold in all.
	pods   int32
	report *storage.CanaryReport
	tick   time.Duration
	// emit reports a phase's progress.
	emit func(phase, msg string)
	// watch waits, with every verdict applied to the canary pods, until
	// they are Ready and until (when not nil) is closed.
	watch func(ctx context.Context, until <-chan struct{}) (wait.Result, error)
	// gate runs the gate command once for the Ready canary pods.
	gate func(ctx context.Context, pods []string) (*storage.GateResult, error)
	// promote applies the chart's strategy again.
	promote func(ctx context.Context) error
	// analyze, when set, runs the canary analysis on the Ready canary pods
	// during the hold, filling report; the hold then lasts until both the
	// hold and the analysis have ended (or the analysis refused).
	analyze func(ctx context.Context, pods []string, report *storage.AnalysisReport) error
	// analysis is the analysis' report once the hold began (nil: none).
	analysis *storage.AnalysisReport
	// name and revision name the release in the analysis' errors.
	name     string
	revision int
	// serve, when set, runs the serve check on the Ready canary pods
	// (within serveTimeout), before the hold; served is its report.
	serve        func(ctx context.Context, pods []string) (*rollout.ServeReport, *rollout.Diagnosis, error)
	serveTimeout time.Duration
	served       *rollout.ServeReport

	phaseStart time.Time
	// held is how long holding and the gate took: not counted against the
	// deploy's --timeout.
	held time.Duration
}

// newCanaryReport starts the report of a canary.
func newCanaryReport(o CanaryOptions) *storage.CanaryReport {
	return &storage.CanaryReport{Count: o.Count.String(), Hold: o.Hold.String(), Pods: []string{}, Phases: []storage.CanaryPhase{}}
}

// begin starts phase name.
func (c *canaryRun) begin(name, msg string) {
	c.phaseStart = c.clk.Now()
	c.report.Phases = append(c.report.Phases, storage.CanaryPhase{Name: name, Start: c.phaseStart.UTC()})
	c.emit(name, msg)
}

// end ends the current phase and returns how long it took.
func (c *canaryRun) end() time.Duration {
	d := c.clk.Since(c.phaseStart)
	if n := len(c.report.Phases); n > 0 {
		c.report.Phases[n-1].DurationSeconds = d.Seconds()
	}
	return d
}

// run runs the canary up to and including promotion. On a failure it
// returns the watch's result and error, and the failure when the machine
// itself diagnosed it (a gate that refused); the report's outcome says
// failed or interrupted.
func (c *canaryRun) run(ctx context.Context) (wait.Result, *rollout.Diagnosis, error) {
	c.begin(CanaryStarting, fmt.Sprintf("waiting for %d canary pod(s) to be Ready", c.pods))
	res, err := c.watch(ctx, nil)
	c.end()
	if err != nil {
		return res, nil, c.failed(ctx, err)
	}
	c.report.Pods = append([]string{}, res.CanaryPods...)

	if c.serve != nil {
		if res, f, err := c.checkServing(ctx); err != nil {
			return res, f, err
		}
	}

	if c.opts.Hold > 0 || c.analyze != nil {
		msg := fmt.Sprintf("holding %s: %s", c.opts.Hold, joinPods(c.report.Pods))
		if c.analyze != nil {
			msg += "; analysing them"
		}
		c.begin(CanaryHolding, msg)
		until := make(chan struct{})
		hctx, stop := context.WithCancel(ctx)
		held := make(chan struct{})
		var analysed chan struct{}
		var aerr error
		if c.analyze != nil {
			analysed = make(chan struct{})
			report, pods := &storage.AnalysisReport{Outcome: storage.AnalysisRunning, Measurements: []storage.AnalysisMeasurement{}}, c.report.Pods
			c.analysis = report
			go func() { defer close(analysed); aerr = c.analyze(hctx, pods, report) }()
		}
		go func() { defer close(held); c.hold(hctx, until, analysed) }()
		res, err = c.watch(ctx, until)
		stop()
		<-held
		if analysed != nil {
			<-analysed
			if c.analysis.Outcome == storage.AnalysisRunning {
				c.analysis.Outcome, c.analysis.Reason = storage.AnalysisStopped, "the canary hold ended before the analysis did"
			}
		}
		c.held += c.end()
		if err != nil {
			return res, nil, c.failed(ctx, err)
		}
		if aerr != nil {
			return res, nil, c.failed(ctx, fmt.Errorf("canary analysis: %w", aerr))
		}
		if c.analysis != nil {
			if f, err := analysisVerdict("the canary analysis", c.name, c.revision, c.analysis); err != nil {
				c.report.Outcome, c.report.Reason = storage.CanaryFailed, f.Message
				return res, f, err
			}
		}
	}

	if c.opts.Gate != "" {
		c.begin(CanaryGate, "running the gate: "+c.opts.Gate)
		var gres *storage.GateResult
		var gerr error
		pods := c.report.Pods
		res, err = c.watchWhile(ctx, func(ctx context.Context) { gres, gerr = c.gate(ctx, pods) })
		c.held += c.end()
		c.report.Gate = gres
		switch {
		case err != nil:
			return res, nil, c.failed(ctx, err)
		case gerr != nil:
			return res, nil, c.failed(ctx, gerr)
		case !gres.Passed():
			c.report.Outcome, c.report.Reason = storage.CanaryFailed, gateMessage(gres)
			return res, gateFailure(gres), fmt.Errorf("%w: %s", errCanaryGate, gateMessage(gres))
		}
		c.emit(CanaryGate, fmt.Sprintf("passed in %.1fs", gres.DurationSeconds))
	}

	c.begin(CanaryPromoting, "applying the chart's strategy")
	err = c.promote(ctx)
	c.end()
	if err != nil {
		return res, nil, c.failed(ctx, err)
	}
	c.report.Outcome = storage.CanaryPromoted
	c.begin(CanaryRollout, "the rollout continues with the chart's strategy")
	return res, nil, nil
}

// checkServing runs the serve check on the canary pods while they are
// still watched; a pod that does not serve fails the canary
// (VerdictNotServing) before the hold and the gate.
func (c *canaryRun) checkServing(ctx context.Context) (wait.Result, *rollout.Diagnosis, error) {
	c.begin(CanaryServeCheck, "checking that the canary pods serve: "+joinPods(c.report.Pods))
	var f *rollout.Diagnosis
	var serr error
	pods := c.report.Pods
	res, err := c.watchWhile(ctx, func(ctx context.Context) { c.served, f, serr = c.serve(ctx, pods) })
	c.held += c.end()
	switch {
	case err != nil:
		return res, nil, c.failed(ctx, err)
	case f != nil:
		c.report.Outcome, c.report.Reason = storage.CanaryFailed, f.Message
		if ctx.Err() != nil {
			c.report.Outcome = storage.CanaryInterrupted
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
func (c *canaryRun) watchWhile(ctx context.Context, do func(ctx context.Context)) (wait.Result, error) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		do(dctx)
	}()
	res, err := c.watch(ctx, done)
	cancel()
	<-done
	return res, err
}

// finish ends the last phase (the rollout after promotion) of a canary.
func (c *canaryRun) finish() { c.end() }

// failed records how the canary ended and returns err.
func (c *canaryRun) failed(ctx context.Context, err error) error {
	c.report.Outcome, c.report.Reason = storage.CanaryFailed, err.Error()
	if ctx.Err() != nil {
		c.report.Outcome = storage.CanaryInterrupted
	}
	return err
}

// hold closes until when the hold has passed and the analysis (when
// analysed is not nil) has ended, or at once when the analysis ended
// with anything but passed; it reports progress every tick, and returns
// when ctx ends.
func (c *canaryRun) hold(ctx context.Context, until chan<- struct{}, analysed <-chan struct{}) {
	var timerC <-chan time.Time
	if c.opts.Hold > 0 {
		timer := c.clk.NewTimer(c.opts.Hold)
		defer timer.Stop()
		timerC = timer.C()
	}
	holding, analysing := timerC != nil, analysed != nil
	tick := c.tick
	if tick <= 0 {
		tick = canaryHoldTick
	}
	ticker := c.clk.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timerC:
			c.emit(CanaryHolding, fmt.Sprintf("held %s", c.opts.Hold))
			holding, timerC = false, nil
			if analysing {
				c.emit(CanaryHolding, "the hold lasts until the analysis ends")
			}
		case <-analysed:
			analysing, analysed = false, nil
			if c.analysis.Outcome != storage.AnalysisPassed {
				close(until)
				return
			}
		case <-ticker.C():
			c.emit(CanaryHolding, fmt.Sprintf("holding %s of %s", c.clk.Since(c.phaseStart).Round(time.Second), c.opts.Hold))
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

func joinPods(pods []string) string {
	if len(pods) == 0 {
		return "no pods"
	}
	return strings.Join(pods, ", ")
}
