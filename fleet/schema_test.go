package fleet

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// fileSchema compiles docs/schema/fleet-file.schema.json.
func fileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "docs", "schema", "fleet-file.schema.json"))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	sch, err := c.Compile(path)
	require.NoError(t, err)
	return sch
}

func schemaValidate(t *testing.T, sch *jsonschema.Schema, doc string) error {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(doc))
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(js, &v))
	return sch.Validate(v)
}

// The schema for editors and the parser agree: what one accepts, the
// other does, for the checks a schema can express.
func TestFileSchemaAgreesWithParse(t *testing.T) {
	sch := fileSchema(t)
	require.NoError(t, schemaValidate(t, sch, validFleet))
	_, err := Parse("/f.yaml", []byte(validFleet))
	require.NoError(t, err)
	for _, doc := range []string{
		"release: r\ntargets: [{name: a, context: c}]\nwaves: [[a]]\nbogus: 1\n",
		"release: r\ntargets: [{name: a, context: c, kontext: d}]\nwaves: [[a]]\n",
		"release: r\ntargets: [{name: a, context: c}]\nwaves: [[a]]\npolicy: {onFailure: undo}\n",
		"release: r\ntargets: [{name: a, context: c}]\nwaves: [[a]]\npolicy: {maxParallel: 0}\n",
		"release: r\ntargets: [{name: a, context: c}]\nwaves: [[a]]\npolicy: {soak: forever}\n",
		"release: r\ntargets: [{name: a, context: c}]\nwaves: [[a]]\nset: [novalue]\n",
		"release: r\ntargets: [{name: fleet, context: c}]\nwaves: [[fleet]]\n",
		"targets: [{name: a, context: c}]\nwaves: [[a]]\n",
		"release: r\ntargets: [{name: a}]\nwaves: [[a]]\n",
	} {
		assert.Error(t, schemaValidate(t, sch, doc), "schema: %s", doc)
		_, err := Parse("/f.yaml", []byte(doc))
		assert.Error(t, err, "parse: %s", doc)
	}
}
