package charts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/owner"
)

// helmBin returns the Helm 4 binary named by HELM_BIN, or skips the test
// (fails it when CI is set: CI must not pass without the comparison).
func helmBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HELM_BIN")
	if bin == "" {
		msg := "HELM_BIN is not set: the comparison with `helm template` needs Helm v4.3.1; " +
			"run `HELM_BIN=$(hack/install-helm.sh) go test ./charts` (make unit does this)"
		if ci := os.Getenv("CI"); ci != "" && ci != "false" {
			t.Fatal("CI is set, so this test may not be skipped: " + msg)
		}
		t.Skip(msg)
	}
	return bin
}

// runHelmTemplate runs `helm template` with the same inputs as opts,
// hermetically (no kubeconfig, no user Helm config). The chart directory
// of a built-in chart is the one embedded, in this package's directory.
func runHelmTemplate(t *testing.T, bin, chartRef string, opts RenderOptions, extra ...string) (stdout, stderr string, err error) {
	t.Helper()
	dir := chartRef
	if IsBuiltin(chartRef) {
		dir = "./" + chartRef
	}
	args := []string{"template", opts.ReleaseName, dir, "--namespace", opts.Namespace}
	for _, f := range opts.ValueFiles {
		args = append(args, "--values", f)
	}
	for _, s := range opts.Set {
		args = append(args, "--set", s)
	}
	for _, s := range opts.SetString {
		args = append(args, "--set-string", s)
	}
	for _, s := range opts.SetJSON {
		args = append(args, "--set-json", s)
	}
	for _, s := range opts.SetFile {
		args = append(args, "--set-file", s)
	}
	for _, s := range opts.SetLiteral {
		args = append(args, "--set-literal", s)
	}
	args = append(args, extra...)
	return runHelm(t, bin, args...)
}

// runHelm runs the Helm binary with args, hermetically (no kubeconfig, no
// user Helm config or repositories).
func runHelm(t *testing.T, bin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "kubeconfig"),
	)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// comparable strips what vllmctl adds on purpose (owner.Mark's keys: the
// labels app.kubernetes.io/managed-by and vllmctl.io/release, the
// annotation vllmctl.io/release-namespace) so objects rendered by vllmctl
// and by Helm compare equal, and indexes them by "apiVersion Kind
// namespace/name". Every other label, app.kubernetes.io/instance among
// them, must be as Helm renders it.
func comparable(t *testing.T, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range objs {
		c := o.DeepCopy()
		withoutKeys(c, []string{owner.LabelManagedBy, owner.LabelRelease}, []string{owner.AnnotationNamespace})
		key := c.GetAPIVersion() + " " + ObjectRef(c)
		require.NotContains(t, out, key, "duplicate object")
		out[key] = c.Object
	}
	return out
}

// withoutKeys deletes the labels and annotations named from c, and its
// labels or annotations map when that is left empty (or was).
func withoutKeys(c *unstructured.Unstructured, labelKeys, annotationKeys []string) {
	labels := c.GetLabels()
	for _, k := range labelKeys {
		delete(labels, k)
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	} else {
		c.SetLabels(labels)
	}
	annotations := c.GetAnnotations()
	for _, k := range annotationKeys {
		delete(annotations, k)
	}
	if len(annotations) == 0 {
		unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
	} else {
		c.SetAnnotations(annotations)
	}
}

// TestMatchesHelmTemplate renders every golden case with vllmctl and with
// the real `helm template` and compares the objects (parsed, ignoring the
// two vllmctl labels).
func TestMatchesHelmTemplate(t *testing.T) {
	bin := helmBin(t)
	for _, tc := range renderCases() {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.chartDir(t)
			ch, err := Load(dir)
			require.NoError(t, err)
			ours, err := Render(ch, tc.opts)
			require.NoError(t, err)

			stdout, stderr, err := runHelmTemplate(t, bin, dir, tc.opts)
			require.NoError(t, err, "helm template: %s", stderr)
			theirs, err := parseObjects(map[string]string{"helm template output": stdout})
			require.NoError(t, err)

			want := comparable(t, theirs)
			got := comparable(t, withHooks(ours))
			wantKeys, gotKeys := keys(want), keys(got)
			require.Equal(t, wantKeys, gotKeys, "the same objects")
			for _, k := range wantKeys {
				assert.Equal(t, want[k], got[k], k)
			}
		})
	}
}

