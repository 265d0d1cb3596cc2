package wait

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

// unobserved makes the Deployment of the harness one generation ahead of
// what its controller observed: as applied while kube-controller-manager
// is stopped.
func unobserved(t *testing.T) func(c *fake.Clientset) {
	return func(c *fake.Clientset) {
		d, err := c.AppsV1().Deployments(ns).Get(context.Background(), "chat", metav1.GetOptions{})
		require.NoError(t, err)
		d.Generation = 3
		_, err = c.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

// TestControllerStalledDeployment: a Deployment whose controller does not
// observe its generation fails with ControllerStalled once
// ControllerStallTimeout has passed by the watcher's clock, naming the
// Deployment and the controller, long before the wait's timeout.
func TestControllerStalledDeployment(t *testing.T) {
	h := startHarness(t, harnessOptions{
		rollout: RolloutOptions{ControllerStallTimeout: 10 * time.Second},
		wait:    Options{Timeout: 10 * time.Minute},
		setup:   unobserved(t),
	})
	h.awaitIdleAfter("the unobserved Deployment", func(e rollout.Event) bool {
		return e.Rollout != nil && e.Message == "waiting for the deployment spec update to be observed"
	})
	require.Eventually(t, h.clock.HasWaiters, 5*time.Second, time.Millisecond, "the stall recheck is armed")
	h.clock.Step(9 * time.Second)
	h.awaitIdleAfter("the recheck before the stall timeout", func(e rollout.Event) bool { return true })
	require.True(t, h.running(), "not stalled before ControllerStallTimeout; events:\n%s", h.eventLines())
	h.clock.Step(2 * time.Second)
	res, err := h.result()
	d := requireFailure(t, res, err, rollout.VerdictControllerStalled)
	assert.Equal(t, "ControllerStalled", d.Reason)
	assert.Contains(t, d.Message, "Deployment "+ns+"/chat: its controller has not observed generation 3 (status.observedGeneration 2)")
	assert.Contains(t, d.Message, "its controller is not acting (is kube-controller-manager running?)")
	assert.Contains(t, err.Error(), "is kube-controller-manager running?")
	last := h.eventsCopy()[len(h.eventsCopy())-1]
	require.NotNil(t, last.Rollout)
	assert.Equal(t, rollout.VerdictControllerStalled, last.Rollout.Verdict)
}

// TestControllerActingIsNotStalled: a controller that observes the
// generation within the budget ends the stall timer: the wait goes on.
func TestControllerActingIsNotStalled(t *testing.T) {
	h := startHarness(t, harnessOptions{
		rollout: RolloutOptions{ControllerStallTimeout: 10 * time.Second},
		setup:   unobserved(t),
	})
	h.awaitIdleAfter("the unobserved Deployment", func(e rollout.Event) bool {
		return e.Rollout != nil && e.Message == "waiting for the deployment spec update to be observed"
	})
	h.clock.Step(8 * time.Second)
	observed := func(e rollout.Event) bool {
		return e.Rollout != nil && e.Message == "1 out of 2 new replicas have been updated"
	}
	h.updateDeployment(func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 3 })
	// The loop may pause on the fake clock after a change (see settle):
	// nudge it until it reports the observed Deployment.
	require.Eventually(t, func() bool {
		h.clock.Step(10 * time.Millisecond)
		return slices.ContainsFunc(h.eventsCopy(), observed)
	}, 10*time.Second, 5*time.Millisecond, "events:\n%s", h.eventLines())
	h.clock.Step(time.Minute) // past any stall budget, and any pause
	h.awaitIdleAfter("the observed Deployment", observed)
	assert.True(t, h.running(), "events:\n%s", h.eventLines())
}

// TestControllerStalledJob: a Job its controller never starts (no
// startTime, no condition) fails with ControllerStalled.
func TestControllerStalledJob(t *testing.T) {
	job := testJob(corev1.RestartPolicyNever)
	job.Status = batchv1.JobStatus{}
	h := startRunHarnessWith(t, RolloutOptions{ControllerStallTimeout: 10 * time.Second}, job, nil)
	h.awaitIdleAfter("the Job", func(e rollout.Event) bool { return e.Object.Kind == "Job" })
	require.Eventually(t, h.clock.HasWaiters, 5*time.Second, time.Millisecond, "the stall recheck is armed")
	h.clock.Step(11 * time.Second)
	res, err := h.result()
	require.Error(t, err)
	require.NotNil(t, res.Diagnosis)
	assert.Equal(t, rollout.VerdictControllerStalled, res.Diagnosis.Verdict)
	assert.Equal(t, "job.batch/migrate", res.Diagnosis.Object)
	assert.Contains(t, res.Diagnosis.Message, "Job "+ns+"/migrate: its controller has not started it")
}

// TestStallNotCountedWhileUnreachable: time while a watch cannot reach the
// API server does not count: the budget starts again after it.
func TestStallNotCountedWhileUnreachable(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	r := &rolloutRun{o: RolloutOptions{ControllerStallTimeout: 10 * time.Second}.withDefaults(), clk: clk}
	var st stallTimer
	after, again := r.stalled(&st, 2, true, clk.Now())
	assert.Zero(t, after)
	assert.Equal(t, t0.Add(10*time.Second), again)

	clk.Step(8 * time.Second)
	r.noteUnreachable() // the API server went away, and came back
	clk.Step(3 * time.Second)
	after, again = r.stalled(&st, 2, true, clk.Now())
	assert.Zero(t, after, "the outage restarted the budget")
	assert.Equal(t, t0.Add(18*time.Second), again)

	clk.Step(7 * time.Second)
	after, _ = r.stalled(&st, 2, true, clk.Now())
	assert.Equal(t, 10*time.Second, after)

	after, again = r.stalled(&st, 2, false, clk.Now())
	assert.Zero(t, after, "observed: not stalled")
	assert.True(t, again.IsZero())
}
