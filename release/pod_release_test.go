package release_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/vllm"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// podReleaseValues is the values mapping the test release's chart
// declares.
var podReleaseValues = vllm.ValuesMap{"max-model-len": "engine.maxModelLen"}

// controlledBy makes obj controlled by kind/name of apiVersion.
func controlledBy(obj metav1.Object, apiVersion, kind, name string) {
	yes := true
	obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: &yes}})
}

func markedLWS(name string, marked bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(wait.LeaderWorkerSetGroup + "/v1")
	u.SetKind("LeaderWorkerSet")
	u.SetNamespace("ml")
	u.SetName(name)
	if marked {
		owner.Mark(u, "chat", "ml")
	}
	return u
}

func lwsPod(name string, labels map[string]string, ctrl func(metav1.Object)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Labels: labels}}
	if ctrl != nil {
		ctrl(p)
	}
	return p
}

func statefulSet(name string, ctrl func(metav1.Object)) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"}}
	if ctrl != nil {
		ctrl(s)
	}
	return s
}

// TestPodChartValuesFollowsControllers: diagnose's hints name the chart's
// values paths for a pod of a release whatever made the pod: a
// Deployment's ReplicaSet, a StatefulSet, a LeaderWorkerSet's leader (its
// StatefulSet) or worker (a StatefulSet controlled by the leader pod), or
// a LeaderWorkerSet's pod known only by its name label. Without a dynamic
// client, or for a pod of no release, there is no mapping.
func TestPodChartValuesFollowsControllers(t *testing.T) {
	lwsLabels := map[string]string{"leaderworkerset.sigs.k8s.io/name": "chat-lws"}
	byLWS := func(o metav1.Object) { controlledBy(o, wait.LeaderWorkerSetGroup+"/v1", "LeaderWorkerSet", "chat-lws") }
	marked := func(o metav1.Object) { owner.Mark(o, "chat", "ml") }
	for _, tc := range []struct {
		name    string
		pod     string
		objects []runtime.Object
		lws     *unstructured.Unstructured
		noDyn   bool
		want    vllm.ValuesMap
	}{
		{
			name: "Deployment", pod: "chat-abc-1",
			objects: []runtime.Object{
				lwsPod("chat-abc-1", nil, func(o metav1.Object) { controlledBy(o, "apps/v1", "ReplicaSet", "chat-abc") }),
				&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "chat-abc", Namespace: "ml", OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "chat", Controller: ptrTrue()}}}},
				func() runtime.Object {
					d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "ml"}}
					marked(d)
					return d
				}(),
			},
			want: podReleaseValues,
		},
		{
			name: "StatefulSet", pod: "chat-0",
			objects: []runtime.Object{
				lwsPod("chat-0", nil, func(o metav1.Object) { controlledBy(o, "apps/v1", "StatefulSet", "chat") }),
				statefulSet("chat", marked),
			},
			want: podReleaseValues,
		},
		{
			name: "LeaderWorkerSet leader", pod: "chat-lws-0",
			objects: []runtime.Object{
				lwsPod("chat-lws-0", lwsLabels, func(o metav1.Object) { controlledBy(o, "apps/v1", "StatefulSet", "chat-lws") }),
				statefulSet("chat-lws", byLWS),
			},
			lws:  markedLWS("chat-lws", true),
			want: podReleaseValues,
		},
		{
			name: "LeaderWorkerSet worker", pod: "chat-lws-0-1",
			objects: []runtime.Object{
				lwsPod("chat-lws-0-1", lwsLabels, func(o metav1.Object) { controlledBy(o, "apps/v1", "StatefulSet", "chat-lws-0") }),
				statefulSet("chat-lws-0", func(o metav1.Object) { controlledBy(o, "v1", "Pod", "chat-lws-0") }),
				lwsPod("chat-lws-0", lwsLabels, func(o metav1.Object) { controlledBy(o, "apps/v1", "StatefulSet", "chat-lws") }),
				statefulSet("chat-lws", byLWS),
			},
			lws:  markedLWS("chat-lws", true),
			want: podReleaseValues,
		},
		{
			name: "LeaderWorkerSet pod by its name label only", pod: "chat-lws-0",
			objects: []runtime.Object{lwsPod("chat-lws-0", lwsLabels, nil)},
			lws:     markedLWS("chat-lws", true),
			want:    podReleaseValues,
		},
		{
			name: "LeaderWorkerSet without a dynamic client", pod: "chat-lws-0",
			objects: []runtime.Object{
				lwsPod("chat-lws-0", lwsLabels, func(o metav1.Object) { controlledBy(o, "apps/v1", "StatefulSet", "chat-lws") }),
				statefulSet("chat-lws", byLWS),
			},
			lws: markedLWS("chat-lws", true), noDyn: true,
		},
		{
			name: "LeaderWorkerSet of no release", pod: "chat-lws-0",
			objects: []runtime.Object{
				lwsPod("chat-lws-0", lwsLabels, func(o metav1.Object) { controlledBy(o, "apps/v1", "StatefulSet", "chat-lws") }),
				statefulSet("chat-lws", byLWS),
			},
			lws: markedLWS("chat-lws", false),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewClientset(tc.objects...)
			rec := &storage.Release{Name: "chat", Namespace: "ml", Revision: 1, Status: storage.StatusDeployed,
				Chart:   storage.Chart{Name: "engine", Version: "1.0.0", ValuesMap: podReleaseValues},
				Created: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)}
			rec.Updated = rec.Created
			require.NoError(t, storage.NewSecrets(client, "ml").Create(ctx, rec))
			var dyn dynamic.Interface
			if !tc.noDyn {
				var objs []runtime.Object
				if tc.lws != nil {
					objs = append(objs, tc.lws)
				}
				dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
					map[schema.GroupVersionResource]string{{Group: wait.LeaderWorkerSetGroup, Version: "v1", Resource: "leaderworkersets"}: "LeaderWorkerSetList"}, objs...)
			}
			got := release.PodChartValues(ctx, client, dyn, "ml", tc.pod, diff.NewRedactor())
			assert.Equal(t, tc.want, got)
		})
	}
}

func ptrTrue() *bool {
	yes := true
	return &yes
}
