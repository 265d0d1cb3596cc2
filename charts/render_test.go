package charts

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vllmctl/vllmctl/internal/owner"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

const handwritten = "testdata/charts/handwritten"

// renderCase is one chart + options rendered by the golden tests and by the
// Helm comparison test.
type renderCase struct {
	name  string // golden file: testdata/golden/<name>.yaml
	chart string
	opts  RenderOptions
	// setup, when set, prepares the chart directory (say, a copy with a
	// .tgz subchart packed in) and returns it: it replaces chart.
	setup func(t *testing.T) string
}

// chartDir returns the chart of the case, prepared by setup if any.
func (tc renderCase) chartDir(t *testing.T) string {
	t.Helper()
	if tc.setup != nil {
		return tc.setup(t)
	}
	return tc.chart
}

func renderCases() []renderCase {
	vllm := func(files ...string) RenderOptions {
		return RenderOptions{ReleaseName: "qwen", Namespace: "inference", ValueFiles: files}
	}
	return append([]renderCase{
		{"vllm-defaults", "vllm", vllm(), nil},
		{"vllm-hpa", "vllm", vllm("testdata/values/hpa.yaml"), nil},
		{"vllm-pvc-init", "vllm", vllm("testdata/values/pvc-init.yaml"), nil},
		{"vllm-gpu4", "vllm", vllm("testdata/values/gpu4.yaml"), nil},
		{"handwritten-defaults", handwritten, RenderOptions{ReleaseName: "demo", Namespace: "apps"}, nil},
		{"handwritten-overrides", handwritten, RenderOptions{
			ReleaseName: "demo-handwritten",
			Namespace:   "apps",
			ValueFiles:  []string{"testdata/values/handwritten-extra.yaml"},
			Set:         []string{"workers[0].port=9090", "extraEnv.MODE=fast", `greeting=hi\, {{ .Release.Name }}`},
			SetString:   []string{"image.tag=1.28", "extraEnv.COUNT=3"},
		}, nil},
		{"vllm-multinode", "vllm", vllm("testdata/values/multinode.yaml"), nil},
		{"vllm-multinode-lws", "vllm", RenderOptions{ReleaseName: "qwen", Namespace: "inference",
			ValueFiles: []string{"testdata/values/multinode.yaml"}, Set: []string{"multiNode.controller=leaderworkerset"}}, nil},
	}, dependencyRenderCases()...)
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := Load(tc.chartDir(t))
			require.NoError(t, err)
			r, err := Render(ch, tc.opts)
			require.NoError(t, err)

			golden := filepath.Join("testdata", "golden", tc.name+".yaml")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(r.Manifest), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run `go test ./charts -update` to create the golden files")
			assert.Equal(t, string(want), r.Manifest)

			for _, o := range r.Objects {
				assert.Equal(t, owner.ManagedByVllmctl, o.GetLabels()[owner.LabelManagedBy], ObjectRef(o))
				assert.Equal(t, tc.opts.ReleaseName, o.GetLabels()[owner.LabelRelease], ObjectRef(o))
				assert.Equal(t, tc.opts.Namespace, o.GetAnnotations()[owner.AnnotationNamespace], ObjectRef(o))
				assert.True(t, owner.Owns(o, tc.opts.ReleaseName, tc.opts.Namespace), ObjectRef(o))
			}
			assert.True(t, slices.IsSortedFunc(r.Objects, compareObjects), "objects are sorted")
			assert.Equal(t, ch.Metadata.Name, r.Chart.Name)
			assert.Equal(t, ch.Metadata.Version, r.Chart.Version)
			assert.Equal(t, ch.Metadata.AppVersion, r.Chart.AppVersion)
		})
	}
}

