package charts

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// chartViolation is a schema violation with the chart whose schema it
// breaks and its values path from the top chart's values.
type chartViolation struct {
	schemaViolation
	chart string // Helm's ChartFullPath: "demo", "demo/charts/sub"
}

// schemaError turns the error of Helm's schema validation
// (util.ValidateAgainstSchema, which validates the values of the chart and
// of every subchart against their own values.schema.json) into an
// InputError naming the first offending values path, from the top chart's
// values ("sub.replicas" for a subchart's), and the chart whose schema it
// breaks; all the violations are in the message.
func schemaError(ch *chart.Chart, values map[string]any, err error) *InputError {
	var vs []chartViolation
	collectViolations(ch, values, "", &vs)
	ie := &InputError{Source: "values do not match the schema of chart " + ch.Name(), Err: err}
	if len(vs) == 0 {
		ie.Msg = strings.TrimSpace(err.Error())
		return ie
	}
	// Sorted by path for stable messages (the validator reports in map
	// order).
	slices.SortStableFunc(vs, func(a, b chartViolation) int { return cmp.Compare(a.Path, b.Path) })
	ie.Source = "values do not match the schema of chart " + vs[0].chart
	ie.Path = orRoot(vs[0].Path)
	msgs := []string{vs[0].Msg}
	for _, v := range vs[1:] {
		msgs = append(msgs, orRoot(v.Path)+": "+v.Msg)
	}
	ie.Msg = strings.Join(msgs, "; ")
	return ie
}

// collectViolations validates values against c's schema and the values
// of each subchart against the subchart's, as util.ValidateAgainstSchema
// does, recording each violation with its path from the top chart's
// values.
func collectViolations(c *chart.Chart, values map[string]any, prefix string, out *[]chartViolation) {
	if c.Schema != nil {
		if vs := schemaViolations(values, c.Schema); len(vs) > 0 {
			for _, v := range vs {
				v.Path = joinValuesPath(prefix, v.Path)
				*out = append(*out, chartViolation{schemaViolation: v, chart: c.ChartFullPath()})
			}
		}
	}
	for _, sub := range c.Dependencies() {
		raw, ok := values[sub.Name()]
		if !ok || raw == nil {
			continue
		}
		subPath := joinValuesPath(prefix, sub.Name())
		m, ok := raw.(map[string]any)
		if !ok {
			*out = append(*out, chartViolation{
				schemaViolation: schemaViolation{Path: subPath, Msg: fmt.Sprintf("invalid type for values: expected object (map), got %T", raw)},
				chart:           sub.ChartFullPath(),
			})
			continue
		}
		collectViolations(sub, m, subPath, out)
	}
}

// schemaViolations validates values against schemaJSON with the validator
// Helm's ValidateAgainstSingleSchema uses (jsonschema/v6, the document
// added as file:///values.schema.json) and returns the violations, read
// from the validator's error tree rather than from its text: the values
// path of each (an additional or missing property named, not its parent
// object) and what it breaks. The nodes that only group others
// ("validation failed") are left out when more specific ones exist; the
// value itself is never quoted (it may be a token). A schema this cannot
// compile (one that refers to an http(s) URL, which Helm fetches) gives
// one violation at the root with the compiler's message: Helm has decided
// already; this only locates.
func schemaViolations(values map[string]any, schemaJSON []byte) (out []schemaViolation) {
	// Helm's ValidateAgainstSingleSchema recovers from the validator's
	// panics; so does this, which compiles the same schema again.
	defer func() {
		if r := recover(); r != nil {
			out = []schemaViolation{{Msg: fmt.Sprintf("unable to validate schema: %v", r)}}
		}
	}()
	sch, err := compileSchema(schemaJSON)
	if err != nil {
		return []schemaViolation{{Msg: err.Error()}}
	}
	err = sch.Validate(values)
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		if err != nil {
			return []schemaViolation{{Msg: err.Error()}}
		}
		return nil
	}
	p := message.NewPrinter(language.English)
	out = nil
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if _, root := e.ErrorKind.(*kind.Schema); !root {
			path := tokensToPath(e.InstanceLocation)
			switch k := e.ErrorKind.(type) {
			case *kind.AdditionalProperties:
				if len(k.Properties) > 0 {
					path = joinValuesPath(path, k.Properties[0])
				}
			case *kind.Required:
				if len(k.Missing) > 0 {
					path = joinValuesPath(path, k.Missing[0])
				}
			}
			out = append(out, schemaViolation{Path: path, Msg: withoutValue(e.ErrorKind.LocalizedString(p))})
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(verr)
	// "validation failed" only announces nested violations.
	if specific := slices.DeleteFunc(slices.Clone(out), func(v schemaViolation) bool {
		return v.Msg == "validation failed"
	}); len(specific) > 0 {
		out = specific
	}
	slices.SortStableFunc(out, func(a, b schemaViolation) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// compileSchema compiles a chart's values.schema.json as Helm does, but
// for the loaders: local files only, and an unresolved urn: reference
// accepts anything (Helm's default URNResolver's outcome).
func compileSchema(schemaJSON []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{"file": jsonschema.FileLoader{}, "urn": permissiveLoader{}})
	const url = "file:///values.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// permissiveLoader answers every URL with the schema true.
type permissiveLoader struct{}

func (permissiveLoader) Load(string) (any, error) { return true, nil }

func orRoot(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}
