package charts

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const crdDoc = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %s
spec:
  group: example.com
  names: {kind: X, plural: xs}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
`

func crd(name string) string { return fmt.Sprintf(crdDoc, name) }

func TestRenderCRDs(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		want     []string // CRD names
		warnings int
		errFile  string // InputError.File; "" = no error
		errMsg   string
	}{
		{name: "sorted by name, comments and empty documents skipped", files: map[string]string{
			"crds/b.yaml":  "# two in one file\n" + crd("zebras.example.com") + "---\n---\n" + crd("apples.example.com"),
			"crds/a.json":  `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"mangos.example.com"}}`,
			"crds/README":  "not a manifest: ignored, as by Helm",
			"crds/e.yaml":  "# nothing\n",
			"templates/x":  "",
			"crds/n/c.yml": crd("nested.example.com"),
		}, want: []string{"apples.example.com", "mangos.example.com", "nested.example.com", "zebras.example.com"}},
		{name: "no crds/", files: map[string]string{}, want: nil},
		{name: "defined twice alike: once, no warning", files: map[string]string{
			"crds/a.yaml": crd("a.example.com"), "crds/b.yaml": crd("a.example.com"),
		}, want: []string{"a.example.com"}},
		{name: "defined twice differently: the first, a warning", files: map[string]string{
			"crds/a.yaml": crd("a.example.com"), "crds/b.yaml": crd("a.example.com") + "  preserveUnknownFields: false\n",
		}, want: []string{"a.example.com"}, warnings: 1},
		{name: "not a CRD", files: map[string]string{
			"crds/ok.yaml": crd("a.example.com"), "crds/bad.yaml": crd("b.example.com") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		}, errFile: "c/crds/bad.yaml", errMsg: "document 2: v1 ConfigMap cm is not a CustomResourceDefinition of apiextensions.k8s.io/v1"},
		{name: "an old CRD version", files: map[string]string{
			"crds/old.yaml": "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata:\n  name: old.example.com\n",
		}, errFile: "c/crds/old.yaml", errMsg: "is not a CustomResourceDefinition of apiextensions.k8s.io/v1"},
		{name: "invalid YAML", files: map[string]string{
			"crds/broken.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: [\n",
		}, errFile: "c/crds/broken.yaml", errMsg: "invalid YAML"},
		{name: "a template in crds/", files: map[string]string{
			"crds/t.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: {{ .Release.Name }}\n",
		}, errFile: "c/crds/t.yaml", errMsg: "document 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := Load(writeChart(t, tt.files))
			require.NoError(t, err)
			r, err := Render(ch, RenderOptions{ReleaseName: "r", Namespace: "ns"})
			if tt.errFile != "" {
				var ie *InputError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, "CRD file", ie.Source)
				assert.Equal(t, tt.errFile, ie.File)
				assert.Contains(t, err.Error(), tt.errMsg)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, c := range r.CRDs {
				got = append(got, c.GetName())
			}
			assert.Equal(t, tt.want, got)
			assert.Len(t, r.Warnings, tt.warnings)
			assert.Empty(t, r.Objects, "CRDs are not objects of the manifest")
		})
	}
}
