package charts

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

const (
	umbrella    = "testdata/charts/umbrella"
	missingDeps = "testdata/charts/missingdeps"
)

// umbrellaDir returns a copy of the umbrella chart with its cache
// subchart packed as charts/cache-0.1.4.tgz (by Helm's chartutil.Save, as
// `helm package` and `helm dependency update` do), next to the web and
// worker subcharts vendored as directories.
func umbrellaDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "umbrella")
	copyDir(t, umbrella, dir)
	src, err := loader.LoadDir("testdata/charts/umbrella-src/cache")
	require.NoError(t, err)
	_, err = chartutil.Save(src, filepath.Join(dir, "charts"))
	require.NoError(t, err)
	return dir
}

// copyDir copies the directory tree src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	}))
}

// dependencyRenderCases are the golden and Helm comparison cases of
// charts with subcharts.
func dependencyRenderCases() []renderCase {
	opts := func(set ...string) RenderOptions {
		return RenderOptions{ReleaseName: "shop", Namespace: "apps", Set: set}
	}
	return []renderCase{
		{name: "umbrella-defaults", opts: opts(), setup: umbrellaDir},
		{name: "umbrella-off", setup: umbrellaDir,
			opts: opts("web.enabled=false", "tags.backend=false", "worker-b.enabled=false")},
		{name: "umbrella-nested-off", setup: umbrellaDir, opts: opts("web.inner.enabled=false")},
		{name: "umbrella-overrides", setup: umbrellaDir, opts: RenderOptions{
			ReleaseName: "shop", Namespace: "apps",
			ValueFiles: []string{"testdata/values/umbrella-staging.yaml"},
			Set:        []string{"global.team=search"},
		}},
		{name: "umbrella-web-off", setup: umbrellaDir, opts: opts("web.enabled=false")},
		{name: "stray-version", setup: strayVersionChart, opts: opts()},
	}
}

// strayVersionChart writes a chart whose charts/ holds its dependency in a
// version outside the declared range: Helm renders it anyway, without the
// dependency's alias or condition.
func strayVersionChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "stray")
	writeFiles(t, dir, map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: stray\nversion: 0.1.0\ndependencies:\n" +
			"  - name: x\n    version: 2.0.0\n    repository: file://../x\n    alias: z\n    condition: z.enabled\n",
		"values.yaml":                "z:\n  enabled: false\n",
		"charts/x/Chart.yaml":        "apiVersion: v2\nname: x\nversion: 1.0.0\n",
		"charts/x/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Name }}\n",
		"templates/cm.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
	})
	return dir
}

func TestStrayVersionWarns(t *testing.T) {
	ch, err := Load(strayVersionChart(t))
	require.NoError(t, err)
	r, err := Render(ch, RenderOptions{ReleaseName: "shop", Namespace: "apps"})
	require.NoError(t, err)
	assert.Equal(t, []string{"dependency x 2.0.0 (file://../x) as z: charts/ holds x 1.0.0, outside that range: rendering it as Helm does, " +
		"as a subchart no dependency declares (vendor it with `vllmctl dependency update CHART`)"}, r.Warnings)
	assert.Contains(t, r.Manifest, "name: shop-x")
}