// TestBadInputFailsInHelmToo checks that what vllmctl refuses in a
// template or in the values, `helm template` refuses as well.
func TestBadInputFailsInHelmToo(t *testing.T) {
	bin := helmBin(t)
	tests := []struct {
		name  string
		chart string
		opts  RenderOptions
	}{
		{"required", handwritten, RenderOptions{Set: []string{"image.tag="}}},
		{"fail", handwritten, RenderOptions{Set: []string{"replicas=11"}}},
		{"schema", "vllm", RenderOptions{ValueFiles: []string{"testdata/bad/vllm-schema.yaml"}}},
		{"values file", handwritten, RenderOptions{ValueFiles: []string{"testdata/bad/values-bad.yaml"}}},
		{"--set", handwritten, RenderOptions{Set: []string{"replicas=1,image"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.ReleaseName, tt.opts.Namespace = "r", "ns"
			ch, err := Load(tt.chart)
			require.NoError(t, err)
			_, err = Render(ch, tt.opts)
			var ie *InputError
			require.ErrorAs(t, err, &ie)

			_, stderr, err := runHelmTemplate(t, bin, tt.chart, tt.opts)
			require.Error(t, err, "helm template should fail too")
			t.Logf("vllmctl: %v\nhelm:    %s", ie, stderr)
		})
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// BenchmarkRenderBuiltin renders the built-in chart with its defaults (the
// chart is loaded once, outside the loop).
func BenchmarkRenderBuiltin(b *testing.B) {
	ch, err := Load(DefaultChart)
	require.NoError(b, err)
	opts := RenderOptions{ReleaseName: "qwen", Namespace: "inference"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(ch, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadBuiltin loads the built-in chart from the embedded files.
func BenchmarkLoadBuiltin(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(DefaultChart); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBlockScalarEndingAFileMatchesHelm: a block scalar that ends a
// template file (no newline after it, as `{{- ... }}` at the end of a file
// leaves it) keeps its final line break, as in what Helm applies: Helm
// parses the manifest it joined with a newline after each file.
func TestBlockScalarEndingAFileMatchesHelm(t *testing.T) {
	ch := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: "v2", Name: "blocks", Version: "0.1.0"},
		Values:   map[string]any{"config": map[string]any{"rules": []any{"a", "b"}}},
		Templates: []*common.File{
			{Name: "templates/last.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: last\ndata:\n  config.yaml: |\n    {{- toYaml .Values.config | nindent 4 }}")},
			{Name: "templates/two.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: first\ndata:\n  a.txt: |\n    one\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: second\ndata:\n  b.txt: |\n    two")},
		},
	}
	opts := RenderOptions{ReleaseName: "r", Namespace: "ns"}
	ours, err := Render(ch, opts)
	require.NoError(t, err)
	data := map[string]map[string]any{}
	for _, o := range ours.Objects {
		d, _, _ := unstructured.NestedMap(o.Object, "data")
		data[o.GetName()] = d
	}
	assert.Equal(t, "rules:\n- a\n- b\n", data["last"]["config.yaml"], "the final line break kept")
	assert.Equal(t, "one\n", data["first"]["a.txt"])
	assert.Equal(t, "two\n", data["second"]["b.txt"])

	bin := helmBin(t)
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: blocks\nversion: 0.1.0\n",
		"values.yaml": "config:\n  rules: [a, b]\n",
	}
	for _, f := range ch.Templates {
		files[f.Name] = string(f.Data)
	}
	for name, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	stdout, stderr, err := runHelmTemplate(t, bin, dir, opts)
	require.NoError(t, err, "helm template: %s", stderr)
	theirs, err := parseObjects(map[string]string{"helm": stdout})
	require.NoError(t, err)
	assert.Equal(t, comparable(t, theirs), comparable(t, withHooks(ours)))
}

// withHooks returns the objects of r followed by its hooks' objects: what
// helm template prints.
func withHooks(r *Rendered) []*unstructured.Unstructured {
	return append(slices.Clone(r.Objects), HookObjects(r.Hooks)...)
}
