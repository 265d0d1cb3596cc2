// Tests of what keeps a big rollout's evaluations cheap: the image events kept
// by the events' handler, and what ends the pause between evaluations.

package wait

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
)

// TestEventHandlerKeepsImageEvents checks that the events' handler keeps
// the image events of pods (those listed before the wait too), and that
// the phase Pulling reads them as pullingPods reads every event: a pod's
// latest image event is Pulling.
func TestEventHandlerKeepsImageEvents(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	r := &rolloutRun{kick: make(chan struct{}, 1)}
	nw := &nsWatch{}
	h := r.eventHandler(nw).(cache.ResourceEventHandlerDetailedFuncs)

	pullA := testEvent("e1", "Pod", "a", "", "Normal", "Pulling", `Pulling image "vllm/vllm-openai:v0.11.0"`, at(1))
	pullB := testEvent("e2", "Pod", "b", "", "Normal", "Pulling", `Pulling image "vllm/vllm-openai:v0.11.0"`, at(1))
	pulledB := testEvent("e3", "Pod", "b", "", "Normal", "Pulled", `Successfully pulled image "vllm/vllm-openai:v0.11.0"`, at(2))
	scheduled := testEvent("e4", "Pod", "c", "", "Normal", "Scheduled", "Successfully assigned llm/c to gpu-node-1", at(1))
	h.AddFunc(pullA, true)
	h.AddFunc(scheduled, true)
	h.AddFunc(pullB, false)
	assert.Equal(t, map[string]bool{"a": true, "b": true}, nw.pulling())

	h.AddFunc(pulledB, false)
	assert.Equal(t, map[string]bool{"a": true}, nw.pulling())
	assert.Len(t, nw.images, 3, "only image events are kept")

	// A pull of b again (the event repeated, later) makes it Pulling.
	again := pullB.DeepCopy()
	again.Count, again.LastTimestamp.Time = 2, at(3)
	h.UpdateFunc(pullB, again)
	assert.Equal(t, map[string]bool{"a": true, "b": true}, nw.pulling())

	// Deleted events, a tombstone's too, are forgotten.
	h.DeleteFunc(cache.DeletedFinalStateUnknown{Key: ns + "/e2", Obj: again})
	h.DeleteFunc(pullA)
	assert.Empty(t, nw.pulling())
	assert.Len(t, nw.images, 1)
}

// syncedRegistration is a handler registration that has synced.
type syncedRegistration struct {
	cache.ResourceEventHandlerRegistration
}

func (syncedRegistration) HasSynced() bool { return true }

// TestDeploymentTurned checks what ends the pause between a big rollout's
// evaluations early: its Deployment rolled out, or exceeded its progress
// deadline; not a Deployment still progressing, nor one already seen
// rolled out.
func TestDeploymentTurned(t *testing.T) {
	d := testDeployment("vllm/vllm-openai:v0.11.0")
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &appsv1.Deployment{}, 0, cache.Indexers{})
	dw := &deployWatch{rolloutState: rolloutState{watchBase: watchBase{namespace: ns, name: d.Name, self: &informer{inf: inf, reg: syncedRegistration{}}}}}
	r := &rolloutRun{deps: []*deployWatch{dw}}
	assert.False(t, r.anyTurned(), "no Deployment yet")

	assert.NoError(t, inf.GetStore().Add(d))
	assert.False(t, r.anyTurned(), "mid-rollout")

	done := d.DeepCopy()
	done.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	assert.NoError(t, inf.GetStore().Update(done))
	assert.True(t, r.anyTurned(), "rolled out")
	dw.done = true
	assert.False(t, r.anyTurned(), "already seen rolled out")

	dw.done = false
	failed := d.DeepCopy()
	failed.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: reasonProgressDeadline}}
	assert.NoError(t, inf.GetStore().Update(failed))
	assert.True(t, r.anyTurned(), "progress deadline exceeded")
}

// TestPodTrouble checks what of a pod may be a verdict, and so shortens
// the pause between a big rollout's evaluations: nothing for the routine
// states of a healthy rollout, a description that changes with each new
// trouble otherwise.
func TestPodTrouble(t *testing.T) {
	exited := func(code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("Error", code, "sim://c/1")}}
	}
	initDone := podWith(running("vllm", 0))
	initDone.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "fetch", State: corev1.ContainerState{Terminated: terminated("Completed", 0, "sim://i/1")}}}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		trouble bool
	}{
		{"running", podWith(running("vllm", 0)), false},
		{"creating", podWith(waiting("vllm", "ContainerCreating", 0, nil)), false},
		{"initializing", podWith(waiting("vllm", "PodInitializing", 0, nil)), false},
		{"an init container done", initDone, false},
		{"no status yet", podWith(), false},
		{"exited with an error", podWith(exited(1)), true},
		{"OOMKilled", podWith(corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated(reasonOOMKilled, 0, "sim://c/1")}}), true},
		{"crash loop", podWith(crashLoopStatus(1)), true},
		{"image pull", podWith(waiting("vllm", "ErrImagePull", 0, nil)), true},
		{"config error", podWith(waiting("vllm", "CreateContainerConfigError", 0, nil)), true},
		{"running after a restart", podWith(running("vllm", 1)), true},
		{"unschedulable", unschedulablePod(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.trouble, podTrouble(tc.pod) != "", "podTrouble = %q", podTrouble(tc.pod))
		})
	}
	assert.NotEqual(t, podTrouble(podWith(crashLoopStatus(1))), podTrouble(podWith(crashLoopStatus(2))), "each restart is news")
	assert.NotEqual(t, podTrouble(podWith(exited(1))), podTrouble(podWith(crashLoopStatus(1))), "each state is news")
}

