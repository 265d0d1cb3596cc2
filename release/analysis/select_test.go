package analysis

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

func TestAnalysisOfValues(t *testing.T) {
	builtin := map[string]any{"analysis": map[string]any{"enabled": false, "interval": "1m"}}
	const canary, noCanary, noPrometheus = true, false, false

	cfg, err := Of(nil, builtin, map[string]any{"analysis": map[string]any{"enabled": false, "interval": "1m"}}, canary, noPrometheus)
	require.NoError(t, err)
	assert.Nil(t, cfg, "disabled by default")

	cfg, err = Of(nil, builtin, map[string]any{"analysis": map[string]any{"enabled": true, "interval": "10s", "count": 2,
		"presets": map[string]any{"ttftP95Ratio": map[string]any{"max": 2.0}}}}, canary, noPrometheus)
	require.NoError(t, err)
	require.NotNil(t, cfg)
	assert.Equal(t, 20*time.Second, cfg.Duration())
	require.Len(t, cfg.Checks, 1)
	assert.Equal(t, 2.0, cfg.Checks[0].Max)

	_, err = Of(nil, builtin, map[string]any{"analysis": map[string]any{"enabled": true,
		"presets": map[string]any{"ttftP95Ratio": map[string]any{"max": 2.0}}}}, noCanary, noPrometheus)
	require.ErrorContains(t, err, "presets.ttftP95Ratio: compares the canary with the stable pods: it needs --canary")
	assert.Equal(t, exitcode.Invalid, exitcode.Of(err))

	// A chart of its own whose values happen to have an analysis key is
	// not read: only the built-in chart's (its defaults carry enabled).
	cfg, err = Of(nil, map[string]any{"analysis": "weekly"}, map[string]any{"analysis": map[string]any{"enabled": true, "count": 0}}, canary, noPrometheus)
	require.NoError(t, err)
	assert.Nil(t, cfg)

	// --analysis wins over the values.
	file := &Config{Count: 7}
	cfg, err = Of(file, builtin, map[string]any{"analysis": map[string]any{"enabled": true, "count": 0}}, noCanary, noPrometheus)
	require.NoError(t, err)
	assert.Same(t, file, cfg)
}
