package charts

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/strvals"
)

// PreviousValues are the values of the release's last revision, for a
// deploy with ReuseValues or ResetThenReuseValues (Helm's "current
// release"): what it recorded.
type PreviousValues struct {
	// Revision is the revision they come from (for messages).
	Revision int
	// User are its user-supplied values (Helm's release.Config).
	User map[string]any
	// Computed are its computed values, the chart's defaults coalesced
	// with User (what Helm rebuilds from release.Chart and
	// release.Config); nil when the record keeps none.
	Computed map[string]any
}

// UserValues merges the values the user supplied, in Helm 4's order
// (helm.sh/helm/v4/pkg/cli/values Options.MergeValues): the -f files in
// order (maps merged deeply, later wins), then every --set-json, every
// --set, every --set-string, every --set-file and every --set-literal.
// The chart defaults are not included, nor the previous revision's values
// (see ReuseValues).
//
// It calls the same parsers as Helm's MergeValues (loader.LoadValues,
// strvals) rather than MergeValues itself, whose errors quote the values
// verbatim: here an error names the flag, the argument's position and its
// keys, and every value of the argument is masked (a value may be a
// token). Every problem is an *InputError. --set-file reads local files
// only (Helm also reads "-" as stdin and URLs of its getters).
func UserValues(opts RenderOptions) (map[string]any, error) {
	base := map[string]any{}
	for _, f := range opts.ValueFiles {
		data, err := ReadFileCapped(f, MaxValuesFileBytes)
		if err != nil {
			return nil, &InputError{Source: "values file", File: f, Msg: errMsg(err), Err: err}
		}
		vals, err := parseValuesFile(f, data)
		if err != nil {
			return nil, err
		}
		base = loader.MergeMaps(base, vals)
	}
	for i, s := range opts.SetJSON {
		var err error
		if base, err = mergeSetJSON(base, i, s); err != nil {
			return nil, err
		}
	}
	for i, s := range opts.Set {
		if err := strvals.ParseInto(s, base); err != nil {
			return nil, setError("--set", i, s, err)
		}
		if err := checkSetNumbers(i, s); err != nil {
			return nil, err
		}
	}
	for i, s := range opts.SetString {
		if err := strvals.ParseIntoString(s, base); err != nil {
			return nil, setError("--set-string", i, s, err)
		}
	}
	for i, s := range opts.SetFile {
		var readErr *InputError
		reader := func(rs []rune) (any, error) {
			name := string(rs)
			data, err := ReadFileCapped(name, MaxValuesFileBytes)
			if err != nil {
				readErr = &InputError{Source: "--set-file", File: name,
					Msg: fmt.Sprintf("argument %d: %s", i+1, errMsg(err)), Err: err}
				return nil, readErr
			}
			if msg := textProblem(data); msg != "" {
				readErr = &InputError{Source: "--set-file", File: name, Msg: fmt.Sprintf("argument %d: %s", i+1, msg)}
				return nil, readErr
			}
			return string(data), nil
		}
		if err := strvals.ParseIntoFile(s, base, reader); err != nil {
			if readErr != nil {
				return nil, readErr
			}
			return nil, setError("--set-file", i, s, err)
		}
	}
	for i, s := range opts.SetLiteral {
		if err := strvals.ParseLiteralInto(s, base); err != nil {
			return nil, setError("--set-literal", i, s, err)
		}
	}
	return base, nil
}

// mergeSetJSON merges the --set-json argument s (the i-th) into base as
// Helm 4 does: a JSON object ({...}) is merged as a whole, anything else
// is key=JSON (strvals.ParseJSON).
func mergeSetJSON(base map[string]any, i int, s string) (map[string]any, error) {
	trimmed := strings.TrimSpace(s)
	if trimmed != "" && trimmed[0] == '{' {
		var m map[string]any
		if err := json.Unmarshal([]byte(trimmed), &m); err != nil {
			msg := "not a valid JSON object"
			var se *json.SyntaxError
			if errors.As(err, &se) {
				msg = fmt.Sprintf("%s (syntax error at byte %d)", msg, se.Offset)
			}
			return nil, &InputError{Source: "--set-json", Msg: fmt.Sprintf("argument %d: %s", i+1, msg), Err: errors.New(msg)}
		}
		return loader.MergeMaps(base, m), nil
	}
	if err := strvals.ParseJSON(s, base); err != nil {
		return nil, setError("--set-json", i, s, err)
	}
	return base, nil
}

// reuseValues combines the user's values with the previous revision's as
// Helm 4's upgrade does (helm.sh/helm/v4/pkg/action/upgrade.go,
// (*Upgrade).reuseValues), and returns the chart to render (ch, or a copy
// whose defaults are the previous revision's computed values) with the
// values to render and record:
//
//   - ResetValues wins: the previous values are ignored;
//   - ReuseValues: the new values are coalesced over the previous user
//     values (util.CoalesceTables), and the chart's defaults are replaced
//     by the previous revision's computed values (Helm:
//     chart.Values = CoalesceValues(current.Chart, current.Config)), so the
//     new chart's changed defaults are not taken;
//   - ResetThenReuseValues: the new values coalesced over the previous
//     user values, on the new chart's defaults.
//
// Without opts.Previous (a first install) nothing changes. A previous
// record that keeps no computed values (written before vllmctl kept them)
// leaves the new chart's defaults in place under ReuseValues, with a
// warning.
func reuseValues(ch *chart.Chart, opts RenderOptions, user map[string]any) (*chart.Chart, map[string]any, []string) {
	prev := opts.Previous
	if prev == nil || opts.ResetValues || (!opts.ReuseValues && !opts.ResetThenReuseValues) {
		return ch, user, nil
	}
	// CoalesceTables changes both maps: work on a copy of the record's.
	user = util.CoalesceTables(user, copyValueMap(prev.User))
	if user == nil {
		user = map[string]any{}
	}
	if !opts.ReuseValues {
		return ch, user, nil
	}
	if prev.Computed == nil {
		return ch, user, []string{fmt.Sprintf("--reuse-values: the record of revision %d keeps no computed values: "+
			"the chart's own defaults apply (as with --reset-then-reuse-values)", prev.Revision)}
	}
	c := *ch
	c.Values = copyValueMap(prev.Computed)
	return &c, user, nil
}