func TestRenderKinds(t *testing.T) {
	kinds := func(r *Rendered) []string {
		var out []string
		for _, o := range r.Objects {
			out = append(out, o.GetKind()+"/"+o.GetName())
		}
		return out
	}
	tests := []struct {
		name string
		tc   renderCase
		want []string
	}{
		{"vllm defaults", renderCases()[0], []string{"Service/qwen", "Deployment/qwen"}},
		{"vllm hpa", renderCases()[1], []string{"PodDisruptionBudget/qwen", "Service/qwen", "Deployment/qwen", "HorizontalPodAutoscaler/qwen"}},
		{"vllm pvc", renderCases()[2], []string{"PersistentVolumeClaim/qwen-model-cache", "Service/qwen", "Deployment/qwen"}},
		{"vllm gpu4", renderCases()[3], []string{"ResourceQuota/qwen", "Service/qwen", "Deployment/qwen"}},
		{"vllm multinode", renderCases()[6], []string{"PodDisruptionBudget/qwen", "Service/qwen", "Service/qwen-nodes", "StatefulSet/qwen-g0", "StatefulSet/qwen-g1"}},
		{"vllm multinode lws", renderCases()[7], []string{"PodDisruptionBudget/qwen", "Service/qwen", "LeaderWorkerSet/qwen"}},
		{"handwritten", renderCases()[4], []string{
			"ServiceAccount/demo-handwritten",
			"ConfigMap/demo-handwritten-alpha", "ConfigMap/demo-handwritten-beta", "ConfigMap/demo-handwritten-settings",
			"Service/demo-handwritten-alpha", "Service/demo-handwritten-beta",
			"Deployment/demo-handwritten",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := Load(tt.tc.chart)
			require.NoError(t, err)
			r, err := Render(ch, tt.tc.opts)
			require.NoError(t, err)
			assert.Equal(t, tt.want, kinds(r))
		})
	}
}

func TestRenderNotesAndValues(t *testing.T) {
	ch, err := Load(handwritten)
	require.NoError(t, err)
	r, err := Render(ch, RenderOptions{ReleaseName: "demo", Namespace: "apps", Set: []string{"replicas=3"}})
	require.NoError(t, err)

	assert.Equal(t, "demo-handwritten is installed with 2 workers.\n", r.Notes)
	assert.NotContains(t, r.Manifest, "installed with")
	assert.Equal(t, map[string]any{"replicas": int64(3)}, r.UserValues)
	assert.Equal(t, int64(3), r.Values["replicas"])
	assert.Equal(t, "1.27", r.Values["image"].(map[string]any)["tag"], "chart defaults are coalesced")
}

func TestRenderReleaseAndCapabilities(t *testing.T) {
	dir := writeChart(t, map[string]string{
		"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  revision: {{ .Release.Revision | quote }}
  upgrade: {{ .Release.IsUpgrade | quote }}
  install: {{ .Release.IsInstall | quote }}
  service: {{ .Release.Service | quote }}
  namespace: {{ .Release.Namespace | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
  helm: {{ .Capabilities.HelmVersion.Version | quote }}
  apps: {{ .Capabilities.APIVersions.Has "apps/v1" | quote }}
  lookup: {{ lookup "v1" "Secret" "x" "y" | toJson | quote }}
`,
	})
	ch, err := Load(dir)
	require.NoError(t, err)

	tests := []struct {
		name string
		opts RenderOptions
		want map[string]any
	}{
		{"install defaults", RenderOptions{ReleaseName: "r", Namespace: "ns"}, map[string]any{
			"revision": "1", "upgrade": "false", "install": "true", "service": "Helm", "namespace": "ns",
			"kube": DefaultKubeVersion, "helm": HelmVersion, "apps": "true", "lookup": "{}",
		}},
		{"upgrade", RenderOptions{ReleaseName: "r", Namespace: "ns", IsUpgrade: true, Revision: 7, KubeVersion: "v1.33.4-gke.1"}, map[string]any{
			"revision": "7", "upgrade": "true", "install": "false", "service": "Helm", "namespace": "ns",
			"kube": "v1.33.4-gke.1", "helm": HelmVersion, "apps": "true", "lookup": "{}",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Render(ch, tt.opts)
			require.NoError(t, err)
			require.Len(t, r.Objects, 1)
			data, _, _ := unstructured.NestedMap(r.Objects[0].Object, "data")
			assert.Equal(t, tt.want, data)
			assert.Empty(t, r.Objects[0].GetNamespace(), "namespace left as rendered")
		})
	}
}

func TestRenderDocuments(t *testing.T) {
	tests := []struct {
		name      string
		templates map[string]string
		want      []string // Kind/name in order
	}{
		{"empty and comment-only documents are dropped", map[string]string{
			"templates/empty.yaml":    "{{- if false }}\nkind: x\n{{- end }}\n",
			"templates/comments.yaml": "# nothing here\n---\n---   \n\n---\n# still nothing\n",
			"templates/one.yaml":      "---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n---\n",
		}, []string{"ConfigMap/one"}},
		{"lists are expanded", map[string]string{
			"templates/list.yaml": `apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Service
    metadata: {name: b}
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: a}
`,
		}, []string{"ConfigMap/a", "Service/b"}},
		{"kind order then namespace then name", map[string]string{
			"templates/all.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: z}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: a, namespace: b}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: b, namespace: a}
---
apiVersion: v1
kind: Namespace
metadata: {name: ns}
---
apiVersion: batch/v1
kind: Job
metadata: {name: a}
`,
		}, []string{"Namespace/ns", "ClusterRole/z", "Deployment/b", "Deployment/a", "Job/a"}},
		{"no templates", map[string]string{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := Load(writeChart(t, tt.templates))
			require.NoError(t, err)
			r, err := Render(ch, RenderOptions{ReleaseName: "r", Namespace: "ns"})
			require.NoError(t, err)
			var got []string
			for _, o := range r.Objects {
				got = append(got, o.GetKind()+"/"+o.GetName())
				assert.Equal(t, "r", o.GetLabels()[owner.LabelRelease])
			}
			assert.Equal(t, tt.want, got)
			if len(tt.want) == 0 {
				assert.Empty(t, r.Manifest)
			} else {
				assert.Equal(t, len(tt.want)-1, strings.Count(r.Manifest, "---\n"))
			}
		})
	}
}

