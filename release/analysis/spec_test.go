package analysis

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

func TestSpecDefaults(t *testing.T) {
	s, err := Parse([]byte("interval: 10s\ncount: 3\n"), "a.yaml")
	require.NoError(t, err)
	c, err := s.Validate("a.yaml", true)
	require.NoError(t, err)
	assert.Equal(t, ProviderScrape, c.Provider)
	assert.Equal(t, 10*time.Second, c.Interval)
	assert.Equal(t, 3, c.Count)
	assert.Equal(t, 30*time.Second, c.Duration())
	assert.Equal(t, DefaultMinRequests, c.MinRequests)
	assert.Equal(t, InconclusiveFail, c.Inconclusive)
	var names []string
	for _, ch := range c.Checks {
		names = append(names, ch.Name)
		assert.Equal(t, DefaultConsecutiveErrorLimit, ch.ConsecutiveErrorLimit)
	}
	assert.Equal(t, PresetNames(), names, "no presets and no metrics: every preset")

	// Without a canary, the defaults leave out the presets that compare.
	c, err = s.Validate("a.yaml", false)
	require.NoError(t, err)
	for _, ch := range c.Checks {
		assert.False(t, ch.Baseline, ch.Name)
	}
	assert.Len(t, c.Checks, 3)
}

func TestSpecChosenPresetsAndLoad(t *testing.T) {
	s, err := Parse([]byte(`
interval: 5s
count: 4
minRequests: 3
inconclusive: hold
failureLimit: 1
load: {rps: 8, maxTokens: 4, prompt: "hi"}
presets:
  ttftP95Ratio: {max: 2}
  errorRatio: {}
`), "f")
	require.NoError(t, err)
	c, err := s.Validate("f", true)
	require.NoError(t, err)
	require.Len(t, c.Checks, 2)
	assert.Equal(t, Check{Name: "errorRatio", Preset: "errorRatio", Max: 0.05, FailureLimit: 1, ConsecutiveErrorLimit: 4}, c.Checks[0])
	assert.Equal(t, "value <= 2", c.Checks[1].Condition())
	assert.True(t, c.Checks[1].Baseline)
	assert.Equal(t, &Load{RPS: 8, MaxTokens: 4, Prompt: "hi"}, c.Load)
	assert.Equal(t, InconclusiveHold, c.Inconclusive)
	assert.Equal(t, 3, c.MinRequests)
}

func TestSpecRefused(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		canary     bool
		want       string // in the message
	}{
		{"unknown key", "interval: 10s\ncuont: 3\n", true, "line 2: field cuont not found"},
		{"unknown nested key", "presets:\n  errorRatio: {maximum: 1}\n", true, "field maximum not found"},
		{"zero interval", "interval: 0s\n", true, "interval: 0s: must be positive"},
		{"negative interval", "interval: -5s\n", true, "interval: -5s: must be positive"},
		{"unparseable interval", "interval: soon\n", true, `interval: "soon" is not a duration`},
		{"number interval", "interval: 30\n", true, `interval: "30" is not a duration`},
		{"tiny interval", "interval: 1ms\n", true, "must be at least 1s"},
		{"zero count", "count: 0\n", true, "count: 0: must be between 1 and 1000"},
		{"negative count", "count: -1\n", true, "count: -1"},
		{"absurd count", "count: 1000000000\n", true, "count: 1000000000: must be between 1 and 1000"},
		{"too long", "interval: 1h\ncount: 100\n", true, "interval × count is 100h0m0s"},
		{"unknown preset", "presets: {ttftP99Ratio: {max: 2}}\n", true, "presets.ttftP99Ratio: unknown preset"},
		{"negative max", "presets: {errorRatio: {max: -0.1}}\n", true, "presets.errorRatio.max: -0.1"},
		{"bad policy", "inconclusive: retry\n", true, `inconclusive: "retry": want fail, pass or hold`},
		{"unknown provider", "provider: datadog\n", true, `provider: "datadog"`},
		{"baseline without canary", "presets: {ttftP95Ratio: {max: 2}}\n", false, "presets.ttftP95Ratio: compares the canary with the stable pods: it needs --canary"},
		{"zero rps", "load: {rps: 0}\n", true, "load.rps: 0: must be positive"},
		{"negative rps", "load: {rps: -2}\n", true, "load.rps"},
		{"huge rps", "load: {rps: 100000}\n", true, "load.rps: 100000: must be at most 1000"},
		{"tiny rps", "load: {rps: 1e-12}\n", true, "load.rps: 1e-12: must be at least 0.001 (a request every 16m40s)"},
		{"bad max tokens", "load: {rps: 1, maxTokens: 0}\n", true, "load.maxTokens"},
		{"negative min requests", "minRequests: -1\n", true, "minRequests"},
		{"negative failure limit", "failureLimit: -1\n", true, "failureLimit: -1"},
		{"bad promql", "provider: prometheus\nmetrics: [{name: x, query: 'sum(rate(x[5m])', successCondition: 'result[0] < 1'}]\n", true, "metrics[0].query: '(' is not closed"},
		{"bad promql char", "provider: prometheus\nmetrics: [{name: x, query: 'up; drop', successCondition: 'result[0] < 1'}]\n", true, "metrics[0].query: unexpected character ';'"},
		{"unknown placeholder", "provider: prometheus\nmetrics: [{name: x, query: 'up{pod=~\"{{pods}}\"}', successCondition: 'result[0] < 1'}]\n", true, "unknown placeholder {{pods}}"},
		{"bad condition", "provider: prometheus\nmetrics: [{name: x, query: 'up', successCondition: 'result[0] <'}]\n", true, "metrics[0].successCondition"},
		{"condition not bool", "provider: prometheus\nmetrics: [{name: x, query: 'up', failureCondition: 'result[0] + 1'}]\n", true, "metrics[0].failureCondition"},
		{"no condition", "provider: prometheus\nmetrics: [{name: x, query: 'up'}]\n", true, "metrics[0]: set successCondition or failureCondition"},
		{"stable without canary", "provider: prometheus\nmetrics: [{name: x, query: 'up{pod=~\"{{stablePods}}\"}', successCondition: 'result[0] < 1'}]\n", false, "needs --canary"},
		{"promql with scrape", "metrics: [{name: x, query: 'up', successCondition: 'result[0] < 1'}]\n", true, "metrics[0]: a PromQL metric needs provider: prometheus"},
		{"two documents", "count: 1\n---\ncount: 2\n", true, "more than one YAML document"},
		{"empty", "", true, "the spec is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.spec), "a.yaml")
			if err == nil {
				_, err = s.Validate("a.yaml", tc.canary)
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var ie *InputError
			require.True(t, errors.As(err, &ie))
			assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
		})
	}
}

