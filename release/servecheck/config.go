package servecheck

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// Options are the serve check's flags (--serve-check,
// --serve-check-timeout), shared by every operation of an engine.
type Options struct {
	// Enabled, when set (--serve-check given), turns the check on or off
	// for any chart. Unset, the chart decides: on for the built-in chart
	// unless its values say serveCheck.enabled: false; for other charts
	// only when their values say serveCheck.enabled: true.
	Enabled *bool
	// Timeout, when positive (--serve-check-timeout given), bounds the
	// check of each pod; else serveCheck.timeout, else
	// wait.DefaultServeTimeout.
	Timeout time.Duration
}

// InputError is an invalid serve-check setting: a
// `serveCheck:` value or flag of the wrong type or out of range (exit
// code 2, nothing applied).
type InputError struct {
	// Field names the value ("serveCheck.timeout") or the flag.
	Field string
	Msg   string
}

func (e *InputError) Error() string {
	return "invalid serve check: " + e.Field + ": " + e.Msg
}

// ExitCode is 2: invalid input.
func (e *InputError) ExitCode() int { return exitcode.Invalid }

// ValidateTimeout checks a serve check timeout (of a flag or a
// value) named field: positive and at most wait.MaxServeTimeout.
func ValidateTimeout(field string, d time.Duration) error {
	if d <= 0 || d > wait.MaxServeTimeout {
		return &InputError{Field: field, Msg: fmt.Sprintf("%s: must be positive and at most %s", d, wait.MaxServeTimeout)}
	}
	return nil
}

// Config is the serve check of one revision.
type Config struct {
	Spec wait.ServeSpec
	// Port is serveCheck.port (0: each pod's container port named http).
	Port int
}

// serveValueKeys are the keys of `serveCheck:`.
var serveValueKeys = []string{"enabled", "model", "prompt", "maxTokens", "timeout", "port"}

// Resolve returns the serve check of a revision of chart with
// the computed values, under the flags opts: nil when the check is off.
// A `serveCheck:` value of the wrong type is a *InputError.
func Resolve(chart storage.Chart, values map[string]any, opts Options) (*Config, error) {
	if opts.Enabled != nil && !*opts.Enabled {
		return nil, nil
	}
	if !chart.Builtin && opts.Enabled == nil {
		// Another chart's values are its own: only serveCheck.enabled:
		// true asks for the check (and then the keys must be ours).
		m, _ := values["serveCheck"].(map[string]any)
		if on, _ := m["enabled"].(bool); !on {
			return nil, nil
		}
	}
	sc, err := serveValues(values)
	if err != nil {
		return nil, err
	}
	if v, ok := sc["enabled"]; ok {
		on, ok := v.(bool)
		if !ok {
			return nil, serveTypeError("enabled", "a boolean", v)
		}
		if !on && opts.Enabled == nil {
			return nil, nil
		}
	}
	cfg := &Config{}
	if cfg.Spec.Model, err = serveString(sc, "model", 0); err != nil {
		return nil, err
	}
	if cfg.Spec.Model == "" {
		cfg.Spec.Model = servedModel(values)
	}
	if cfg.Spec.Prompt, err = serveString(sc, "prompt", wait.MaxServePromptBytes); err != nil {
		return nil, err
	}
	if cfg.Spec.MaxTokens, err = serveInt(sc, "maxTokens", 1, wait.MaxServeMaxTokens); err != nil {
		return nil, err
	}
	if cfg.Port, err = serveInt(sc, "port", 1, math.MaxUint16); err != nil {
		return nil, err
	}
	if cfg.Spec.Timeout, err = serveDuration(sc, "timeout"); err != nil {
		return nil, err
	}
	if opts.Timeout > 0 {
		cfg.Spec.Timeout = opts.Timeout
	}
	if cfg.Spec.Timeout == 0 {
		cfg.Spec.Timeout = wait.DefaultServeTimeout
	}
	return cfg, nil
}

// serveValues returns the `serveCheck:` map of values (nil when absent),
// refusing keys it does not know.
func serveValues(values map[string]any) (map[string]any, error) {
	v, ok := values["serveCheck"]
	if !ok || v == nil {
		return nil, nil
	}
	sc, ok := v.(map[string]any)
	if !ok {
		return nil, &InputError{Field: "serveCheck", Msg: fmt.Sprintf("want a map of %s, got %s", strings.Join(serveValueKeys, ", "), typeName(v))}
	}
	var unknown []string
	for k := range sc {
		if !slices.Contains(serveValueKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, &InputError{Field: "serveCheck." + unknown[0], Msg: "unknown key (known: " + strings.Join(serveValueKeys, ", ") + ")"}
	}
	return sc, nil
}

// servedModel is the model the built-in chart serves:
// model.servedModelName, else model.name ("" when neither is a string).
func servedModel(values map[string]any) string {
	m, _ := values["model"].(map[string]any)
	if s, _ := m["servedModelName"].(string); s != "" {
		return s
	}
	s, _ := m["name"].(string)
	return s
}

func serveTypeError(key, want string, v any) error {
	return &InputError{Field: "serveCheck." + key, Msg: fmt.Sprintf("want %s, got %s", want, typeName(v))}
}

func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", clip(x, 40))
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%v", v)
}

// clip cuts s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// serveString reads the string key of sc ("" when absent), at most limit
// bytes (0: no limit).
func serveString(sc map[string]any, key string, limit int) (string, error) {
	v, ok := sc[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", serveTypeError(key, "a string", v)
	}
	if limit > 0 && len(s) > limit {
		return "", &InputError{Field: "serveCheck." + key, Msg: fmt.Sprintf("%d bytes, at most %d", len(s), limit)}
	}
	return s, nil
}

// serveInt reads the integer key of sc (0 when absent or 0) within
// [lo, hi].
func serveInt(sc map[string]any, key string, lo, hi int) (int, error) {
	v, ok := sc[key]
	if !ok || v == nil {
		return 0, nil
	}
	var f float64
	switch x := v.(type) {
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case float64:
		f = x
	default:
		return 0, serveTypeError(key, "an integer", v)
	}
	if f == 0 {
		return 0, nil
	}
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, &InputError{Field: "serveCheck." + key, Msg: fmt.Sprintf("%v: want an integer from %d to %d", v, lo, hi)}
	}
	return int(f), nil
}

// serveDuration reads the duration key of sc (a Go duration string such
// as "60s"; 0 when absent).
func serveDuration(sc map[string]any, key string) (time.Duration, error) {
	v, ok := sc[key]
	if !ok || v == nil || v == "" {
		return 0, nil
	}
	s, ok := v.(string)
	if !ok {
		return 0, serveTypeError(key, `a duration such as "60s"`, v)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &InputError{Field: "serveCheck." + key, Msg: fmt.Sprintf("%q: want a duration such as \"60s\"", clip(s, 40))}
	}
	if err := ValidateTimeout("serveCheck."+key, d); err != nil {
		return 0, err
	}
	return d, nil
}