func TestUserValues(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	b := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(a, []byte("x: 1\nm:\n  k1: a\n  k2: a\nlist: [1, 2]\n"), 0o644))
	require.NoError(t, os.WriteFile(b, []byte("x: 2\nm:\n  k2: b\n"), 0o644))

	tests := []struct {
		name string
		opts RenderOptions
		want map[string]any
	}{
		{"later file wins, maps merge", RenderOptions{ValueFiles: []string{a, b}},
			map[string]any{"x": float64(2), "m": map[string]any{"k1": "a", "k2": "b"}, "list": []any{float64(1), float64(2)}}},
		{"--set beats files", RenderOptions{ValueFiles: []string{a}, Set: []string{"x=3", "m.k1=c"}},
			map[string]any{"x": int64(3), "m": map[string]any{"k1": "c", "k2": "a"}, "list": []any{float64(1), float64(2)}}},
		{"--set-string beats --set", RenderOptions{Set: []string{"x=3"}, SetString: []string{"x=4"}},
			map[string]any{"x": "4"}},
		{"--set syntax", RenderOptions{Set: []string{"a.b=c", "l[0]=x", "l[1]=y", "s={p,q}", `e=1\,2`, "t=true", "n=null"}},
			map[string]any{"a": map[string]any{"b": "c"}, "l": []any{"x", "y"}, "s": []any{"p", "q"}, "e": "1,2", "t": true, "n": nil}},
		{"--set-string keeps strings", RenderOptions{SetString: []string{"t=true", "n=10"}},
			map[string]any{"t": "true", "n": "10"}},
		{"nothing", RenderOptions{}, map[string]any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := UserValues(tt.opts)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestValidateReleaseName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"qwen", true},
		{"a", true},
		{"my-release-1", true},
		{"1abc", true},
		{strings.Repeat("a", 53), true},
		{strings.Repeat("a", 54), false},
		{"", false},
		{"Qwen", false},
		{"my_release", false},
		{"-a", false},
		{"a-", false},
		{"a.b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateReleaseName(tt.name)
			if tt.ok {
				assert.NoError(t, err)
				assert.Empty(t, ReleaseNameProblem(tt.name))
				return
			}
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, "release name", ie.Source)
			assert.Equal(t, 2, ie.ExitCode())
			assert.NotEmpty(t, ReleaseNameProblem(tt.name))
			if tt.name != "" {
				assert.Contains(t, err.Error(), strconv.Quote(tt.name))
				assert.Contains(t, err.Error(), "DNS-1123 label of at most 53 characters")
			}
		})
	}
}

