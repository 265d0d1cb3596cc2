package canary

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/charts"
)

// canaryDeployment is a Deployment "ml/chat" of image with replicas.
func canaryDeployment(image string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "chat", "namespace": "ml"},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "chat"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "chat"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "vllm", "image": image}}},
			},
		},
	}}
}

func byRef(objs ...*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[charts.RefIn(o, "ml").String()] = o
	}
	return out
}

// TestCanaryTargetsAgainstDeployedRevision: whether a canary holds is
// decided against the deployed revision, never the live object. After a
// refused (--no-rollback) or killed canary the live Deployment already
// carries the new template, and the canary must hold again.
func TestCanaryTargetsAgainstDeployedRevision(t *testing.T) {
	deployed := canaryDeployment("vllm:good", 2)
	desired := canaryDeployment("vllm:refuseme", 2)
	one := intstr.FromInt32(1)
	tests := []struct {
		name     string
		desired  *unstructured.Unstructured
		deployed []*unstructured.Unstructured
		live     map[string]*unstructured.Unstructured
		dryRun   map[string]*unstructured.Unstructured
		count    intstr.IntOrString
		want     []int32 // canary pods per target
	}{
		{"live on the deployed template", desired, []*unstructured.Unstructured{deployed}, byRef(deployed), byRef(desired), one, []int32{1}},
		{"live already on the new template (refused or killed canary)", desired, []*unstructured.Unstructured{deployed},
			byRef(canaryDeployment("vllm:refuseme", 2)), byRef(desired), one, []int32{1}},
		{"the deployed template again (a rollback by deploy)", deployed, []*unstructured.Unstructured{deployed},
			byRef(canaryDeployment("vllm:refuseme", 2)), byRef(deployed), one, nil},
		{"first install: nothing deployed", desired, nil, byRef(deployed), byRef(desired), one, nil},
		{"not live: no pods to hold a canary next to", desired, []*unstructured.Unstructured{deployed}, nil, nil, one, nil},
		{"count above the replicas is the replicas", desired, []*unstructured.Unstructured{deployed}, byRef(deployed), byRef(desired),
			intstr.FromInt32(40), []int32{2}},
		{"percentage rounds up", desired, []*unstructured.Unstructured{deployed}, byRef(deployed), byRef(desired),
			intstr.FromString("34%"), []int32{1}},
		{"replicas from the dry run (an HPA's live count)", desired, []*unstructured.Unstructured{deployed}, byRef(deployed),
			byRef(canaryDeployment("vllm:refuseme", 6)), intstr.FromString("50%"), []int32{3}},
		{"no replicas", desired, []*unstructured.Unstructured{deployed}, byRef(deployed), byRef(canaryDeployment("vllm:refuseme", 0)), one, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Targets([]*unstructured.Unstructured{tt.desired}, tt.deployed, tt.live, tt.dryRun, tt.count, "ml")
			var pods []int32
			for _, g := range got {
				assert.Equal(t, "ml/chat", g.Ref.Namespace+"/"+g.Ref.Name)
				pods = append(pods, g.Pods)
			}
			assert.Equal(t, tt.want, pods)
		})
	}
}

// TestCanaryObjectsNeverPromoteByThemselves: the transient strategy keeps
// canary pods from ever counting as available (the controller never takes
// an old pod down without vllmctl), and marks the Deployment with the
// revision whose canary it holds.
func TestCanaryObjectsNeverPromoteByThemselves(t *testing.T) {
	d := canaryDeployment("vllm:new", 3)
	require.NoError(t, unstructured.SetNestedField(d.Object, int64(math.MaxInt32), "spec", "progressDeadlineSeconds"))
	targets := []Target{{Ref: charts.RefIn(d, "ml"), Replicas: 3, Pods: 1}}
	out, err := Objects([]*unstructured.Unstructured{d}, targets, 7, "ml")
	require.NoError(t, err)
	c := out[0]
	minReady, _, _ := unstructured.NestedInt64(c.Object, "spec", "minReadySeconds")
	progress, _, _ := unstructured.NestedInt64(c.Object, "spec", "progressDeadlineSeconds")
	assert.Equal(t, int64(MinReadySeconds), minReady)
	assert.Greater(t, minReady, int64(100*365*24*3600)/4, "years, not minutes: no canary pod ever becomes available")
	assert.Greater(t, progress, minReady, "the API requires progressDeadlineSeconds > minReadySeconds")
	assert.LessOrEqual(t, progress, int64(math.MaxInt32), "an int32 field")
	assert.Equal(t, "7", c.GetAnnotations()[Annotation])
	_, found, _ := unstructured.NestedFieldNoCopy(d.Object, "metadata", "annotations")
	assert.False(t, found, "the rendered object is not changed")

	l, ok := LeftoverOf(c)
	require.True(t, ok)
	assert.Equal(t, Leftover{Deployment: "ml/chat", Revision: 7, MinReadySeconds: minReady}, l)
	_, ok = LeftoverOf(d)
	assert.False(t, ok)
}
