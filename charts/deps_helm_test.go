package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// writeFiles writes files (paths relative to dir) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// assertSameObjects compares objects rendered by vllmctl with those
// rendered by Helm, ignoring the two labels vllmctl adds.
func assertSameObjects(t *testing.T, theirs, ours []*unstructured.Unstructured) {
	t.Helper()
	want, got := comparable(t, theirs), comparable(t, ours)
	wantKeys := keys(want)
	require.Equal(t, wantKeys, keys(got), "the same objects")
	for _, k := range wantKeys {
		assert.Equal(t, want[k], got[k], k)
	}
}

// TestMissingDependenciesMatchVendoredHelm renders the chart whose
// disabled dependencies are not vendored with vllmctl, and a copy with
// charts of those names and versions vendored with `helm template`: the
// objects are the same. Helm itself refuses the un-vendored chart.
func TestMissingDependenciesMatchVendoredHelm(t *testing.T) {
	bin := helmBin(t)
	opts := RenderOptions{ReleaseName: "shop", Namespace: "apps"}

	_, stderr, err := runHelmTemplate(t, bin, missingDeps, opts)
	require.Error(t, err, "helm refuses a chart with dependencies missing from charts/")
	assert.Contains(t, stderr, "missing in charts/ directory: redis, helper")

	vendored := filepath.Join(t.TempDir(), "missingdeps")
	copyDir(t, missingDeps, vendored)
	stand := func(name, version string) map[string]string {
		return map[string]string{
			"Chart.yaml":               "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n",
			"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-" + name + "-vendored\n",
		}
	}
	for dir, files := range map[string]map[string]string{
		"charts/redis":              stand("redis", "17.3.2"),
		"charts/helper":             stand("helper", "1.4.0"),
		"charts/api/charts/metrics": stand("metrics", "3.1.0"),
	} {
		writeFiles(t, filepath.Join(vendored, dir), files)
	}
	stdout, stderr, err := runHelmTemplate(t, bin, vendored, opts)
	require.NoError(t, err, "helm template: %s", stderr)
	theirs, err := parseObjects(map[string]string{"helm template output": stdout})
	require.NoError(t, err)

	ch, err := Load(missingDeps)
	require.NoError(t, err)
	ours, err := Render(ch, opts)
	require.NoError(t, err)
	assert.Len(t, ours.Warnings, 3)
	assertSameObjects(t, theirs, withHooks(ours))

	// Vendored, vllmctl renders it as Helm does, without warnings.
	ch, err = Load(vendored)
	require.NoError(t, err)
	again, err := Render(ch, opts)
	require.NoError(t, err)
	assert.Empty(t, again.Warnings)
	assert.Equal(t, ours.Manifest, again.Manifest)

	// Enabled, the vendored stand-in renders, in both.
	opts.Set = []string{"redis.enabled=true"}
	stdout, stderr, err = runHelmTemplate(t, bin, vendored, opts)
	require.NoError(t, err, "helm template: %s", stderr)
	theirs, err = parseObjects(map[string]string{"helm template output": stdout})
	require.NoError(t, err)
	enabled, err := Render(ch, opts)
	require.NoError(t, err)
	assertSameObjects(t, theirs, withHooks(enabled))
	assert.Contains(t, enabled.Manifest, "shop-redis-vendored")
}

// TestIncludeCRDsMatchesHelm compares Rendered.CRDs with the CRDs
// `helm template --include-crds` prints, with subcharts on and off.
func TestIncludeCRDsMatchesHelm(t *testing.T) {
	bin := helmBin(t)
	dir := umbrellaDir(t)
	ch, err := Load(dir)
	require.NoError(t, err)
	for _, set := range [][]string{nil, {"web.enabled=false"}, {"tags.backend=false", "web.enabled=false"}} {
		t.Run(fmt.Sprintf("set %v", set), func(t *testing.T) {
			opts := RenderOptions{ReleaseName: "shop", Namespace: "apps", Set: set}
			stdout, stderr, err := runHelmTemplate(t, bin, dir, opts, "--include-crds")
			require.NoError(t, err, "helm template: %s", stderr)
			all, err := parseObjects(map[string]string{"helm template output": stdout})
			require.NoError(t, err)
			var crds, others []*unstructured.Unstructured
			for _, o := range all {
				if o.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, o)
				} else {
					others = append(others, o)
				}
			}
			require.NotEmpty(t, crds)

			r, err := Render(ch, opts)
			require.NoError(t, err)
			assertSameObjects(t, crds, r.CRDs)
			assertSameObjects(t, others, withHooks(r))
		})
	}
}

// TestSubchartSchemaFailsInHelmToo checks that a value a subchart's
// values.schema.json rejects fails `helm template` too.
func TestSubchartSchemaFailsInHelmToo(t *testing.T) {
	bin := helmBin(t)
	dir := umbrellaDir(t)
	opts := RenderOptions{ReleaseName: "shop", Namespace: "apps", Set: []string{"web.replicas=zero"}}
	ch, err := Load(dir)
	require.NoError(t, err)
	_, err = Render(ch, opts)
	var ie *InputError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "web.replicas", ie.Path)

	_, stderr, err := runHelmTemplate(t, bin, dir, opts)
	require.Error(t, err, "helm template should fail too")
	assert.Contains(t, stderr, "web:\n- at '/replicas'")
	t.Logf("vllmctl: %v\nhelm:    %s", ie, stderr)
}
