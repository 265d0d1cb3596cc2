package release

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// groupManifest is a grouped release: a Service selecting each group's
// leader (pod index 0), a headless Service naming every pod, two groups.
const groupManifest = `apiVersion: v1
kind: Service
metadata: {name: chat}
spec:
  selector: {app: chat, apps.kubernetes.io/pod-index: "0"}
---
apiVersion: v1
kind: Service
metadata: {name: chat-nodes}
spec:
  clusterIP: None
  selector: {app: chat}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: chat-g0}
spec:
  selector: {matchLabels: {app: chat, group: g0}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: chat-g1}
spec:
  selector: {matchLabels: {app: chat, group: g1}}
`

// TestGroupAnalysisTargets: an engine group's canary is measured on its
// leader against the other groups' leaders (workers serve no API and no
// /metrics); a bake of a grouped revision measures the leaders of its
// groups' recorded ControllerRevisions.
func TestGroupAnalysisTargets(t *testing.T) {
	pod := func(name, group, index, rev string, ready bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml",
				Labels: map[string]string{"app": "chat", "group": group, "apps.kubernetes.io/pod-index": index,
					"controller-revision-hash": rev},
				OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "chat-" + group}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	client := fake.NewClientset(
		pod("chat-g0-0", "g0", "0", "chat-g0-new", true),
		pod("chat-g0-1", "g0", "1", "chat-g0-new", true),
		pod("chat-g1-0", "g1", "0", "chat-g1-old", true),
		pod("chat-g1-1", "g1", "1", "chat-g1-old", true),
	)
	d := &Engine{Store: storage.NewMemory("ml"), Client: client}
	objs, err := cluster.ParseManifest(groupManifest)
	require.NoError(t, err)
	ctx := context.Background()

	got, err := d.groupAnalysisTargets(ctx, objs, []string{"chat-g0-0", "chat-g0-1"})
	require.NoError(t, err)
	assert.Equal(t, analysis.Targets{Namespace: "ml",
		Canary: []analysis.Target{{Pod: "chat-g0-0", Port: 8000}},
		Stable: []analysis.Target{{Pod: "chat-g1-0", Port: 8000}}}, got)

	_, err = d.groupAnalysisTargets(ctx, objs, []string{"chat-g2-0"})
	require.Error(t, err, "no canary leader serves")
	assert.Contains(t, err.Error(), "no pod of the canary groups")

	// A bake: the leaders of the revision's recorded groups.
	rec := &storage.Release{Name: "chat", Revision: 2, Manifest: groupManifest,
		ControllerRevisions: []storage.ControllerRevisionRef{
			{StatefulSet: "chat-g0", Name: "chat-g0-new"}, {StatefulSet: "chat-g1", Name: "chat-g1-new"}}}
	bake, err := d.newPodTargets(ctx, rec)
	require.NoError(t, err)
	assert.Equal(t, []analysis.Target{{Pod: "chat-g0-0", Port: 8000}}, bake.Canary,
		"chat-g1's leader runs another revision's template: not this revision's")
	assert.Empty(t, bake.Stable)
}