func obj(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	o.SetNamespace(ns)
	o.SetName(name)
	return o
}

func TestSortObjects(t *testing.T) {
	in := []*unstructured.Unstructured{
		obj("batch/v1", "Job", "a", "j"),
		obj("autoscaling/v2", "HorizontalPodAutoscaler", "a", "h"),
		obj("policy/v1", "PodDisruptionBudget", "a", "p"),
		obj("apps/v1", "StatefulSet", "a", "st"),
		obj("apps/v1", "Deployment", "b", "a"),
		obj("apps/v1", "Deployment", "a", "z"),
		obj("apps/v1", "Deployment", "a", "b"),
		obj("v1", "Service", "a", "s"),
		obj("v1", "PersistentVolumeClaim", "a", "pvc"),
		obj("v1", "ConfigMap", "a", "cm"),
		obj("v1", "Secret", "a", "sec"),
		obj("v1", "ServiceAccount", "a", "sa"),
		obj("v1", "ResourceQuota", "a", "rq"),
		obj("v1", "Namespace", "", "ns"),
		obj("rbac.authorization.k8s.io/v1", "RoleBinding", "a", "rb"),
		obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "cr"),
		obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com"),
		obj("scheduling.k8s.io/v1", "PriorityClass", "", "pc"),
		obj("example.com/v2", "Widget", "a", "w"),
		obj("example.com/v1", "Widget", "a", "w"),
		obj("example.com/v1", "Alpha", "b", "x"),
	}
	want := []string{
		"scheduling.k8s.io/v1 PriorityClass pc",
		"v1 Namespace ns",
		"v1 ResourceQuota a/rq",
		"policy/v1 PodDisruptionBudget a/p",
		"v1 ServiceAccount a/sa",
		"v1 Secret a/sec",
		"v1 ConfigMap a/cm",
		"v1 PersistentVolumeClaim a/pvc",
		"apiextensions.k8s.io/v1 CustomResourceDefinition widgets.example.com",
		"rbac.authorization.k8s.io/v1 ClusterRole cr",
		"rbac.authorization.k8s.io/v1 RoleBinding a/rb",
		"v1 Service a/s",
		"apps/v1 Deployment a/b",
		"apps/v1 Deployment a/z",
		"apps/v1 Deployment b/a",
		"autoscaling/v2 HorizontalPodAutoscaler a/h",
		"apps/v1 StatefulSet a/st",
		"batch/v1 Job a/j",
		// Kinds Helm does not know come last, by kind name.
		"example.com/v1 Alpha b/x",
		"example.com/v1 Widget a/w",
		"example.com/v2 Widget a/w",
	}
	refs := func(objs []*unstructured.Unstructured) []string {
		var got []string
		for _, o := range objs {
			got = append(got, o.GetAPIVersion()+" "+ObjectRef(o))
		}
		return got
	}
	SortObjects(in)
	assert.Equal(t, want, refs(in))

	// Deleting goes in exactly the reverse order.
	slices.Reverse(in[:7])
	SortObjectsForDelete(in)
	slices.Reverse(want)
	assert.Equal(t, want, refs(in))
}

// TestKindOrderMatchesHelmSortManifests checks, with Helm's own
// SortManifests (what `helm install` applies in), that the rendered
// objects come in Helm's install order of kinds.
func TestKindOrderMatchesHelmSortManifests(t *testing.T) {
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := Load(tc.chartDir(t))
			require.NoError(t, err)
			r, err := Render(ch, tc.opts)
			require.NoError(t, err)
			var ours []string
			for _, o := range r.Objects {
				ours = append(ours, o.GetKind())
			}
			// Helm's sort is stable: a shuffled input shows its order.
			shuffled := slices.Clone(r.Objects)
			slices.Reverse(shuffled)
			m, err := Manifest(shuffled)
			require.NoError(t, err)
			_, sorted, err := releaseutil.SortManifests(map[string]string{"all.yaml": m}, nil, releaseutil.InstallOrder)
			require.NoError(t, err)
			var helms []string
			for _, s := range sorted {
				helms = append(helms, s.Head.Kind)
			}
			assert.Equal(t, helms, ours)
		})
	}
}

