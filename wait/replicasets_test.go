// Tests of the Deployment controller's rule for its new and old
// ReplicaSets.

package wait

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vllmctl/vllmctl/internal/podwire"
)

func TestSplitReplicaSets(t *testing.T) {
	d := testDeployment("vllm/vllm-openai:v0.9.1")
	newRS := testReplicaSet(d, "new", "vllm/vllm-openai:v0.9.1", 1)
	oldRS := testReplicaSet(d, "old", "vllm/vllm-openai:v0.9.0", 2)
	older := testReplicaSet(d, "older", "vllm/vllm-openai:v0.8.0", 0)
	foreign := testReplicaSet(d, "foreign", "vllm/vllm-openai:v0.9.1", 1)
	foreign.OwnerReferences[0].UID = types.UID("someone-else")

	got, old := splitReplicaSets(d, []*appsv1.ReplicaSet{older, foreign, oldRS, newRS})
	require.NotNil(t, got)
	assert.Equal(t, "chat-new", got.Name)
	require.Len(t, old, 1, "old ReplicaSets with pods only")
	assert.Equal(t, "chat-old", old[0].Name)

	got, _ = splitReplicaSets(d, []*appsv1.ReplicaSet{oldRS})
	assert.Nil(t, got, "not created yet")
}

func TestNewReplicaSet(t *testing.T) {
	d := testDeployment("vllm/vllm-openai:v0.9.1")
	at := func(rs *appsv1.ReplicaSet, created time.Time) *appsv1.ReplicaSet {
		rs.CreationTimestamp = metav1.NewTime(created)
		return rs
	}
	later := at(testReplicaSet(d, "aaa", "vllm/vllm-openai:v0.9.1", 1), t0.Add(time.Hour))
	oldest := at(testReplicaSet(d, "zzz", "vllm/vllm-openai:v0.9.1", 1), t0)
	tieB := at(testReplicaSet(d, "bbb", "vllm/vllm-openai:v0.9.1", 1), t0.Add(time.Minute))
	tieC := at(testReplicaSet(d, "ccc", "vllm/vllm-openai:v0.9.1", 1), t0.Add(time.Minute))
	other := at(testReplicaSet(d, "old", "vllm/vllm-openai:v0.9.0", 1), t0.Add(-time.Hour))
	foreign := at(testReplicaSet(d, "foreign", "vllm/vllm-openai:v0.9.1", 1), t0.Add(-time.Hour))
	foreign.OwnerReferences[0].UID = types.UID("someone-else")

	rss := []*appsv1.ReplicaSet{later, foreign, other, oldest}
	got := NewReplicaSet(d, rss)
	require.NotNil(t, got)
	assert.Equal(t, "chat-zzz", got.Name, "the oldest matching one, as the controller picks")
	assert.Equal(t, []*appsv1.ReplicaSet{later, foreign, other, oldest}, rss, "rss not reordered")

	got = NewReplicaSet(d, []*appsv1.ReplicaSet{tieC, later, tieB})
	require.NotNil(t, got)
	assert.Equal(t, "chat-bbb", got.Name, "same creation time: by name")

	assert.Nil(t, NewReplicaSet(d, []*appsv1.ReplicaSet{other, foreign}), "not created yet")
	assert.Nil(t, NewReplicaSet(d, nil))
}

// TestNewReplicaSetByTemplateDigest: objects decoded without their
// templates (the watcher's informers, podwire.NewAppsClient) are matched
// by their templates' digests alone; an object with a digest never
// matches one without.
func TestNewReplicaSetByTemplateDigest(t *testing.T) {
	withDigest := func(m *metav1.ObjectMeta, digest string) {
		m.Annotations = map[string]string{podwire.TemplateDigestAnnotation: digest, deploymentRevisionAnnotKey: "2"}
	}
	d := testDeployment("vllm/vllm-openai:v0.9.1")
	oldRS := testReplicaSet(d, "old", "vllm/vllm-openai:v0.9.0", 2)
	newRS := testReplicaSet(d, "new", "vllm/vllm-openai:v0.9.1", 1)
	full := testReplicaSet(d, "full", "vllm/vllm-openai:v0.9.1", 1)
	d.Spec.Template = corev1.PodTemplateSpec{}
	withDigest(&d.ObjectMeta, "aaaa")
	oldRS.Spec.Template = corev1.PodTemplateSpec{}
	withDigest(&oldRS.ObjectMeta, "bbbb")
	newRS.Spec.Template = corev1.PodTemplateSpec{}
	withDigest(&newRS.ObjectMeta, "aaaa")
	got := NewReplicaSet(d, []*appsv1.ReplicaSet{oldRS, newRS})
	require.NotNil(t, got)
	assert.Equal(t, "chat-new", got.Name)

	assert.Nil(t, NewReplicaSet(d, []*appsv1.ReplicaSet{oldRS}), "no ReplicaSet with the Deployment's digest")
	bare := d.DeepCopy()
	bare.Annotations = nil
	assert.Nil(t, NewReplicaSet(d, []*appsv1.ReplicaSet{full}), "a digest against a template")
	assert.Nil(t, NewReplicaSet(bare, []*appsv1.ReplicaSet{newRS}), "a template against a digest")
}
