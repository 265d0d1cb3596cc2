package charts

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/internal/owner"
)

// corpusDir holds public charts vendored with their licences (see its
// README.md and hack/vendor-corpus.sh); corpusValuesDir holds more value
// files for them, written for this test: <chart>/<name>.yaml.
const (
	corpusDir       = "testdata/corpus"
	corpusValuesDir = "testdata/corpus-values"
)

// The corpus renders with a fixed release, namespace and Kubernetes
// version, given to both tools.
const (
	corpusRelease     = "corpus"
	corpusNamespace   = "fidelity"
	corpusKubeVersion = "v1.34.2"
)

// The keys vllmctl adds to every object on purpose, and only those, are
// left out of the comparison: label app.kubernetes.io/managed-by when it
// is "vllmctl" (Helm renders the chart's own value, often "Helm"), label
// vllmctl.io/release and annotation vllmctl.io/release-namespace.
// app.kubernetes.io/instance is compared: it is the chart's. The keys are
// owner.Mark's.

// corpusRefusals are the corpus renders that both tools refuse, for the
// same reason: each names a text both error messages hold. Any other
// refusal fails the test.
var corpusRefusals = map[string]string{
	// The chart's defaults leave the database password unset, which its
	// template refuses with `required` (its CI value files set one).
	"prometheus-postgres-exporter": "config.datasource.password is required when not using config.datasource.passwordSecret",
}

// corpusCase is one render of a corpus chart: with its defaults, or with
// one value file (one of its CI value files, or one of corpusValuesDir).
type corpusCase struct {
	name   string // "<chart>", "<chart>/ci/<file>" or "<chart>/corpus-values/<file>"
	dir    string
	values []string
}

// corpusCases lists every chart of the corpus with its defaults, with
// each of its ci/*.yaml and ci/*.yml value files, and with each value file
// of corpusValuesDir/<chart>.
func corpusCases(t *testing.T) []corpusCase {
	t.Helper()
	entries, err := os.ReadDir(corpusDir)
	require.NoError(t, err)
	var cases []corpusCase
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(corpusDir, e.Name())
		cases = append(cases, corpusCase{name: e.Name(), dir: dir})
		for _, v := range [][2]string{{"ci", filepath.Join(dir, "ci")}, {"corpus-values", filepath.Join(corpusValuesDir, e.Name())}} {
			label, vdir := v[0], v[1]
			files, err := os.ReadDir(vdir)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			require.NoError(t, err)
			for _, f := range files {
				if n := f.Name(); !f.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
					cases = append(cases, corpusCase{
						name:   e.Name() + "/" + label + "/" + n,
						dir:    dir,
						values: []string{filepath.Join(vdir, n)},
					})
				}
			}
		}
	}
	require.NotEmpty(t, cases)
	return cases
}