// TestKindOrderIsHelms checks that every kind of Helm's install order sorts
// in Helm's position, and that unknown kinds come after all of them.
func TestKindOrderIsHelms(t *testing.T) {
	for i, kind := range releaseutil.InstallOrder {
		assert.Equal(t, i, kindPriority(kind), kind)
	}
	assert.Greater(t, kindPriority("Widget"), kindPriority("ValidatingWebhookConfiguration"))
	assert.Equal(t, kindPriority("Widget"), kindPriority("Alpha"))
}

func TestSetDefaultNamespace(t *testing.T) {
	objs := []*unstructured.Unstructured{
		obj("v1", "ConfigMap", "", "cm"),
		obj("v1", "ConfigMap", "other", "kept"),
		obj("v1", "Namespace", "", "ns"),
		obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "cr"),
		obj("example.com/v1", "Widget", "", "w"),
	}
	require.NoError(t, SetDefaultNamespace(objs, "team", nil))
	var got []string
	for _, o := range objs {
		got = append(got, ObjectRef(o))
	}
	assert.Equal(t, []string{"ConfigMap team/cm", "ConfigMap other/kept", "Namespace ns", "ClusterRole cr", "Widget team/w"}, got)

	w := obj("example.com/v1", "Widget", "", "w")
	require.NoError(t, SetDefaultNamespace([]*unstructured.Unstructured{w}, "team",
		func(gvk schema.GroupVersionKind) (bool, error) { return gvk.Kind != "Widget", nil }))
	assert.Empty(t, w.GetNamespace(), "the callback decides")
}

func TestLoad(t *testing.T) {
	notChart := t.TempDir()
	file := filepath.Join(notChart, "file.txt")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	packaged := packageChart(t, handwritten)
	notGzip := filepath.Join(notChart, "broken-0.1.0.tgz")
	require.NoError(t, os.WriteFile(notGzip, []byte("not gzip"), 0o644))

	tests := []struct {
		name    string
		ref     string
		chart   string // expected chart name
		errFile string // expected InputError.File; "" = no error
		errMsg  string
	}{
		{"built-in", "vllm", "vllm", "", ""},
		{"empty is the default chart", "", "vllm", "", ""},
		{"directory", handwritten, "handwritten", "", ""},
		{"directory with ./", "./" + handwritten, "handwritten", "", ""},
		{"unknown", "llama", "", "llama", "not a chart directory nor a built-in chart (built-in charts: vllm)"},
		{"packaged chart", packaged, "handwritten", "", ""},
		{"a file", file, "", file, "not a chart directory nor a packaged chart (.tgz)"},
		{"a .tgz that is not gzip", notGzip, "", notGzip, "does not appear to be a gzipped archive"},
		{"a directory without Chart.yaml", notChart, "", notChart, "Chart.yaml file is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := Load(tt.ref)
			if tt.errFile == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.chart, ch.Name())
				return
			}
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, "chart", ie.Source)
			assert.Equal(t, tt.errFile, ie.File)
			assert.Contains(t, err.Error(), tt.errMsg)
			assert.Contains(t, err.Error(), tt.ref)
		})
	}
}

func TestBuiltinCharts(t *testing.T) {
	assert.Equal(t, []string{"vllm"}, BuiltinCharts())
	assert.True(t, IsBuiltin(DefaultChart))
	assert.False(t, IsBuiltin("nope"))
}