// TestPodHandlerRaisesTheAlarm checks that the pods' handler raises the
// alarm when a pod's trouble is new, not for routine updates nor for an
// update that repeats the trouble already seen.
func TestPodHandlerRaisesTheAlarm(t *testing.T) {
	r := &rolloutRun{kick: make(chan struct{}, 1), alarm: make(chan struct{}, 1), obs: map[types.UID]int{}}
	h := r.podHandler()
	raised := func() bool {
		select {
		case <-r.alarm:
			return true
		default:
			return false
		}
	}
	version := func(p *corev1.Pod, rv string) *corev1.Pod {
		p.ResourceVersion = rv
		return p
	}
	creating := version(podWith(waiting("vllm", "ContainerCreating", 0, nil)), "1")
	h.AddFunc(creating)
	assert.False(t, raised(), "a pod being created")
	up := version(podWith(running("vllm", 0)), "2")
	h.UpdateFunc(creating, up)
	assert.False(t, raised(), "a pod that started")
	exited := version(podWith(corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("Error", 1, "sim://c/1")}}), "3")
	h.UpdateFunc(up, exited)
	assert.True(t, raised(), "its container exited with an error")
	loop := version(podWith(crashLoopStatus(1)), "4")
	h.UpdateFunc(exited, loop)
	assert.True(t, raised(), "it restarted")
	again := version(podWith(crashLoopStatus(1)), "5")
	again.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	h.UpdateFunc(loop, again)
	assert.False(t, raised(), "the same trouble again")
	assert.Equal(t, 5, r.obs["pod-a"], "every version observed")
	pending := unschedulablePod()
	pending.UID = "pod-b"
	h.AddFunc(version(pending, "6"))
	assert.True(t, raised(), "a new pod that cannot be scheduled")
}

// TestSettleAlarm checks the pause after a costly evaluation: routine
// changes wait for the quiet pause; an alarm ends it once the alarmed
// pause has passed since it began, at once when it has already.
func TestSettleAlarm(t *testing.T) {
	p := pause{quiet: 2 * time.Second, alarmed: 200 * time.Millisecond}
	settling := func(r *rolloutRun) chan bool {
		done := make(chan bool, 1)
		go func() { done <- r.settle(context.Background(), &loop{}, p) }()
		return done
	}
	newRun := func() (*rolloutRun, *testingclock.FakeClock) {
		clk := testingclock.NewFakeClock(t0)
		return &rolloutRun{clk: clk, turned: make(chan struct{}, 1), alarm: make(chan struct{}, 1)}, clk
	}
	waiters := func(clk *testingclock.FakeClock, n int) {
		require.Eventually(t, func() bool { return clk.Waiters() == n }, 5*time.Second, time.Millisecond)
	}

	t.Run("quiet", func(t *testing.T) {
		r, clk := newRun()
		done := settling(r)
		waiters(clk, 1)
		clk.Step(time.Second)
		assert.Empty(t, done, "still pausing")
		clk.Step(time.Second)
		assert.False(t, <-done)
	})
	t.Run("alarm early in the pause", func(t *testing.T) {
		r, clk := newRun()
		done := settling(r)
		waiters(clk, 1)
		clk.Step(50 * time.Millisecond)
		r.raise()
		waiters(clk, 2) // the alarmed pause's timer, for what is left of it
		clk.Step(100 * time.Millisecond)
		assert.Empty(t, done, "the alarmed pause has not passed")
		clk.Step(50 * time.Millisecond)
		assert.False(t, <-done)
	})
	t.Run("alarm late in the pause", func(t *testing.T) {
		r, clk := newRun()
		done := settling(r)
		waiters(clk, 1)
		clk.Step(time.Second)
		r.raise()
		assert.False(t, <-done, "ended at once")
	})
	t.Run("canceled", func(t *testing.T) {
		r, _ := newRun()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		assert.True(t, r.settle(ctx, &loop{}, p))
	})
	// The timeout and a fatal error end the pause and the loop at once:
	// a pause that began as the timeout passed does not hold it up, and
	// under a clock that stands still (the tests') never ends otherwise.
	t.Run("timeout", func(t *testing.T) {
		r, clk := newRun()
		timeout := make(chan time.Time, 1)
		l := &loop{timeout: timeout}
		done := make(chan bool, 1)
		go func() { done <- r.settle(context.Background(), l, p) }()
		waiters(clk, 1)
		timeout <- clk.Now()
		assert.True(t, <-done)
		assert.True(t, l.timedOut)
	})
	t.Run("fatal", func(t *testing.T) {
		r, clk := newRun()
		r.fatal = make(chan error, 1)
		l := &loop{}
		done := make(chan bool, 1)
		go func() { done <- r.settle(context.Background(), l, p) }()
		waiters(clk, 1)
		r.fatal <- errors.New("watch pods: forbidden")
		assert.True(t, <-done)
		assert.EqualError(t, l.fatal, "watch pods: forbidden")
	})
}
