package lint

import (
	"context"
	stdjson "encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/vllmctl/vllmctl/charts"
)

// lintNamespace is the release namespace of the chart tests. The built-in
// chart places every object in .Release.Namespace, so rendering it into
// "default" would (rightly) raise VL008; the tests use a dedicated
// namespace, as users should.
const lintNamespace = "inference"

// renderChart renders the chart directory with charts.Render (Helm's
// loader, schema validation and engine, as `helm template`) as release
// "qwen" and returns its objects.
func renderChart(t *testing.T, dir, namespace string, valueFiles ...string) []*unstructured.Unstructured {
	t.Helper()
	ch, err := charts.Load(dir)
	require.NoError(t, err)
	r, err := charts.RenderContext(context.Background(), ch, charts.RenderOptions{ReleaseName: "qwen", Namespace: namespace, ValueFiles: valueFiles})
	require.NoError(t, err)
	return r.Objects
}

func TestBuiltinChartIsClean(t *testing.T) {
	sets := []string{"", "hpa.yaml", "pvc-init.yaml", "gpu4.yaml", "multinode.yaml"}
	for _, set := range sets {
		name := "defaults"
		var files []string
		if set != "" {
			name = set
			files = []string{filepath.Join("..", "..", "testdata", "values", set)}
		}
		t.Run(name, func(t *testing.T) {
			objs := renderChart(t, charts.DefaultChart, lintNamespace, files...)
			require.NotEmpty(t, objs)
			assertStrictTyped(t, objs)
			for _, f := range Run(objs, Options{Namespace: lintNamespace}) {
				assert.Equal(t, SeverityInfo, f.Severity, "unexpected finding: %s", f)
			}
		})
	}
}

func TestBuiltinChartDefaultsOnlyNoteSurge(t *testing.T) {
	objs := renderChart(t, filepath.Join("..", "vllm"), lintNamespace)
	got := Run(objs, Options{Namespace: lintNamespace})
	require.Len(t, got, 1)
	assert.Equal(t, "VL010", got[0].Rule)
	assert.Equal(t, "Deployment inference/qwen", got[0].Object)
}

func TestBuiltinChartInDefaultNamespaceWarns(t *testing.T) {
	objs := renderChart(t, filepath.Join("..", "vllm"), "default")
	assert.Equal(t, []string{"VL008", "VL010"}, rulesOf(Run(objs, Options{Namespace: "default"})))
}

func TestBadChartTriggersEveryRule(t *testing.T) {
	objs := renderChart(t, filepath.Join("..", "..", "testdata", "charts", "bad-lint"), lintNamespace)
	got := Run(objs, Options{Namespace: lintNamespace})
	fired := map[string]bool{}
	for _, f := range got {
		fired[f.Rule] = true
	}
	for _, r := range Rules() {
		assert.True(t, fired[r.ID], "rule %s did not fire; findings: %v", r.ID, got)
	}
	errs, warns, _ := Counts(got)
	assert.Positive(t, errs)
	assert.Positive(t, warns)
}

// assertStrictTyped decodes every object into its typed Kubernetes API
// struct, rejecting unknown or duplicate fields and wrong types, and checks
// the labels every vllmctl object carries.
func assertStrictTyped(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	codec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Strict: true})
	for _, u := range objs {
		data, err := u.MarshalJSON()
		require.NoError(t, err)
		_, _, err = codec.Decode(data, nil, nil)
		assert.NoError(t, err, "%s %s", u.GetKind(), u.GetName())
		assert.Equal(t, "vllmctl", u.GetLabels()["app.kubernetes.io/managed-by"], "%s %s", u.GetKind(), u.GetName())
		assert.Equal(t, "qwen", u.GetLabels()["app.kubernetes.io/instance"], "%s %s", u.GetKind(), u.GetName())
		assert.Equal(t, lintNamespace, u.GetNamespace(), "%s %s", u.GetKind(), u.GetName())
	}
}

// findObject returns the rendered object of that kind.
func findObject(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind {
			return u
		}
	}
	require.Failf(t, "object not rendered", "no %s", kind)
	return nil
}