// TestEmbeddedLoadMatchesDirLoader checks that loading from an fs.FS (as
// for the built-in charts) gives the files Helm's directory loader gives,
// .helmignore included.
func TestEmbeddedLoadMatchesDirLoader(t *testing.T) {
	tests := []struct {
		name string
		dir  string
	}{
		{"built-in vllm", "vllm"},
		{"handwritten", handwritten},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := loader.LoadDir(tt.dir)
			require.NoError(t, err)
			files, err := readChartFS(os.DirFS(filepath.Dir(tt.dir)), filepath.Base(tt.dir))
			require.NoError(t, err)
			got, err := loader.LoadFiles(files)
			require.NoError(t, err)

			sorted := func(raw []string) []string { slices.Sort(raw); return raw }
			var w, g []string
			for _, f := range want.Raw {
				w = append(w, f.Name)
			}
			for _, f := range got.Raw {
				g = append(g, f.Name)
			}
			assert.Equal(t, sorted(w), sorted(g))
			assert.NotContains(t, g, "files/app.ini.bak")
			assert.NotContains(t, g, "files/ignored/secret.txt")
			assert.Equal(t, want.Values, got.Values)
			assert.Equal(t, want.Schema, got.Schema)
		})
	}
	if IsBuiltin("vllm") {
		embedded, err := loadBuiltin("vllm")
		require.NoError(t, err)
		fromDir, err := loader.LoadDir("vllm")
		require.NoError(t, err)
		assert.Equal(t, len(fromDir.Templates), len(embedded.Templates))
		for i := range fromDir.Templates {
			assert.Equal(t, string(fromDir.Templates[i].Data), string(embedded.Templates[i].Data), fromDir.Templates[i].Name)
		}
	}
}

// TestDefaultKubeVersion checks DefaultKubeVersion against the client-go in
// go.mod, from which `helm template` derives it (v0.X → v1.X.0).
func TestDefaultKubeVersion(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/client-go v0\.(\d+)\.`).FindSubmatch(gomod)
	require.NotNil(t, m, "k8s.io/client-go in go.mod")
	assert.Equal(t, "v1."+string(m[1])+".0", DefaultKubeVersion)
}

// writeChart writes a chart named "c" with the given extra files (paths
// relative to the chart) to a temporary directory and returns it.
func writeChart(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "c")
	all := map[string]string{"Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n"}
	for k, v := range files {
		all[k] = v
	}
	for name, content := range all {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

// packageChart packages the chart directory dir as helm package does and
// returns the .tgz's path.
func packageChart(t *testing.T, dir string) string {
	t.Helper()
	ch, err := loader.LoadDir(dir)
	require.NoError(t, err)
	path, err := chartutil.Save(ch, t.TempDir())
	require.NoError(t, err)
	return path
}

// A packaged chart renders exactly as the directory it was packaged from.
func TestRenderPackagedChart(t *testing.T) {
	opts := RenderOptions{ReleaseName: "chat", Namespace: "ml", Set: []string{"replicas=3"}}
	dir, err := Load(handwritten)
	require.NoError(t, err)
	tgz, err := Load(packageChart(t, handwritten))
	require.NoError(t, err)
	want, err := Render(dir, opts)
	require.NoError(t, err)
	got, err := Render(tgz, opts)
	require.NoError(t, err)
	assert.Equal(t, want.Manifest, got.Manifest)
	assert.Equal(t, want.Chart, got.Chart)
}

// TestRenderKeepsTheChartsOwnLabels: vllmctl marks objects with its own
// keys and leaves every label the chart renders as it is, its
// app.kubernetes.io/instance and managed-by among them (KServe's chart
// sets instance to its component's name; tools select on it).
func TestRenderKeepsTheChartsOwnLabels(t *testing.T) {
	ch, err := Load(writeChart(t, map[string]string{
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels:\n" +
			"    app.kubernetes.io/instance: kserve-controller-manager\n    team: ml\n" +
			"  annotations:\n    note: kept\n",
		"templates/plain.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n",
	}))
	require.NoError(t, err)
	r, err := Render(ch, RenderOptions{ReleaseName: "r", Namespace: "ns"})
	require.NoError(t, err)
	require.Len(t, r.Objects, 2)
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range r.Objects {
		byName[o.GetName()] = o
	}
	assert.Equal(t, map[string]string{
		"app.kubernetes.io/instance": "kserve-controller-manager", "team": "ml",
		owner.LabelManagedBy: "vllmctl", owner.LabelRelease: "r",
	}, byName["cm"].GetLabels())
	assert.Equal(t, map[string]string{"note": "kept", owner.AnnotationNamespace: "ns"}, byName["cm"].GetAnnotations())
	assert.Equal(t, map[string]string{owner.LabelManagedBy: "vllmctl", owner.LabelRelease: "r"}, byName["plain"].GetLabels(),
		"no app.kubernetes.io/instance where the chart sets none")
	assert.Contains(t, r.Manifest, "app.kubernetes.io/instance: kserve-controller-manager")
}