func TestSpecCustomMetricAccepted(t *testing.T) {
	s, err := Parse([]byte(`provider: prometheus
metrics:
- name: p99
  query: |
    histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{namespace="{{namespace}}", pod=~"{{canaryPods}}"}[5m]))) # p99
  successCondition: result[0] < 0.8
  failureLimit: 2
`), "f")
	require.NoError(t, err)
	c, err := s.Validate("f", true)
	require.NoError(t, err)
	require.Len(t, c.Checks, 1)
	ch := c.Checks[0]
	assert.Equal(t, "p99", ch.Name)
	assert.Equal(t, 2, ch.FailureLimit)
	assert.False(t, ch.Baseline)
	assert.Equal(t, "success: result[0] < 0.8", ch.Condition())
}

func TestCheckPromQL(t *testing.T) {
	for _, q := range []string{
		`up`,
		`sum(rate(http_requests_total{status="5xx", pod=~"{{canaryPods}}"}[1m])) / sum(rate(http_requests_total[1m]))`,
		`histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m:30s] offset 1m)))`,
		`max(vllm:kv_cache_usage_perc{namespace='{{ namespace }}'}) @ 1609746000`,
		"label_replace(up, \"a\", \"$1\", \"b\", `(.*)`)",
	} {
		assert.NoError(t, CheckPromQL(q), q)
	}
	for _, q := range []string{``, `sum(up`, `up)`, `up{a="b"]`, `up{a="b}`, `up >`, `up & up`, `rate(x[5m]))`} {
		assert.Error(t, CheckPromQL(q), q)
	}
}

func TestCompileCondition(t *testing.T) {
	f, err := CompileCondition("result[0] < 0.05 && len(result) == 1")
	require.NoError(t, err)
	ok, err := f([]float64{0.01})
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = f([]float64{0.5})
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestFromValues(t *testing.T) {
	s, err := FromValues(map[string]any{"analysis": map[string]any{"enabled": false, "count": 3}})
	require.NoError(t, err)
	assert.Nil(t, s, "disabled")
	s, err = FromValues(map[string]any{"analysis": map[string]any{"enabled": true, "count": 3, "interval": "10s"}})
	require.NoError(t, err)
	c, err := s.Validate("values analysis", true)
	require.NoError(t, err)
	assert.Equal(t, 3, c.Count)
	_, err = FromValues(map[string]any{"analysis": map[string]any{"enabled": true, "cuont": 3}})
	require.ErrorContains(t, err, "invalid analysis values analysis: line 1: field cuont not found")
}

// TestReadFileRefusesDirectoriesAndHugeFiles: --analysis (also from
// VLLMCTL_ANALYSIS or the config file) is read capped: a directory, a
// file over MaxSpecBytes and an endless file are refused with exit code
// 2, not read whole.
func TestReadFileRefusesDirectoriesAndHugeFiles(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.yaml")
	require.NoError(t, os.WriteFile(huge, append([]byte("interval: 10s\n#"), bytes.Repeat([]byte("x"), MaxSpecBytes)...), 0o600))
	binary := filepath.Join(dir, "binary.yaml")
	require.NoError(t, os.WriteFile(binary, []byte("interval: 10s\n\x00\x01\x02"), 0o600))
	paths := []string{dir, huge, binary}
	if _, err := os.Stat("/dev/zero"); err == nil {
		paths = append(paths, "/dev/zero")
	}
	for _, p := range paths {
		_, err := ReadFile(p)
		var in *InputError
		require.ErrorAs(t, err, &in, p)
		assert.Equal(t, exitcode.Invalid, in.ExitCode(), p)
	}
	assert.ErrorContains(t, func() error { _, err := ReadFile(huge); return err }(), "larger than the cap")
}