// TestCorpusMatchesHelmTemplate renders every chart of the corpus (public
// charts, vendored) with vllmctl and with `helm template`, and compares
// the objects one by one, keyed by apiVersion, kind, namespace and name:
// the same objects, each equal (so ConfigMap and Secret data byte for
// byte) once vllmctl's own keys are left out (corpusComparable). The CRDs
// of crds/ directories are compared too: Rendered.CRDs with what
// `helm template --include-crds` prints from crds/. When vllmctl refuses
// a chart, Helm must refuse it as well.
//
// A field that differs between two runs of `helm template` itself (a
// random value: htpasswd's bcrypt salt, randAlphaNum, genCA) cannot be
// compared: only when vllmctl's differs, Helm is run a second time and
// the fields that differ between Helm's two renders are left out (and
// logged), nothing else.
func TestCorpusMatchesHelmTemplate(t *testing.T) {
	bin := helmBin(t)
	for _, tc := range corpusCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := RenderOptions{
				ReleaseName: corpusRelease,
				Namespace:   corpusNamespace,
				ValueFiles:  tc.values,
				KubeVersion: corpusKubeVersion,
			}
			ch, err := Load(tc.dir)
			require.NoError(t, err)
			ours, ourErr := Render(ch, opts)

			helm := func() (objs, crds []*unstructured.Unstructured, stderr string, err error) {
				stdout, stderr, err := runHelmTemplate(t, bin, tc.dir, opts,
					"--kube-version", corpusKubeVersion, "--include-crds")
				if err != nil {
					return nil, nil, stderr, err
				}
				objs, crds = parseHelmOutput(t, stdout)
				return objs, crds, stderr, nil
			}
			theirs, theirCRDs, stderr, helmErr := helm()
			if ourErr != nil || helmErr != nil {
				require.Error(t, ourErr, "vllmctl renders what helm template refuses: %s", stderr)
				require.Error(t, helmErr, "helm template renders what vllmctl refuses: %v", ourErr)
				reason, ok := corpusRefusals[tc.name]
				require.True(t, ok, "both refuse the chart, unexpectedly\nvllmctl: %v\nhelm:    %s", ourErr, stderr)
				assert.Contains(t, ourErr.Error(), reason, "vllmctl's reason")
				assert.Contains(t, stderr, reason, "helm's reason")
				t.Logf("both refuse the chart, as expected\nvllmctl: %v\nhelm:    %s", ourErr, stderr)
				return
			}

			var again [][]*unstructured.Unstructured // Helm's second render, if needed
			random := func(i int, key string) map[string]bool {
				if again == nil {
					objs, crds, stderr, err := helm()
					require.NoError(t, err, "helm template, again: %s", stderr)
					again = [][]*unstructured.Unstructured{objs, crds}
				}
				first := corpusIndex(t, [][]*unstructured.Unstructured{theirs, theirCRDs}[i])[key]
				second, ok := corpusIndex(t, again[i])[key]
				require.True(t, ok, "helm template renders %s only once in two", key)
				paths := map[string]bool{}
				for _, d := range valueDiffs("", first.Object, second.Object) {
					paths[d.path] = true
					t.Logf("%s %s: helm template renders it differently each time, not compared", key, d.path)
				}
				return paths
			}
			compareCorpusObjects(t, "object", theirs, withHooks(ours), func(k string) map[string]bool { return random(0, k) })
			compareCorpusObjects(t, "CRD", theirCRDs, ours.CRDs, func(k string) map[string]bool { return random(1, k) })
		})
	}
}

// compareCorpusObjects asserts that want (Helm's) and got (vllmctl's) are
// the same objects with the same content, naming every differing field.
// random returns the fields of an object that Helm renders differently
// each time; it is called only for an object that differs.
func compareCorpusObjects(t *testing.T, what string, want, got []*unstructured.Unstructured, random func(key string) map[string]bool) {
	t.Helper()
	w, g := corpusIndex(t, want), corpusIndex(t, got)
	wantKeys, gotKeys := keys(w), keys(g)
	for _, k := range wantKeys {
		if _, ok := g[k]; !ok {
			t.Errorf("%s %s: rendered by helm template, not by vllmctl", what, k)
		}
	}
	for _, k := range gotKeys {
		if _, ok := w[k]; !ok {
			t.Errorf("%s %s: rendered by vllmctl, not by helm template", what, k)
		}
	}
	for _, k := range wantKeys {
		if _, ok := g[k]; !ok {
			continue
		}
		wo, gotObj := corpusComparable(w[k], g[k])
		diffs := valueDiffs("", wo, gotObj)
		if len(diffs) == 0 {
			continue
		}
		skip := random(k)
		var msgs []string
		for _, d := range diffs {
			if !skip[d.path] {
				msgs = append(msgs, d.msg)
			}
		}
		if len(msgs) > 0 {
			t.Errorf("%s %s differs from helm template's:\n  %s", what, k, strings.Join(msgs, "\n  "))
		}
	}
}

// corpusIndex indexes objs by "apiVersion Kind namespace/name".
func corpusIndex(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		key := o.GetAPIVersion() + " " + ObjectRef(o)
		require.NotContains(t, out, key, "duplicate object")
		out[key] = o
	}
	return out
}

