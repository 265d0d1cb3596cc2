package wait

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestEventsFieldSelector: the events' watch leaves out the routine Normal
// events (one or more per pod) and keeps every event a verdict, a phase or
// a cause reads.
func TestEventsFieldSelector(t *testing.T) {
	sel, err := fields.ParseSelector(eventsFieldSelector())
	require.NoError(t, err)
	for _, c := range []struct {
		typ, reason string
		kept        bool
	}{
		{"Normal", "Scheduled", false},
		{"Normal", "Created", false},
		{"Normal", "Started", false},
		{"Normal", "SuccessfulCreate", false},
		{"Normal", "SuccessfulDelete", false},
		{"Normal", "ScalingReplicaSet", false},
		{"Normal", "Pulling", true},
		{"Normal", "Pulled", true},
		{"Normal", "Killing", true},
		{"Normal", reasonRecreateGroup, true},
		{"Warning", "BackOff", true},
		{"Warning", "FailedScheduling", true},
		{"Warning", reasonFailedCreate, true},
	} {
		t.Run(c.typ+" "+c.reason, func(t *testing.T) {
			assert.Equal(t, c.kept, sel.Matches(fields.Set{"type": c.typ, "reason": c.reason}))
		})
	}
}

// TestEventsWatchAndDiagnosisEvents: the watcher's events informer sends
// the selector, and a failure's diagnosis lists the failed pod's own
// events, the routine ones included (the watch did not get them).
func TestEventsWatchAndDiagnosisEvents(t *testing.T) {
	var listed []string // field selectors of the events' lists
	h := startHarness(t, harnessOptions{setup: func(c *fake.Clientset) {
		c.PrependReactor("list", "events", func(a k8stesting.Action) (bool, runtime.Object, error) {
			listed = append(listed, a.(k8stesting.ListActionImpl).GetListRestrictions().Fields.String())
			return false, nil, nil
		})
	}})
	p := testPod(h.newRS, "a", running("vllm", 0))
	h.createPod(p)
	h.progressed()
	h.createEvent(testEvent("ev0", "Pod", p.Name, p.UID, "Normal", "Scheduled", "Successfully assigned ns/chat-new-a to gpu-node-1", t0))
	p.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoopStatus(2)}
	h.updatePod(p)
	res, err := h.result()
	require.Error(t, err)
	require.NotNil(t, res.Diagnosis)
	assert.Contains(t, res.Diagnosis.Events, "Normal Scheduled: Successfully assigned ns/chat-new-a to gpu-node-1")

	var watched []string
	for _, a := range h.client.Actions() {
		if w, ok := a.(k8stesting.WatchActionImpl); ok && a.GetResource().Resource == "events" {
			watched = append(watched, w.GetWatchRestrictions().Fields.String())
		}
	}
	require.NotEmpty(t, watched)
	for _, s := range watched {
		assert.Equal(t, eventsFieldSelector(), s)
	}
	assert.Contains(t, listed, eventsFieldSelector(), "the informer's list")
	assert.Contains(t, listed, "involvedObject.name=chat-new-a", "the diagnosis' list of the pod's events")
	assert.Contains(t, eventsFieldSelector(), "reason!=Scheduled")
}