func TestRenderSubcharts(t *testing.T) {
	dir := umbrellaDir(t)
	ch, err := Load(dir)
	require.NoError(t, err)
	tests := []struct {
		name  string
		set   []string
		objs  []string
		data  map[string]string // data of ConfigMap shop-umbrella
		crds  []string
		warns []string
	}{
		{"everything on", nil,
			[]string{"ConfigMap/shop-cache", "ConfigMap/shop-umbrella", "ConfigMap/shop-worker-a", "ConfigMap/shop-worker-b", "Service/shop-inner", "Deployment/shop-web"},
			map[string]string{"webPort": "8080", "webPath": "/healthz", "cacheSettings": `{"size":"medium","ttl":60}`, "subcharts": "cache,web,worker-a,worker-b"},
			[]string{"accelerators.example.com", "caches.example.com", "gadgets.example.com", "widgets.example.com"}, nil},
		{"condition, tag and the second alias off", []string{"web.enabled=false", "tags.backend=false", "worker-b.enabled=false"},
			[]string{"ConfigMap/shop-umbrella", "ConfigMap/shop-worker-a"},
			map[string]string{"webPort": "none", "webPath": "none", "cacheSettings": `{"size":"medium"}`, "subcharts": "worker-a"},
			[]string{"gadgets.example.com"}, nil},
		{"nested condition off", []string{"web.inner.enabled=false"},
			[]string{"ConfigMap/shop-cache", "ConfigMap/shop-umbrella", "ConfigMap/shop-worker-a", "ConfigMap/shop-worker-b", "Deployment/shop-web"},
			nil, []string{"accelerators.example.com", "caches.example.com", "gadgets.example.com", "widgets.example.com"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Render(ch, RenderOptions{ReleaseName: "shop", Namespace: "apps", Set: tt.set})
			require.NoError(t, err)
			var got []string
			for _, o := range r.Objects {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			assert.Equal(t, tt.objs, got)
			for _, o := range r.Objects {
				if o.GetName() == "shop-umbrella" {
					for k, v := range tt.data {
						assert.Equal(t, v, o.Object["data"].(map[string]any)[k], k)
					}
				}
			}
			var crds []string
			for _, c := range r.CRDs {
				crds = append(crds, c.GetName())
				assert.Empty(t, c.GetLabels(), "CRDs are as written")
			}
			assert.Equal(t, tt.crds, crds)
			assert.Equal(t, tt.warns, r.Warnings)
			assert.NotContains(t, r.Manifest, "CustomResourceDefinition")
		})
	}
}

func TestRenderSources(t *testing.T) {
	ch, err := Load(umbrellaDir(t))
	require.NoError(t, err)
	r, err := Render(ch, RenderOptions{ReleaseName: "shop", Namespace: "apps"})
	require.NoError(t, err)
	got := map[string]string{}
	for _, o := range r.Objects {
		got[o.GetKind()+"/"+o.GetName()] = r.Source(o)
	}
	assert.Equal(t, map[string]string{
		"ConfigMap/shop-cache":    "umbrella/charts/cache/templates/configmap.yaml",
		"ConfigMap/shop-umbrella": "umbrella/templates/configmap.yaml",
		"ConfigMap/shop-worker-a": "umbrella/charts/worker-a/templates/configmap.yaml",
		"ConfigMap/shop-worker-b": "umbrella/charts/worker-b/templates/configmap.yaml",
		"Service/shop-inner":      "umbrella/charts/web/charts/inner/templates/service.yaml",
		"Deployment/shop-web":     "umbrella/charts/web/templates/deployment.yaml",
	}, got)
	o := r.Objects[0].DeepCopy()
	require.NoError(t, SetDefaultNamespace(r.Objects[:1], "apps", nil))
	assert.Equal(t, r.Source(o), r.Source(r.Objects[0]), "found after the namespace is set")
}

// chartState is what dependency processing could change in a chart tree.
func chartState(t *testing.T, c *chart.Chart) map[string]any {
	t.Helper()
	meta, err := json.Marshal(c.Metadata)
	require.NoError(t, err)
	values, err := json.Marshal(c.Values)
	require.NoError(t, err)
	var deps []any
	for _, d := range c.Dependencies() {
		assert.Same(t, c, d.Parent(), "parent of %s", d.Name())
		deps = append(deps, chartState(t, d))
	}
	return map[string]any{"metadata": string(meta), "values": string(values), "dependencies": deps}
}

// TestRenderLeavesChartUnchanged renders one loaded chart several times,
// with dependencies on and off: the chart stays as loaded, and the same
// options render the same result every time.
func TestRenderLeavesChartUnchanged(t *testing.T) {
	for _, dir := range []string{umbrellaDir(t), missingDeps} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ch, err := Load(dir)
			require.NoError(t, err)
			// The chart as loaded (two loads may list subcharts in another
			// order: compare with this one's own state).
			want := chartState(t, ch)

			var first *Rendered
			for _, set := range [][]string{nil, {"web.enabled=false", "tags.backend=false"}, {"worker-b.enabled=false"}, nil} {
				r, err := Render(ch, RenderOptions{ReleaseName: "shop", Namespace: "apps", Set: set})
				require.NoError(t, err)
				assert.Equal(t, want, chartState(t, ch), "after rendering with %v", set)
				if first == nil {
					first = r
				} else if set == nil {
					assert.Equal(t, first.Manifest, r.Manifest)
					assert.Equal(t, first.Values, r.Values)
					assert.Equal(t, first.Warnings, r.Warnings)
				}
			}
		})
	}
}