// corpusComparable returns copies of Helm's object and of vllmctl's
// without vllmctl's own keys, and only those: label
// app.kubernetes.io/managed-by when vllmctl's is "vllmctl" (which replaces
// the chart's value, so the label is left out on both sides), label
// vllmctl.io/release and annotation vllmctl.io/release-namespace (left out
// of vllmctl's object; Helm's has none). A labels or annotations map left
// empty is removed, on both sides alike.
func corpusComparable(helm, ours *unstructured.Unstructured) (map[string]any, map[string]any) {
	h, o := helm.DeepCopy(), ours.DeepCopy()
	var both []string
	if o.GetLabels()[owner.LabelManagedBy] == owner.ManagedByVllmctl {
		both = []string{owner.LabelManagedBy}
	}
	withoutKeys(h, both, nil)
	withoutKeys(o, append(both, owner.LabelRelease), []string{owner.AnnotationNamespace})
	return h.Object, o.Object
}

// parseHelmOutput parses the output of `helm template --include-crds`
// independently of vllmctl's parser, the way Helm's kube client reads a
// manifest (Kubernetes' YAML stream reader, then YAML to JSON): it returns
// the objects of the templates and, apart, the CRDs of crds/ directories
// (the documents whose "# Source:" is a crds/ file).
func parseHelmOutput(t *testing.T, stdout string) (objs, crds []*unstructured.Unstructured) {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stdout)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		source := ""
		for _, line := range strings.Split(string(doc), "\n") {
			if s, ok := strings.CutPrefix(line, "# Source: "); ok {
				source = s
				break
			}
		}
		data, err := yaml.YAMLToJSON(doc)
		require.NoError(t, err, "helm output, %s", source)
		if s := strings.TrimSpace(string(data)); s == "null" || s == "" {
			continue
		}
		var items []*unstructured.Unstructured
		o := &unstructured.Unstructured{}
		require.NoError(t, o.UnmarshalJSON(data), "helm output, %s", source)
		if o.IsList() {
			list, err := o.ToList()
			require.NoError(t, err)
			for i := range list.Items {
				items = append(items, &list.Items[i])
			}
		} else {
			items = append(items, o)
		}
		if isCRDSource(source) {
			crds = append(crds, items...)
		} else {
			objs = append(objs, items...)
		}
	}
	return objs, crds
}

// isCRDSource reports whether a "# Source:" path is a file of a crds/
// directory (of the chart or of a subchart), not a template.
func isCRDSource(source string) bool {
	parts := strings.Split(source, "/")
	return len(parts) > 1 && slices.Contains(parts[:len(parts)-1], "crds") &&
		!slices.Contains(parts[:len(parts)-1], "templates")
}

// fieldDiff is one field at which two objects differ.
type fieldDiff struct {
	path string // ".metadata.labels.x", ".spec.containers[0].args[1]"
	msg  string // the path with both values
}

func TestIsCRDSource(t *testing.T) {
	assert.True(t, isCRDSource("shop/crds/widgets.yaml"))
	assert.True(t, isCRDSource("shop/charts/web/crds/a/b.yaml"))
	assert.False(t, isCRDSource("shop/templates/crds/widget.yaml"))
	assert.False(t, isCRDSource("shop/templates/crds.yaml"))
	assert.False(t, isCRDSource(""))
}

// valueDiffs lists the paths at which want (Helm's) and got (vllmctl's)
// differ, with both values, down to the leaves (strings are compared byte
// for byte).
func valueDiffs(path string, want, got any) []fieldDiff {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		var out []fieldDiff
		for _, k := range keys(w) {
			p := path + "." + k
			gv, ok := g[k]
			if !ok {
				out = append(out, fieldDiff{p, fmt.Sprintf("%s: helm %s, vllmctl has no such field", p, short(w[k]))})
				continue
			}
			out = append(out, valueDiffs(p, w[k], gv)...)
		}
		for _, k := range keys(g) {
			if _, ok := w[k]; !ok {
				p := path + "." + k
				out = append(out, fieldDiff{p, fmt.Sprintf("%s: vllmctl %s, helm has no such field", p, short(g[k]))})
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			break
		}
		var out []fieldDiff
		for i := range w {
			out = append(out, valueDiffs(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	}
	if reflect.DeepEqual(want, got) {
		return nil
	}
	return []fieldDiff{{path, fmt.Sprintf("%s: helm %s, vllmctl %s", path, short(want), short(got))}}
}

// short formats v for a message, with its Go type (so 1 and "1" differ).
func short(v any) string {
	s := fmt.Sprintf("%#v", v)
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
