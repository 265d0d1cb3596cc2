// Tests of CurrentReplicaSet(s): the new ReplicaSet, once the controller
// observed the Deployment's generation.

package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

func rsDeployment(image string, generation, observed int64) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: applyNS, UID: "dep-uid", Generation: generation, ResourceVersion: "10"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: image}}},
			},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed},
	}
}

// rsOf returns a ReplicaSet as the Deployment controller makes it for d.
func rsOf(d *appsv1.Deployment, name, hash, revision string, created time.Time, owner types.UID) *appsv1.ReplicaSet {
	tpl := d.Spec.Template.DeepCopy()
	tpl.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: d.Namespace, CreationTimestamp: metav1.NewTime(created),
			Labels:      map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash},
			Annotations: map[string]string{RevisionAnnotation: revision},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: owner, Controller: ptr.To(true),
			}},
		},
		Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: *tpl},
	}
}

func TestCurrentReplicaSet(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	v1 := rsDeployment("vllm:v1", 1, 1)
	v2 := rsDeployment("vllm:v2", 2, 2)
	cases := []struct {
		name    string
		objs    []runtime.Object
		want    storage.ReplicaSetRef
		wantErr string
	}{
		{name: "the ReplicaSet with the current template",
			objs: []runtime.Object{v2,
				rsOf(v1, "web-aaa", "aaa", "1", t0, "dep-uid"),
				rsOf(v2, "web-bbb", "bbb", "2", t0.Add(time.Minute), "dep-uid")},
			want: storage.ReplicaSetRef{Deployment: "web", Name: "web-bbb", PodTemplateHash: "bbb", Revision: 2}},
		{name: "rolled back: an old ReplicaSet again",
			objs: []runtime.Object{rsDeployment("vllm:v1", 3, 3),
				rsOf(v1, "web-aaa", "aaa", "3", t0, "dep-uid"),
				rsOf(v2, "web-bbb", "bbb", "2", t0.Add(time.Minute), "dep-uid")},
			want: storage.ReplicaSetRef{Deployment: "web", Name: "web-aaa", PodTemplateHash: "aaa", Revision: 3}},
		{name: "ReplicaSets of another owner are ignored",
			objs: []runtime.Object{v2,
				rsOf(v2, "web-imposter", "iii", "9", t0, "other-uid"),
				rsOf(v2, "web-bbb", "bbb", "2", t0.Add(time.Minute), "dep-uid")},
			want: storage.ReplicaSetRef{Deployment: "web", Name: "web-bbb", PodTemplateHash: "bbb", Revision: 2}},
		{name: "the oldest of two matches wins",
			objs: []runtime.Object{v2,
				rsOf(v2, "web-new", "nnn", "3", t0.Add(time.Hour), "dep-uid"),
				rsOf(v2, "web-bbb", "bbb", "2", t0.Add(time.Minute), "dep-uid")},
			want: storage.ReplicaSetRef{Deployment: "web", Name: "web-bbb", PodTemplateHash: "bbb", Revision: 2}},
		{name: "no ReplicaSet yet",
			objs:    []runtime.Object{v2, rsOf(v1, "web-aaa", "aaa", "1", t0, "dep-uid")},
			wantErr: "Deployment llm/web: no ReplicaSet it controls has its current pod template"},
		{name: "no Deployment", wantErr: "get Deployment llm/web"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objs...)
			got, err := CurrentReplicaSet(context.Background(), cs, applyNS, "web")
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestCurrentReplicaSetWaitsForObservedGeneration(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	v2 := rsDeployment("vllm:v2", 2, 1) // not observed yet
	cs := fake.NewClientset(v2)
	watching := make(chan string, 1)
	cs.PrependWatchReactor("deployments", func(action k8stesting.Action) (bool, watch.Interface, error) {
		wa := action.(k8stesting.WatchActionImpl)
		w, err := cs.Tracker().Watch(wa.GetResource(), wa.GetNamespace(), wa.GetListOptions())
		if err != nil {
			return true, nil, err
		}
		select { // the watch is registered: the controller may act
		case watching <- wa.GetWatchRestrictions().Fields.String():
		default:
		}
		return true, w, nil
	})

	go func() {
		fields := <-watching
		assert.Equal(t, "metadata.name=web", fields)
		ctx := context.Background()
		// The controller creates the new ReplicaSet, then reports the
		// generation observed.
		_, err := cs.AppsV1().ReplicaSets(applyNS).Create(ctx, rsOf(v2, "web-bbb", "bbb", "2", t0, "dep-uid"), metav1.CreateOptions{})
		assert.NoError(t, err)
		d := v2.DeepCopy()
		d.Status.ObservedGeneration = 2
		_, err = cs.AppsV1().Deployments(applyNS).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		assert.NoError(t, err)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := CurrentReplicaSet(ctx, cs, applyNS, "web")
	require.NoError(t, err)
	assert.Equal(t, storage.ReplicaSetRef{Deployment: "web", Name: "web-bbb", PodTemplateHash: "bbb", Revision: 2}, got)
}

func TestCurrentReplicaSetTimesOut(t *testing.T) {
	cs := fake.NewClientset(rsDeployment("vllm:v2", 2, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := CurrentReplicaSet(ctx, cs, applyNS, "web")
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
	assert.Contains(t, err.Error(), "Deployment llm/web: waiting for its controller to observe generation 2")
}

func TestCurrentReplicaSets(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	v1 := rsDeployment("vllm:v1", 1, 1)
	cs := fake.NewClientset(v1, rsOf(v1, "web-aaa", "aaa", "1", t0, "dep-uid"))
	objs := []*unstructured.Unstructured{configMap("", "c", nil), deploymentObj("", "web", 1)}
	got, err := CurrentReplicaSets(context.Background(), cs, objs, applyNS)
	require.NoError(t, err)
	assert.Equal(t, []storage.ReplicaSetRef{{Deployment: "web", Name: "web-aaa", PodTemplateHash: "aaa", Revision: 1}}, got)
}

// TestCurrentReplicaSetsControllerStalled: a Deployment its controller does
// not observe fails the discovery with a *wait.ControllerStalledError once
// the stall budget has passed by the given clock, long before ctx ends;
// a watch that has to be re-established (the API server went away) starts
// the budget again.
func TestCurrentReplicaSetsControllerStalled(t *testing.T) {
	cs := fake.NewClientset(rsDeployment("vllm:v2", 2, 1))
	watches := make(chan struct{}, 4)
	cs.PrependWatchReactor("deployments", func(action k8stesting.Action) (bool, watch.Interface, error) {
		wa := action.(k8stesting.WatchActionImpl)
		w, err := cs.Tracker().Watch(wa.GetResource(), wa.GetNamespace(), wa.GetListOptions())
		watches <- struct{}{}
		return true, w, err
	})
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := CurrentReplicaSetsFrom(ctx, cs, []*unstructured.Unstructured{{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"}}}}, applyNS, nil,
			Stall{Timeout: 10 * time.Second, Clock: clk})
		errc <- err
	}()
	<-watches
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
	clk.Step(9 * time.Second)
	select {
	case err := <-errc:
		t.Fatalf("ended before the stall budget: %v", err)
	default:
	}
	clk.Step(2 * time.Second)
	var err error
	select {
	case err = <-errc:
	case <-time.After(10 * time.Second):
		t.Fatal("the stall budget did not end the wait")
	}
	var stalled *wait.ControllerStalledError
	require.ErrorAs(t, err, &stalled)
	assert.Equal(t, "deployment/web", stalled.Diagnosis().Object)
	assert.Equal(t, rollout.VerdictControllerStalled, stalled.Diagnosis().Verdict)
	assert.Equal(t, "Deployment llm/web: its controller has not observed generation 2 (status.observedGeneration 1) in 10s "+
		"while the API server answered: its controller is not acting (is kube-controller-manager running?)", err.Error())
	assert.NoError(t, ctx.Err(), "well before the context's deadline")
}
