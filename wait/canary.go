// CanaryGoal: a RolloutWatcher's wait as one phase of a canary rollout
// (the canary pods starting, held, judged by a gate), ending at the goal
// instead of the full rollout.

package wait

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// CanaryGoal makes a [RolloutWatcher]'s Wait one phase of a canary
// rollout. Every verdict applies to the pods of each Deployment's new
// ReplicaSet (the canary pods), and besides them a container of a canary
// pod that restarted more than MaxRestarts times fails the wait
// (VerdictCanaryRestarted). The wait ends with OutcomeCurrent, without
// waiting for the rollout to complete, once every Deployment has at least
// Pods["namespace/name"] Ready new pods and Until (when not nil) is closed.
// A StatefulSet (a multi-node release's engine group held as a canary)
// reaches the goal once it rolled out, and its pods are judged likewise
// while the wait holds. Other objects are not waited for; the Result's
// CanaryPods names the Ready canary pods.
type CanaryGoal struct {
	// Pods is how many Ready new pods each Deployment needs, by
	// "namespace/name" (at least 1 when missing).
	Pods map[string]int32
	// MaxRestarts is how many restarts a canary container may have.
	MaxRestarts int32
	// Until, when not nil, holds the wait (still judging the canary pods)
	// until it is closed.
	Until <-chan struct{}
}

// want is how many Ready new pods dw needs.
func (g *CanaryGoal) want(dw *deployWatch) int32 {
	if n := g.Pods[dw.namespace+"/"+dw.name]; n > 0 {
		return n
	}
	return 1
}

// canaryRestart returns the failure of a canary container that restarted
// more than the goal allows.
func (g *CanaryGoal) canaryRestart(pod *corev1.Pod) *podFinding {
	statuses := append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if cs.RestartCount <= g.MaxRestarts {
			continue
		}
		f := &podFinding{Verdict: rollout.VerdictCanaryRestarted, Reason: "Restarted", Pod: pod, Container: cs.Name, RestartCount: cs.RestartCount,
			restarted: true, ran: true, crashed: true,
			Message: fmt.Sprintf("canary container %s restarted %d times (--canary-max-restarts %d)", cs.Name, cs.RestartCount, g.MaxRestarts)}
		if t := cs.LastTerminationState.Terminated; t != nil {
			f.ExitCode = t.ExitCode
			if t.Reason != "" {
				f.Reason = t.Reason
			}
			if m := vllmcause.TerminationMessage(t); m != "" {
				f.Message += ": " + m
			}
		}
		return f
	}
	return nil
}

// canaryReached reports whether every Deployment has its Ready canary pods
// (and records their names in the result).
func (r *rolloutRun) canaryReached() bool {
	g := r.opts.Canary
	var names []string
	ok := true
	for _, dw := range r.deps {
		if int32(len(dw.canaryReady)) < g.want(dw) {
			ok = false
		}
		names = append(names, dw.canaryReady...)
	}
	for _, sw := range r.stss {
		// A StatefulSet (an engine group) is its own canary: reached once
		// it rolled out, every pod of its update revision Ready.
		if !sw.done {
			ok = false
		}
		names = append(names, sw.canaryReady...)
	}
	r.res.CanaryPods = names
	return ok
}
