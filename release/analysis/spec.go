package analysis

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"go.yaml.in/yaml/v3"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// Providers.
const (
	ProviderScrape     = "scrape"
	ProviderPrometheus = "prometheus"
)

// Policies for an inconclusive analysis.
const (
	InconclusiveFail = "fail"
	InconclusivePass = "pass"
	InconclusiveHold = "hold"
)

// The presets, by their keys in the spec.
const (
	PresetErrorRatio         = "errorRatio"
	PresetTTFTP95Ratio       = "ttftP95Ratio"
	PresetE2ELatencyP95Ratio = "e2eLatencyP95Ratio"
	PresetPreemptionRate     = "preemptionRate"
	PresetKVCacheUsage       = "kvCacheUsage"
)

// Defaults and bounds of a spec.
const (
	DefaultInterval = time.Minute
	DefaultCount    = 5
	// DefaultMinRequests is how many requests each side must have finished
	// during an interval for a measurement to count.
	DefaultMinRequests = 10
	// DefaultConsecutiveErrorLimit is Argo Rollouts' default.
	DefaultConsecutiveErrorLimit = 4
	// MaxCount bounds count; MaxDuration bounds interval × count.
	MaxCount    = 1000
	MaxDuration = 24 * time.Hour
	// MinInterval is the shortest interval: a scrape through the API
	// server takes a fraction of it.
	MinInterval = time.Second
	// MinRPS and MaxRPS bound the synthetic load's requests per second
	// (below MinRPS the loader's tick, 1s ÷ rps, would overflow a
	// time.Duration and panic); MaxLoadTokens its max_tokens;
	// MaxPromptBytes its prompt.
	MinRPS         = 0.001
	MaxRPS         = 1000
	MaxLoadTokens  = 32768
	MaxPromptBytes = 64 << 10
	// DefaultLoadMaxTokens and DefaultLoadPrompt are the synthetic
	// requests' when the spec leaves them out.
	DefaultLoadMaxTokens = 16
	DefaultLoadPrompt    = "Say hello."
)

// presetInfo describes a preset: its default maximum, whether it compares
// the canary with the stable pods, and what it measures.
type presetInfo struct {
	max      float64
	baseline bool
	doc      string
}

// presets are the vLLM presets and their defaults.
var presets = map[string]presetInfo{
	PresetErrorRatio:         {max: 0.05, doc: "the canary's share of failed requests: max(5xx, finished_reason error|abort) ÷ requests"},
	PresetTTFTP95Ratio:       {max: 1.5, baseline: true, doc: "time to first token p95, canary ÷ stable"},
	PresetE2ELatencyP95Ratio: {max: 1.5, baseline: true, doc: "end-to-end request latency p95, canary ÷ stable"},
	PresetPreemptionRate:     {max: 0.1, doc: "the canary's preemptions per finished request"},
	PresetKVCacheUsage:       {max: 0.95, doc: "the canary pods' highest KV cache usage (0-1)"},
}

