package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func stsFixture(update string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "chat-g0", Namespace: "ml", Generation: 3, UID: "sts-uid", ResourceVersion: "10"},
		Spec:       appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "chat", "vllmctl.io/group": "0"}}},
		Status:     appsv1.StatefulSetStatus{ObservedGeneration: 3, UpdateRevision: update, CurrentRevision: "chat-g0-bad"},
	}
}

func stsPod(name, owner, revision string, ready bool, deleting bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID("uid-" + name),
		Labels: map[string]string{"app": "chat", "vllmctl.io/group": "0", ControllerRevisionHashLabel: revision}}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: owner, UID: "sts-uid", Controller: ptrTo(true)}}
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

func ptrTo[T any](v T) *T { return &v }

func TestStuckPodsOrder(t *testing.T) {
	sts := stsFixture("chat-g0-good")
	pods := []corev1.Pod{
		stsPod("chat-g0-0", "chat-g0", "chat-g0-bad", false, false),
		stsPod("chat-g0-10", "chat-g0", "chat-g0-bad", false, false), // ordinal 10 sorts after 2 numerically
		stsPod("chat-g0-2", "chat-g0", "chat-g0-bad", false, false),
		stsPod("chat-g0-1", "chat-g0", "chat-g0-good", false, false), // already restored
		stsPod("chat-g0-3", "chat-g0", "chat-g0-bad", true, false),   // Ready: the controller's own rolling update
		stsPod("chat-g0-4", "chat-g0", "chat-g0-bad", false, true),   // being deleted
		stsPod("chat-g0-5", "other", "chat-g0-bad", false, false),    // another controller's
		stsPod("chat-g0-6", "", "chat-g0-bad", false, false),         // no controller
	}
	pods[1].Labels[podIndexLabel] = "10"
	var got []string
	for _, p := range StuckPods(sts, pods) {
		got = append(got, p.Name)
	}
	assert.Equal(t, []string{"chat-g0-10", "chat-g0-2", "chat-g0-0"}, got)
}

func TestRescueStatefulSet(t *testing.T) {
	sts := stsFixture("chat-g0-good")
	p0 := stsPod("chat-g0-0", "chat-g0", "chat-g0-bad", false, false)
	p1 := stsPod("chat-g0-1", "chat-g0", "chat-g0-bad", false, false)
	client := fake.NewClientset(sts, &p0, &p1)
	var mu sync.Mutex
	var order []string
	refusals := 1 // the budget refuses the first eviction once
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		mu.Lock()
		defer mu.Unlock()
		if refusals > 0 {
			refusals--
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		require.NotNil(t, ev.DeleteOptions)
		require.Equal(t, types.UID("uid-"+ev.Name), *ev.DeleteOptions.Preconditions.UID)
		order = append(order, ev.Name)
		return true, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Now())
	go func() { // let the refused eviction's retry go on
		for !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
		}
		clk.Step(evictRetry)
	}()
	var events []string
	evicted, err := RescueStatefulSet(context.Background(), client, clk, "ml", "chat-g0", func(e RescueEvent) {
		events = append(events, e.Pod+" "+e.Action)
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"chat-g0-1", "chat-g0-0"}, evicted)
	assert.Equal(t, []string{"chat-g0-1", "chat-g0-0"}, order)
	assert.Equal(t, []string{"chat-g0-1 blocked", "chat-g0-1 evicted", "chat-g0-0 evicted"}, events)
}

func TestRescueStatefulSetErrors(t *testing.T) {
	t.Run("forbidden eviction names the pod", func(t *testing.T) {
		sts := stsFixture("chat-g0-good")
		p0 := stsPod("chat-g0-0", "chat-g0", "chat-g0-bad", false, false)
		client := fake.NewClientset(sts, &p0)
		client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods/eviction"), "chat-g0-0", fmt.Errorf("no rights"))
		})
		_, err := RescueStatefulSet(context.Background(), client, clocktesting.NewFakeClock(time.Now()), "ml", "chat-g0", nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "StatefulSet ml/chat-g0: evict pod chat-g0-0 (revision chat-g0-bad)")
		assert.True(t, apierrors.IsForbidden(err))
	})
	t.Run("a pod gone meanwhile is not an error", func(t *testing.T) {
		sts := stsFixture("chat-g0-good")
		p0 := stsPod("chat-g0-0", "chat-g0", "chat-g0-bad", false, false)
		client := fake.NewClientset(sts, &p0)
		client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewNotFound(corev1.Resource("pods"), "chat-g0-0")
		})
		evicted, err := RescueStatefulSet(context.Background(), client, clocktesting.NewFakeClock(time.Now()), "ml", "chat-g0", nil)
		require.NoError(t, err)
		assert.Empty(t, evicted)
	})
	t.Run("a missing StatefulSet", func(t *testing.T) {
		_, err := RescueStatefulSet(context.Background(), fake.NewClientset(), clocktesting.NewFakeClock(time.Now()), "ml", "chat-g0", nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "StatefulSet ml/chat-g0")
	})
}

func TestCurrentControllerRevisions(t *testing.T) {
	sts := stsFixture("chat-g0-5d8f")
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "chat-g0-5d8f", Namespace: "ml",
		Labels: map[string]string{controllerRevisionHashKey: "5d8f"}}, Revision: 4}
	client := fake.NewClientset(sts, cr)
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"name": "chat-g0"}}}
	dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "chat"}}}
	refs, err := CurrentControllerRevisionsFrom(context.Background(), client, []*unstructured.Unstructured{dep, obj}, "ml", nil, Stall{})
	require.NoError(t, err)
	require.Len(t, refs, 1)
	assert.Equal(t, "chat-g0", refs[0].StatefulSet)
	assert.Equal(t, "chat-g0-5d8f", refs[0].Name)
	assert.Equal(t, "5d8f", refs[0].Hash)
	assert.Equal(t, int64(4), refs[0].Revision)

	_, err = CurrentControllerRevisionsFrom(context.Background(), fake.NewClientset(sts), []*unstructured.Unstructured{obj}, "ml", nil, Stall{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ControllerRevision chat-g0-5d8f")
}
