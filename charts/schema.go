package charts

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common/util"
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
	if len(vs) == 0 {
		// Not located again (should not happen): Helm's own text.
		for _, v := range parseSchemaError(err.Error()) {
			vs = append(vs, chartViolation{schemaViolation: v, chart: ch.Name()})
		}
	}
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
// does, with Helm's ValidateAgainstSingleSchema, recording each violation
// with its path from the top chart's values.
func collectViolations(c *chart.Chart, values map[string]any, prefix string, out *[]chartViolation) {
	if c.Schema != nil {
		if err := util.ValidateAgainstSingleSchema(values, c.Schema); err != nil {
			vs := parseSchemaError(err.Error())
			if len(vs) == 0 {
				vs = []schemaViolation{{Msg: strings.TrimSpace(err.Error())}}
			}
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

func orRoot(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}