func TestBuiltinChartValueSets(t *testing.T) {
	values := func(name string) string { return filepath.Join("..", "..", "testdata", "values", name) }
	chart := filepath.Join("..", "vllm")

	t.Run("defaults", func(t *testing.T) {
		objs := renderChart(t, chart, lintNamespace)
		assert.Equal(t, []string{"Deployment", "Service"}, kindsOf(objs))
		d := findObject(t, objs, "Deployment")
		replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
		assert.Equal(t, int64(1), replicas)
		sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
		assert.Equal(t, map[string]string{"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "qwen"}, sel)
		ctr := podContainers(t, d)[0]
		assert.Equal(t, "vllm/vllm-openai:v0.11.0", ctr["image"])
		assert.Contains(t, strings.Join(stringsOf(ctr["args"]), " "), "--tensor-parallel-size 1")
	})
	t.Run("hpa", func(t *testing.T) {
		objs := renderChart(t, chart, lintNamespace, values("hpa.yaml"))
		assert.Equal(t, []string{"Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service"}, kindsOf(objs))
		_, found, _ := unstructured.NestedFieldNoCopy(findObject(t, objs, "Deployment").Object, "spec", "replicas")
		assert.False(t, found, "the HPA owns the replica count")
		env := podContainers(t, findObject(t, objs, "Deployment"))[0]["env"]
		assert.Contains(t, mustJSON(t, env), `"secretKeyRef":{"key":"token","name":"hf-token"}`)
	})
	t.Run("pvc-init", func(t *testing.T) {
		objs := renderChart(t, chart, lintNamespace, values("pvc-init.yaml"))
		assert.Equal(t, []string{"Deployment", "PersistentVolumeClaim", "Service"}, kindsOf(objs))
		spec, _, _ := unstructured.NestedMap(findObject(t, objs, "Deployment").Object, "spec", "template", "spec")
		assert.Len(t, spec["initContainers"], 1)
		assert.Len(t, spec["containers"], 2)
		assert.Contains(t, mustJSON(t, spec["volumes"]), `"claimName":"qwen-model-cache"`)
	})
	t.Run("gpu4", func(t *testing.T) {
		objs := renderChart(t, chart, lintNamespace, values("gpu4.yaml"))
		assert.Equal(t, []string{"Deployment", "ResourceQuota", "Service"}, kindsOf(objs))
		ctr := podContainers(t, findObject(t, objs, "Deployment"))[0]
		assert.Contains(t, strings.Join(stringsOf(ctr["args"]), " "), "--tensor-parallel-size 4")
		assert.Contains(t, mustJSON(t, ctr["resources"]), `"nvidia.com/gpu":4`)
		hard, _, _ := unstructured.NestedMap(findObject(t, objs, "ResourceQuota").Object, "spec", "hard")
		assert.Equal(t, "16", hard["requests.nvidia.com/gpu"])
	})
}

func kindsOf(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, u := range objs {
		out = append(out, u.GetKind())
	}
	sort.Strings(out)
	return out
}

func podContainers(t *testing.T, d *unstructured.Unstructured) []map[string]any {
	t.Helper()
	items, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		out = append(out, it.(map[string]any))
	}
	return out
}

func stringsOf(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, _ := it.(string)
		out = append(out, s)
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := stdjson.Marshal(v)
	require.NoError(t, err)
	return string(data)
}

// TestSubchartObjectsAreLinted lints a chart with subcharts: the objects
// of the subcharts (nested ones too) are checked, and each finding names
// the template that rendered its object.
func TestSubchartObjectsAreLinted(t *testing.T) {
	dir := filepath.Join("..", "testdata", "charts", "umbrella")
	ch, err := charts.Load(dir)
	require.NoError(t, err)
	// The cache subchart is not vendored in testdata (the charts tests
	// pack it): its tag turns it off.
	r, err := charts.RenderContext(context.Background(), ch, charts.RenderOptions{ReleaseName: "qwen", Namespace: lintNamespace, Set: []string{"tags.backend=false"}})
	require.NoError(t, err)
	got := Run(r.Objects, Options{Namespace: lintNamespace, Source: r.Source})
	require.NotEmpty(t, got)
	rules := map[string]bool{}
	for _, f := range got {
		assert.Equal(t, "Deployment inference/qwen-web", f.Object)
		assert.Equal(t, "umbrella/charts/web/templates/deployment.yaml", f.Template, f.String())
		assert.Contains(t, f.String(), "(umbrella/charts/web/templates/deployment.yaml)")
		rules[f.Rule] = true
	}
	assert.True(t, rules["VL004"], "probes: %v", got)
	assert.True(t, rules["VL006"], "requests: %v", got)

	// Without Source, findings name no template.
	for _, f := range Run(r.Objects, Options{Namespace: lintNamespace}) {
		assert.Empty(t, f.Template)
	}
}

// TestBuiltinChartMultiNode lints the built-in chart's multi-node groups:
// clean when tensor × pipeline parallel size is nodes × GPUs per pod
// (StatefulSets and LeaderWorkerSet alike), VL016 on every group when it
// is not, and VL011 never (it assumes one pod per engine).
func TestBuiltinChartMultiNode(t *testing.T) {
	ch, err := charts.Load(filepath.Join("..", "vllm"))
	require.NoError(t, err)
	multinode := filepath.Join("..", "..", "testdata", "values", "multinode.yaml")
	tests := []struct {
		name string
		set  []string
		want []string // Rule Object, in order
	}{
		{"statefulsets clean", nil, nil},
		{"leaderworkerset clean", []string{"multiNode.controller=leaderworkerset"}, nil},
		{"statefulsets tp of one pod", []string{"model.tensorParallelSize=4"}, []string{
			"VL016 StatefulSet inference/qwen-g0", "VL016 StatefulSet inference/qwen-g1"}},
		{"leaderworkerset tp of one pod", []string{"multiNode.controller=leaderworkerset", "model.tensorParallelSize=4"}, []string{
			"VL016 LeaderWorkerSet inference/qwen"}},
		{"4 nodes", []string{"multiNode.nodes=4", "replicaCount=1"}, []string{"VL016 StatefulSet inference/qwen-g0"}},
		{"4 nodes, pipeline parallel 4", []string{"multiNode.nodes=4", "extraArgs={--pipeline-parallel-size=4}"}, nil},
		{"tp 16 across 2 nodes", []string{"model.tensorParallelSize=16", "extraArgs={--enable-prefix-caching}"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := charts.RenderContext(context.Background(), ch, charts.RenderOptions{ReleaseName: "qwen", Namespace: lintNamespace, ValueFiles: []string{multinode}, Set: tt.set})
			require.NoError(t, err)
			var got []string
			for _, f := range Run(r.Objects, Options{Namespace: lintNamespace}) {
				got = append(got, f.Rule+" "+f.Object)
				if f.Rule == "VL016" {
					assert.Contains(t, f.Message, "--nnodes", f.String())
					assert.Contains(t, f.Message, "multiNode.nodes × resources.gpu", f.String())
				}
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
