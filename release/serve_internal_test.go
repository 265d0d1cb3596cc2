package release

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

func TestResolveServeCheck(t *testing.T) {
	on, off := true, false
	builtin := storage.Chart{Name: "vllm", Builtin: true}
	other := storage.Chart{Name: "mine"}
	model := map[string]any{"name": "Qwen/Qwen3-0.6B", "servedModelName": ""}
	builtinValues := func(sc map[string]any) map[string]any {
		return map[string]any{"model": model, "serveCheck": sc}
	}
	defaults := map[string]any{"enabled": true, "model": "", "prompt": "Say hello", "maxTokens": float64(4), "timeout": "60s", "port": float64(0)}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for dk, dv := range defaults {
			m[dk] = dv
		}
		m[k] = v
		return m
	}
	for _, tc := range []struct {
		name   string
		chart  storage.Chart
		values map[string]any
		opts   ServeCheckOptions
		// want nil: the check is off; wantErr: the field the error names.
		want    *serveConfig
		wantErr string
	}{
		{name: "built-in defaults", chart: builtin, values: builtinValues(defaults),
			want: &serveConfig{spec: wait.ServeSpec{Model: "Qwen/Qwen3-0.6B", Prompt: "Say hello", MaxTokens: 4, Timeout: time.Minute}}},
		{name: "served model name wins over the model", chart: builtin,
			values: map[string]any{"model": map[string]any{"name": "a/b", "servedModelName": "chat"}, "serveCheck": defaults},
			want:   &serveConfig{spec: wait.ServeSpec{Model: "chat", Prompt: "Say hello", MaxTokens: 4, Timeout: time.Minute}}},
		{name: "serveCheck.model wins", chart: builtin, values: builtinValues(with("model", "other")),
			want: &serveConfig{spec: wait.ServeSpec{Model: "other", Prompt: "Say hello", MaxTokens: 4, Timeout: time.Minute}}},
		{name: "built-in record of before the check: on, defaults", chart: builtin, values: map[string]any{"model": model},
			want: &serveConfig{spec: wait.ServeSpec{Model: "Qwen/Qwen3-0.6B", Timeout: wait.DefaultServeTimeout}}},
		{name: "values turn it off", chart: builtin, values: builtinValues(with("enabled", false))},
		{name: "--serve-check=false", chart: builtin, values: builtinValues(defaults), opts: ServeCheckOptions{Enabled: &off}},
		{name: "--serve-check wins over the values", chart: builtin, values: builtinValues(with("enabled", false)), opts: ServeCheckOptions{Enabled: &on},
			want: &serveConfig{spec: wait.ServeSpec{Model: "Qwen/Qwen3-0.6B", Prompt: "Say hello", MaxTokens: 4, Timeout: time.Minute}}},
		{name: "--serve-check-timeout wins over the values", chart: builtin, values: builtinValues(with("timeout", "2m")), opts: ServeCheckOptions{Timeout: 5 * time.Second},
			want: &serveConfig{spec: wait.ServeSpec{Model: "Qwen/Qwen3-0.6B", Prompt: "Say hello", MaxTokens: 4, Timeout: 5 * time.Second}}},
		{name: "port", chart: builtin, values: builtinValues(with("port", 8080)),
			want: &serveConfig{port: 8080, spec: wait.ServeSpec{Model: "Qwen/Qwen3-0.6B", Prompt: "Say hello", MaxTokens: 4, Timeout: time.Minute}}},
		{name: "another chart: off", chart: other, values: map[string]any{"model": model}},
		{name: "another chart's own serveCheck key is left alone", chart: other, values: map[string]any{"serveCheck": "yes please"}},
		{name: "another chart asks in its values", chart: other, values: map[string]any{"serveCheck": map[string]any{"enabled": true, "model": "m"}},
			want: &serveConfig{spec: wait.ServeSpec{Model: "m", Timeout: wait.DefaultServeTimeout}}},
		{name: "another chart with --serve-check: any listed model", chart: other, values: map[string]any{}, opts: ServeCheckOptions{Enabled: &on},
			want: &serveConfig{spec: wait.ServeSpec{Timeout: wait.DefaultServeTimeout}}},
		{name: "timeout 0", chart: builtin, values: builtinValues(with("timeout", "0s")), wantErr: "serveCheck.timeout"},
		{name: "timeout negative", chart: builtin, values: builtinValues(with("timeout", "-5s")), wantErr: "serveCheck.timeout"},
		{name: "timeout huge", chart: builtin, values: builtinValues(with("timeout", "1000h")), wantErr: "serveCheck.timeout"},
		{name: "timeout not a duration", chart: builtin, values: builtinValues(with("timeout", "soon")), wantErr: "serveCheck.timeout"},
		{name: "timeout a number", chart: builtin, values: builtinValues(with("timeout", float64(60))), wantErr: "serveCheck.timeout"},
		{name: "enabled a string", chart: builtin, values: builtinValues(with("enabled", "yes")), wantErr: "serveCheck.enabled"},
		{name: "maxTokens a string", chart: builtin, values: builtinValues(with("maxTokens", "4")), wantErr: "serveCheck.maxTokens"},
		{name: "maxTokens fractional", chart: builtin, values: builtinValues(with("maxTokens", 2.5)), wantErr: "serveCheck.maxTokens"},
		{name: "maxTokens too many", chart: builtin, values: builtinValues(with("maxTokens", float64(1e9))), wantErr: "serveCheck.maxTokens"},
		{name: "model a list", chart: builtin, values: builtinValues(with("model", []any{"a"})), wantErr: "serveCheck.model"},
		{name: "port out of range", chart: builtin, values: builtinValues(with("port", float64(70000))), wantErr: "serveCheck.port"},
		{name: "unknown key", chart: builtin, values: builtinValues(with("modle", "x")), wantErr: "serveCheck.modle"},
		{name: "not a map", chart: builtin, values: map[string]any{"serveCheck": "on"}, wantErr: "serveCheck"},
		{name: "another chart that asks: its keys are checked", chart: other,
			values: map[string]any{"serveCheck": map[string]any{"enabled": true, "timeout": 5}}, wantErr: "serveCheck.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveServeCheck(tc.chart, tc.values, tc.opts)
			if tc.wantErr != "" {
				require.Error(t, err)
				var ie *ServeCheckInputError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, tc.wantErr, ie.Field)
				assert.Contains(t, err.Error(), tc.wantErr+":")
				assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestValidateServeTimeout(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{time.Second, true}, {time.Hour, true}, {0, false}, {-time.Second, false}, {time.Hour + 1, false}} {
		err := ValidateServeTimeout("--serve-check-timeout", tc.d)
		if tc.ok {
			assert.NoError(t, err, tc.d)
			continue
		}
		require.Error(t, err, tc.d)
		assert.Contains(t, err.Error(), "--serve-check-timeout")
	}
}