// PresetNames are the presets' keys, sorted.
func PresetNames() []string {
	out := make([]string, 0, len(presets))
	for k := range presets {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Placeholders a custom metric's query may hold: the release namespace,
// and the canary and stable pods as a regular-expression alternation
// (pod=~"{{canaryPods}}").
const (
	PlaceholderNamespace  = "{{namespace}}"
	PlaceholderCanaryPods = "{{canaryPods}}"
	PlaceholderStablePods = "{{stablePods}}"
)

// Spec is the analysis file (or the built-in chart's analysis values) as
// written.
type Spec struct {
	Provider     string `yaml:"provider"`
	Interval     string `yaml:"interval"`
	Count        *int   `yaml:"count"`
	MinRequests  *int   `yaml:"minRequests"`
	Inconclusive string `yaml:"inconclusive"`
	// The Argo Rollouts limits of the presets (custom metrics have their
	// own): failed, inconclusive and consecutive error measurements
	// tolerated.
	FailureLimit          *int                   `yaml:"failureLimit"`
	InconclusiveLimit     *int                   `yaml:"inconclusiveLimit"`
	ConsecutiveErrorLimit *int                   `yaml:"consecutiveErrorLimit"`
	Load                  *LoadSpec              `yaml:"load"`
	Presets               map[string]*PresetSpec `yaml:"presets"`
	Metrics               []MetricSpec           `yaml:"metrics"`
}

// LoadSpec is the synthetic load: rps requests per second in all, half to
// the canary pods, half to the stable pods.
type LoadSpec struct {
	RPS       float64 `yaml:"rps"`
	MaxTokens *int    `yaml:"maxTokens"`
	Prompt    *string `yaml:"prompt"`
	// Model is the model the requests name (default: none, the server's
	// own, as vLLM's OpenAI server answers a request without one).
	Model string `yaml:"model"`
}

// PresetSpec sets a preset's maximum (the default when absent).
type PresetSpec struct {
	Max *float64 `yaml:"max"`
}

// MetricSpec is a custom metric: a PromQL query and its conditions, with
// Argo Rollouts' names.
type MetricSpec struct {
	Name                  string `yaml:"name"`
	Query                 string `yaml:"query"`
	SuccessCondition      string `yaml:"successCondition"`
	FailureCondition      string `yaml:"failureCondition"`
	FailureLimit          *int   `yaml:"failureLimit"`
	InconclusiveLimit     *int   `yaml:"inconclusiveLimit"`
	ConsecutiveErrorLimit *int   `yaml:"consecutiveErrorLimit"`
}

// Config is a validated analysis: what the runner, the providers and the
// load use.
type Config struct {
	Provider     string
	Interval     time.Duration
	Count        int
	MinRequests  int
	Inconclusive string
	Load         *Load
	Checks       []Check
	// Source names where the spec came from (the file, or "values
	// analysis") for messages.
	Source string
}

// Duration is how long the analysis lasts: Interval × Count.
func (c *Config) Duration() time.Duration { return c.Interval * time.Duration(c.Count) }

// NeedsBaseline reports whether a check compares with the stable pods.
func (c *Config) NeedsBaseline() bool {
	for _, ch := range c.Checks {
		if ch.Baseline {
			return true
		}
	}
	return false
}

// Load is the validated synthetic load.
type Load struct {
	RPS       float64
	MaxTokens int
	Prompt    string
	Model     string
}

// Check is one metric the analysis judges at every measurement.
type Check struct {
	// Name is the preset's key or the custom metric's name.
	Name string
	// Preset is the preset's key ("" for a custom metric); Max its
	// maximum (a measurement passes when value <= Max).
	Preset string
	Max    float64
	// Query, SuccessCondition and FailureCondition are a custom metric's.
	Query            string
	SuccessCondition string
	FailureCondition string
	// Baseline: the check compares the canary with the stable pods.
	Baseline bool
	// The Argo Rollouts limits.
	FailureLimit          int
	InconclusiveLimit     int
	ConsecutiveErrorLimit int
}

// Condition is the check's condition as measurements show it.
func (c Check) Condition() string {
	if c.Preset != "" {
		return fmt.Sprintf("value <= %s", formatFloat(c.Max))
	}
	var parts []string
	if c.SuccessCondition != "" {
		parts = append(parts, "success: "+c.SuccessCondition)
	}
	if c.FailureCondition != "" {
		parts = append(parts, "failure: "+c.FailureCondition)
	}
	return strings.Join(parts, "; ")
}

// InputError is an invalid analysis spec: exit code 2, nothing applied.
type InputError struct {
	Source string
	Field  string
	Msg    string
}

func (e *InputError) Error() string {
	where := "invalid analysis"
	if e.Source != "" {
		where += " " + e.Source
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", where, e.Field, e.Msg)
	}
	return where + ": " + e.Msg
}

// ExitCode is 2: invalid input.
func (e *InputError) ExitCode() int { return exitcode.Invalid }

// MaxSpecBytes caps an analysis file: a spec is a few checks and a
// prompt of at most MaxPromptBytes, recorded with the revision in a
// Secret of at most 1 MiB.
const MaxSpecBytes = 1 << 20

// ReadFile reads (at most MaxSpecBytes: a huge or endless file, such as
// /dev/zero, is refused at once, as a directory is) and parses an
// analysis file.
func ReadFile(path string) (*Spec, error) {
	data, err := charts.ReadFileCapped(path, MaxSpecBytes)
	if err != nil {
		return nil, &InputError{Source: path, Msg: fmt.Sprintf("read the analysis file: %v", err)}
	}
	return Parse(data, path)
}

// Parse parses an analysis spec strictly: an unknown key is an error that
// names it and its line; so is a second document.
func Parse(data []byte, source string) (*Spec, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &InputError{Source: source, Msg: "the spec is empty"}
		}
		return nil, &InputError{Source: source, Msg: yamlMessage(err)}
	}
	var more any
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, &InputError{Source: source, Msg: "more than one YAML document"}
	}
	return &s, nil
}

