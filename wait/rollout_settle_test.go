// Tests of what keeps a big rollout's evaluations cheap: the image events kept
// by the events' handler, and what ends the pause between evaluations.

package wait

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
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
	dw := &deployWatch{namespace: ns, name: d.Name, dep: &informer{inf: inf, reg: syncedRegistration{}}}
	r := &rolloutRun{deps: []*deployWatch{dw}}
	assert.False(t, r.deploymentTurned(), "no Deployment yet")

	assert.NoError(t, inf.GetStore().Add(d))
	assert.False(t, r.deploymentTurned(), "mid-rollout")

	done := d.DeepCopy()
	done.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	assert.NoError(t, inf.GetStore().Update(done))
	assert.True(t, r.deploymentTurned(), "rolled out")
	dw.done = true
	assert.False(t, r.deploymentTurned(), "already seen rolled out")

	dw.done = false
	failed := d.DeepCopy()
	failed.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: reasonProgressDeadline}}
	assert.NoError(t, inf.GetStore().Update(failed))
	assert.True(t, r.deploymentTurned(), "progress deadline exceeded")
}