func TestSubchartSchemaViolation(t *testing.T) {
	ch, err := Load(umbrellaDir(t))
	require.NoError(t, err)
	tests := []struct {
		name   string
		set    []string
		path   string
		source string
		msg    string
	}{
		{"subchart value", []string{"web.replicas=zero"}, "web.replicas",
			"values do not match the schema of chart umbrella/charts/web", "got string, want integer"},
		{"subchart minimum", []string{"web.replicas=0"}, "web.replicas",
			"values do not match the schema of chart umbrella/charts/web", "minimum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(ch, RenderOptions{ReleaseName: "shop", Namespace: "apps", Set: tt.set})
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tt.path, ie.Path)
			assert.Equal(t, tt.source, ie.Source)
			assert.Contains(t, ie.Msg, tt.msg)
			assert.Contains(t, err.Error(), tt.path)
		})
	}
	// The subchart's schema does not apply when it is disabled, as in Helm.
	_, err = Render(ch, RenderOptions{ReleaseName: "shop", Namespace: "apps", Set: []string{"web.replicas=zero", "web.enabled=false"}})
	assert.NoError(t, err)
}

func TestMissingDependencies(t *testing.T) {
	ch, err := Load(missingDeps)
	require.NoError(t, err)
	tests := []struct {
		name     string
		set      []string
		chartDir string
		warnings []string
		err      []string // substrings of the error; nil: no error
	}{
		{name: "all disabled: rendered without them", warnings: []string{
			"dependency redis 17.3.2 (https://charts.example.com/stable) is not in charts/ and is disabled (condition redis.enabled): rendering without it",
			"dependency helper ^1.0.0 (file://../missingdeps-src/helper) is not in charts/ and is disabled (tags extras): rendering without it",
			"dependency metrics 3.x (oci://registry.example.com/charts) is not in charts/api/charts/ and is disabled (condition api.metrics.enabled): rendering without it",
		}},
		{name: "remote dependency enabled", set: []string{"redis.enabled=true"}, chartDir: "./missingdeps", err: []string{
			"chart missingdeps: dependency redis 17.3.2 (https://charts.example.com/stable) is enabled (condition redis.enabled) but not in charts/: vendor it with `vllmctl dependency update ./missingdeps`",
		}},
		{name: "file dependency enabled by its tag", set: []string{"tags.extras=true"}, err: []string{
			"dependency helper ^1.0.0 (file://../missingdeps-src/helper) is enabled (tags extras) but not in charts/: vendor it with `vllmctl dependency update CHART`",
		}},
		{name: "nested dependency enabled", set: []string{"api.metrics.enabled=true"}, chartDir: "mc", err: []string{
			"dependency metrics 3.x (oci://registry.example.com/charts) is enabled (condition api.metrics.enabled) but not in charts/api/charts/: vendor it with `vllmctl dependency update mc/charts/api`",
		}},
		{name: "two enabled: both named", set: []string{"redis.enabled=true", "tags.extras=true"}, err: []string{"redis 17.3.2", "helper ^1.0.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Render(ch, RenderOptions{ReleaseName: "shop", Namespace: "apps", Set: tt.set, ChartDir: tt.chartDir})
			if tt.err != nil {
				var ie *InputError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, 2, ie.ExitCode())
				for _, s := range tt.err {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.warnings, r.Warnings)
			require.Len(t, r.Objects, 2)
			assert.Equal(t, "api", r.Objects[1].Object["data"].(map[string]any)["subcharts"], "only the vendored subchart")
		})
	}
}

// TestPlaceholderVersion checks that the placeholder of a missing
// dependency satisfies its version constraint, as Helm checks it.
func TestPlaceholderVersion(t *testing.T) {
	for _, c := range []string{
		"17.3.2", "v1.2.3", "^1.2.0", "~0.1.0", ">=2.0.0 <3.0.0", "<1.0.0", "<2.0.0", "1.x", "3.x", "*", ">1.2.3",
		"!=1.0.0", "^0.0.3", ">= 1.2.3-alpha.1", "1.2.3-rc.1", "~1", ">=1.0.0, <1.1.0", "<0.1.0 || >5.0.0", "=1.0.0",
	} {
		t.Run(c, func(t *testing.T) {
			v := placeholderVersion(c)
			assert.True(t, chartutil.IsCompatibleRange(c, v), "%s does not satisfy %s", v, c)
		})
	}
	assert.Equal(t, "0.0.0", placeholderVersion("not a constraint"))
}
