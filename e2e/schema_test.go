//go:build e2e

package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// schemas are the compiled JSON Schemas of docs/schema, by name.
var schemas sync.Map // name -> *jsonschema.Schema

// requireSchemaValid checks that doc, the stdout of a `-o json` run, is
// one JSON document valid against docs/schema/<name>.schema.json (see
// docs/json-output.md).
func requireSchemaValid(t *testing.T, name, doc string) {
	t.Helper()
	sch, ok := schemas.Load(name)
	if !ok {
		path, err := filepath.Abs(filepath.Join("..", "docs", "schema", name+".schema.json"))
		require.NoError(t, err)
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		compiled, err := c.Compile(path)
		require.NoError(t, err, "schema %s", name)
		sch, _ = schemas.LoadOrStore(name, compiled)
	}
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), "one JSON document:\n%s", doc)
	require.NoError(t, sch.(*jsonschema.Schema).Validate(v), "%s document does not match docs/schema/%s.schema.json:\n%s", name, name, doc)
}
