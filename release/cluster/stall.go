// A controller that does not act: the bound on waiting for it to observe
// an object's generation.

package cluster

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"
)

// Stall bounds how long the discovery of a revision's ReplicaSets and
// ControllerRevisions waits for a controller to observe an object's latest
// generation while the API server answers: past Timeout it fails with a
// *wait.ControllerStalledError (verdict ControllerStalled) rather than
// waiting for the context's deadline. The zero Stall waits for the context
// only.
type Stall struct {
	// Timeout is the budget (0: none); see
	// wait.RolloutOptions.ControllerStallTimeout.
	Timeout time.Duration
	// Clock measures it (default: the wall clock).
	Clock clock.WithTicker
}

// errStalled is the cause with which a stall budget ends its wait.
var errStalled = errors.New("controller stalled")

// stallWatch runs the budget of s over a wait: it returns the wait's
// context, which ends with cause errStalled once s.Timeout has passed
// without a reset, reset (to call when a watch had to be re-established or
// could not be: the API server went away, whose time does not count; the
// budget starts again), elapsed (the time counted when it ended) and stop.
func (s Stall) watch(ctx context.Context) (wctx context.Context, reset func(), elapsed func() time.Duration, stop func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	if s.Timeout <= 0 {
		return wctx, func() {}, func() time.Duration { return 0 }, func() { cancel(nil) }
	}
	clk := s.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	resets := make(chan struct{}, 1)
	done := make(chan struct{})
	var counted time.Duration
	go func() {
		defer close(done)
		t := clk.NewTimer(s.Timeout)
		defer func() { t.Stop() }()
		for {
			select {
			case <-wctx.Done():
				return
			case <-resets:
				t.Stop()
				t = clk.NewTimer(s.Timeout)
			case <-t.C():
				counted = s.Timeout
				cancel(errStalled)
				return
			}
		}
	}()
	reset = func() {
		select {
		case resets <- struct{}{}:
		default:
		}
	}
	stop = func() {
		cancel(nil)
		<-done
	}
	elapsed = func() time.Duration {
		<-done
		return counted
	}
	return wctx, reset, elapsed, stop
}
