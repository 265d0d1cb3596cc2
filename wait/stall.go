// VerdictControllerStalled: a controller that does not act on the objects
// it owns (kube-controller-manager stopped, or the LeaderWorkerSet
// controller), found by the time its object goes unobserved while the API
// server answers.

package wait

import (
	"fmt"
	"time"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// reasonControllerStalled is the Diagnosis reason of VerdictControllerStalled.
const reasonControllerStalled = "ControllerStalled"

// ControllerStalledError says that the controller of Object has not acted
// on it for After: it has not observed generation Generation (its status
// says Observed), or, for a Job, has not started it. The API server
// answered meanwhile, so the controller itself is not acting.
type ControllerStalledError struct {
	// Object names the object: "Deployment llm/chat".
	Object string
	// Ref names it as kubectl does, "deployment/chat", and Namespace is
	// its namespace: the diagnosis' Object and Namespace.
	Ref, Namespace string
	// Controller names the controller expected to act: kube-controller-manager
	// or the LeaderWorkerSet controller.
	Controller string
	// Generation is the object's generation, Observed the one its status
	// reports observed (-1: the object has none, a Job).
	Generation, Observed int64
	// After is how long the watcher saw it so, the API server reachable.
	After time.Duration
}

func (e *ControllerStalledError) Error() string {
	return fmt.Sprintf("%s: %s", e.Object, e.message())
}

func (e *ControllerStalledError) message() string {
	what := fmt.Sprintf("its controller has not observed generation %d (status.observedGeneration %d)", e.Generation, e.Observed)
	if e.Observed < 0 {
		what = "its controller has not started it (no status.startTime)"
	}
	controller := e.Controller
	if controller == "" {
		controller = "kube-controller-manager"
	}
	return fmt.Sprintf("%s in %s while the API server answered: its controller is not acting (is %s running?)",
		what, e.After.Round(time.Second), controller)
}

// Diagnosis is the failure diagnosis of the stall: verdict
// ControllerStalled, naming the object.
func (e *ControllerStalledError) Diagnosis() *rollout.Diagnosis {
	controller := e.Controller
	if controller == "" {
		controller = "kube-controller-manager"
	}
	return &rollout.Diagnosis{
		Verdict: rollout.VerdictControllerStalled, Reason: reasonControllerStalled, Cause: vllmcause.CauseUnknown,
		Object: e.Ref, Namespace: e.Namespace, Message: e.Error(),
		LogNote: "its controller created no pod: there are no logs",
		Hints: []string{
			fmt.Sprintf("check that %s runs and holds its leader lease: kubectl -n kube-system get pods,leases", controller),
			fmt.Sprintf("kubectl describe %s%s shows its status and events", e.Ref, nsFlag(e.Namespace)),
		},
	}
}

// stallTimer measures how long one object has gone without its controller
// acting on it.
type stallTimer struct {
	gen   int64
	since time.Time
}

// stalled reports, for an object at generation gen whose controller has
// (pending false) or has not (pending true) acted on it, how long the
// controller has not acted when that reached RolloutOptions.ControllerStallTimeout
// (0: not yet, or acting), and else when to look again (zero: no need).
// The time counts from when the watcher first saw the generation pending,
// or from the last time a watch could not reach the API server, whichever
// is later.
func (r *rolloutRun) stalled(t *stallTimer, gen int64, pending bool, now time.Time) (after time.Duration, recheck time.Time) {
	if !pending {
		*t = stallTimer{}
		return 0, time.Time{}
	}
	if t.since.IsZero() || t.gen != gen {
		*t = stallTimer{gen: gen, since: now}
	}
	start := t.since
	r.mu.Lock()
	if r.unreachable.After(start) {
		start = r.unreachable
	}
	r.mu.Unlock()
	deadline := start.Add(r.o.ControllerStallTimeout)
	if now.Before(deadline) {
		return 0, deadline
	}
	return now.Sub(start), time.Time{}
}

// noteUnreachable records that a watch could not reach the API server:
// the stall budgets start again from now.
func (r *rolloutRun) noteUnreachable() {
	r.mu.Lock()
	r.unreachable = r.clk.Now()
	r.mu.Unlock()
}

// stallFailure is the failure of a stalled controller.
func stallFailure(e *ControllerStalledError) *failure {
	return &failure{verdict: rollout.VerdictControllerStalled, reason: reasonControllerStalled, message: e.message(), stalled: e}
}