// FromValues parses the built-in chart's analysis values (the same keys
// as the file, plus enabled). It returns nil when they are absent or not
// enabled.
func FromValues(values map[string]any) (*Spec, error) {
	raw, ok := values["analysis"].(map[string]any)
	if !ok || raw == nil {
		return nil, nil
	}
	if enabled, _ := raw["enabled"].(bool); !enabled {
		return nil, nil
	}
	rest := make(map[string]any, len(raw))
	for k, v := range raw {
		if k != "enabled" {
			rest[k] = v
		}
	}
	data, err := yaml.Marshal(rest)
	if err != nil {
		return nil, &InputError{Source: "values analysis", Msg: err.Error()}
	}
	return Parse(data, "values analysis")
}

// Validate checks the spec, fills its defaults and returns the analysis
// to run. canary says whether the deploy holds a canary: without one the
// checks that compare with the stable pods are refused.
func (s *Spec) Validate(source string, canary bool) (*Config, error) {
	bad := func(field, format string, args ...any) error {
		return &InputError{Source: source, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	c := &Config{Provider: s.Provider, Interval: DefaultInterval, Count: DefaultCount, MinRequests: DefaultMinRequests,
		Inconclusive: s.Inconclusive, Source: source}
	switch c.Provider {
	case "":
		c.Provider = ProviderScrape
	case ProviderScrape:
	case ProviderPrometheus:
	default:
		return nil, bad("provider", "%q: want scrape or prometheus", s.Provider)
	}
	if s.Interval != "" {
		d, err := time.ParseDuration(s.Interval)
		switch {
		case err != nil:
			return nil, bad("interval", "%q is not a duration (e.g. 30s, 1m)", s.Interval)
		case d <= 0:
			return nil, bad("interval", "%s: must be positive", s.Interval)
		case d < MinInterval:
			return nil, bad("interval", "%s: must be at least %s", s.Interval, MinInterval)
		}
		c.Interval = d
	}
	if s.Count != nil {
		if *s.Count <= 0 || *s.Count > MaxCount {
			return nil, bad("count", "%d: must be between 1 and %d", *s.Count, MaxCount)
		}
		c.Count = *s.Count
	}
	if c.Duration() > MaxDuration {
		return nil, bad("count", "interval × count is %s: must be at most %s", c.Duration(), MaxDuration)
	}
	if s.MinRequests != nil {
		if *s.MinRequests < 0 {
			return nil, bad("minRequests", "%d: must not be negative", *s.MinRequests)
		}
		c.MinRequests = *s.MinRequests
	}
	switch c.Inconclusive {
	case "":
		c.Inconclusive = InconclusiveFail
	case InconclusiveFail, InconclusivePass, InconclusiveHold:
	default:
		return nil, bad("inconclusive", "%q: want fail, pass or hold", s.Inconclusive)
	}
	limits := func(field string, failure, inconclusive, errs *int) (f, i, e int, err error) {
		f, i, e = 0, 0, DefaultConsecutiveErrorLimit
		for _, l := range []struct {
			name string
			v    *int
			dst  *int
		}{{"failureLimit", failure, &f}, {"inconclusiveLimit", inconclusive, &i}, {"consecutiveErrorLimit", errs, &e}} {
			if l.v == nil {
				continue
			}
			if *l.v < 0 || *l.v > MaxCount {
				return 0, 0, 0, bad(field+l.name, "%d: must be between 0 and %d", *l.v, MaxCount)
			}
			*l.dst = *l.v
		}
		return f, i, e, nil
	}
	fl, il, el, err := limits("", s.FailureLimit, s.InconclusiveLimit, s.ConsecutiveErrorLimit)
	if err != nil {
		return nil, err
	}
	if s.Load != nil {
		l, err := s.Load.validate(bad)
		if err != nil {
			return nil, err
		}
		c.Load = l
	}
	chosen := s.Presets
	if chosen == nil && len(s.Metrics) == 0 {
		// No presets and no metrics: every preset with its default
		// (those that need a baseline only with a canary).
		chosen = map[string]*PresetSpec{}
		for name, p := range presets {
			if canary || !p.baseline {
				chosen[name] = nil
			}
		}
	}
	for _, name := range sortedKeys(chosen) {
		info, ok := presets[name]
		if !ok {
			return nil, bad("presets."+name, "unknown preset: want one of %s", strings.Join(PresetNames(), ", "))
		}
		max := info.max
		if p := chosen[name]; p != nil && p.Max != nil {
			max = *p.Max
			if math.IsNaN(max) || math.IsInf(max, 0) || max < 0 {
				return nil, bad("presets."+name+".max", "%v: must be a number, 0 or more", max)
			}
		}
		if info.baseline && !canary {
			return nil, bad("presets."+name, "compares the canary with the stable pods: it needs --canary")
		}
		c.Checks = append(c.Checks, Check{Name: name, Preset: name, Max: max, Baseline: info.baseline,
			FailureLimit: fl, InconclusiveLimit: il, ConsecutiveErrorLimit: el})
	}
	seen := map[string]bool{}
	for i, m := range s.Metrics {
		field := fmt.Sprintf("metrics[%d]", i)
		ch, err := m.validate(field, canary, bad)
		if err != nil {
			return nil, err
		}
		if seen[ch.Name] || presets[ch.Name].doc != "" {
			return nil, bad(field+".name", "%q is used twice (or is a preset's name)", ch.Name)
		}
		seen[ch.Name] = true
		if ch.FailureLimit, ch.InconclusiveLimit, ch.ConsecutiveErrorLimit, err = limits(field+".", m.FailureLimit, m.InconclusiveLimit, m.ConsecutiveErrorLimit); err != nil {
			return nil, err
		}
		if c.Provider == ProviderScrape {
			return nil, bad(field, "a PromQL metric needs provider: prometheus (the scrape provider computes the presets only)")
		}
		c.Checks = append(c.Checks, ch)
	}
	if len(c.Checks) == 0 {
		return nil, bad("presets", "nothing to measure: set a preset or a metric")
	}
	return c, nil
}

func (l *LoadSpec) validate(bad func(field, format string, args ...any) error) (*Load, error) {
	out := &Load{RPS: l.RPS, MaxTokens: DefaultLoadMaxTokens, Prompt: DefaultLoadPrompt, Model: l.Model}
	switch {
	case math.IsNaN(l.RPS) || l.RPS <= 0:
		return nil, bad("load.rps", "%v: must be positive", l.RPS)
	case l.RPS < MinRPS:
		return nil, bad("load.rps", "%v: must be at least %v (a request every %s)", l.RPS, MinRPS, time.Duration(float64(time.Second)/MinRPS))
	case l.RPS > MaxRPS:
		return nil, bad("load.rps", "%v: must be at most %d", l.RPS, MaxRPS)
	}
	if l.MaxTokens != nil {
		if *l.MaxTokens <= 0 || *l.MaxTokens > MaxLoadTokens {
			return nil, bad("load.maxTokens", "%d: must be between 1 and %d", *l.MaxTokens, MaxLoadTokens)
		}
		out.MaxTokens = *l.MaxTokens
	}
	if l.Prompt != nil {
		if *l.Prompt == "" || len(*l.Prompt) > MaxPromptBytes {
			return nil, bad("load.prompt", "must be between 1 and %d bytes", MaxPromptBytes)
		}
		out.Prompt = *l.Prompt
	}
	return out, nil
}

func (m MetricSpec) validate(field string, canary bool, bad func(field, format string, args ...any) error) (Check, error) {
	ch := Check{Name: m.Name, Query: m.Query, SuccessCondition: m.SuccessCondition, FailureCondition: m.FailureCondition}
	if strings.TrimSpace(m.Name) == "" {
		return ch, bad(field+".name", "must be set")
	}
	if err := CheckPromQL(m.Query); err != nil {
		return ch, bad(field+".query", "%v", err)
	}
	ch.Baseline = strings.Contains(m.Query, PlaceholderStablePods)
	if ch.Baseline && !canary {
		return ch, bad(field+".query", "names %s: it needs --canary", PlaceholderStablePods)
	}
	if m.SuccessCondition == "" && m.FailureCondition == "" {
		return ch, bad(field, "set successCondition or failureCondition")
	}
	for name, cond := range map[string]string{"successCondition": m.SuccessCondition, "failureCondition": m.FailureCondition} {
		if cond == "" {
			continue
		}
		if _, err := CompileCondition(cond); err != nil {
			return ch, bad(field+"."+name, "%v", err)
		}
	}
	return ch, nil
}

// CompileCondition compiles a success or failure condition: an
// expr-lang expression (github.com/expr-lang/expr, as Argo Rollouts
// uses) of result, the query's values (result[0] < 0.05), that yields a
// boolean.
func CompileCondition(cond string) (func(result []float64) (bool, error), error) {
	prog, err := expr.Compile(cond, expr.Env(map[string]any{"result": []float64{}}), expr.AsBool())
	if err != nil {
		return nil, fmt.Errorf("%q: %s", cond, firstLine(err.Error()))
	}
	return func(result []float64) (bool, error) {
		out, err := expr.Run(prog, map[string]any{"result": result})
		if err != nil {
			return false, err
		}
		b, _ := out.(bool)
		return b, nil
	}, nil
}

// yamlMessage is a YAML error without the decoder's wording around it:
// "line 2: field cuont not found; line 5: …".
func yamlMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if i := strings.Index(l, " in type "); i >= 0 {
			l = l[:i]
		}
		if l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func formatFloat(f float64) string { return fmt.Sprintf("%g", f) }
