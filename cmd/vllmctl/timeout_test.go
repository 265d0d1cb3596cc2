package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/wait"
)

const (
	followsLine = "chat preflight: timeout: 31m0s, following the startup probe's budget (no --timeout given)\n"
	shortWarn   = "is shorter than the startup probe's budget of 30m0s"
)

// recordWaits makes the fakes' waiter record the timeout of every wait;
// the fakes' clock stands still, so a deploy's wait gets all of it.
func (f *releaseFakes) recordWaits() func() []time.Duration {
	var mu sync.Mutex
	var got []time.Duration
	f.waiter.Script = func(_ context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, opts.Timeout)
		return wait.Result{Outcome: wait.OutcomeCurrent, Objects: objs}, nil
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), got...)
	}
}

// TestDeployTimeoutDefault: the built-in chart's startup probe allows
// 30m; a deploy given no --timeout (not on the command line, not in
// VLLMCTL_TIMEOUT, not in the config file) waits 31m, says so, and warns
// about nothing. A --timeout the user chose anywhere is kept, and warns
// when shorter than the budget, even when it equals the default.
func TestDeployTimeoutDefault(t *testing.T) {
	deploy := append([]string{"chat"}, small...)
	for _, tc := range []struct {
		name        string
		env         map[string]string
		config      string
		args        []string
		wantTimeout time.Duration
		wantFollows bool
		wantWarning bool
	}{
		{name: "no --timeout", wantTimeout: 31 * time.Minute, wantFollows: true},
		{name: "a shorter --timeout", args: []string{"--timeout", "5m"}, wantTimeout: 5 * time.Minute, wantWarning: true},
		{name: "--timeout at the default", args: []string{"--timeout", "10m"}, wantTimeout: 10 * time.Minute, wantWarning: true},
		{name: "a longer --timeout", args: []string{"--timeout", "45m"}, wantTimeout: 45 * time.Minute},
		{name: "VLLMCTL_TIMEOUT at the default", env: map[string]string{"VLLMCTL_TIMEOUT": "10m"},
			wantTimeout: 10 * time.Minute, wantWarning: true},
		{name: "a longer timeout in the config file", config: "timeout: 40m\n", wantTimeout: 40 * time.Minute},
		{name: "the command line over the config file", config: "timeout: 40m\n", args: []string{"--timeout", "35m"},
			wantTimeout: 35 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			configEnv(t, tc.config)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			f := newReleaseFakes()
			waits := f.recordWaits()
			_, stderr, code := f.runConfiguredDeploy(t, append(deploy, tc.args...)...)
			require.Equal(t, 0, code, stderr)
			if tc.wantFollows {
				assert.Contains(t, stderr, followsLine)
			} else {
				assert.NotContains(t, stderr, "following the startup probe's budget")
			}
			if tc.wantWarning {
				assert.Contains(t, stderr, "warning: deployment/chat container server: --timeout "+tc.wantTimeout.String()+" "+shortWarn)
			} else {
				assert.NotContains(t, stderr, shortWarn)
			}
			assert.Equal(t, []time.Duration{tc.wantTimeout}, waits())
		})
	}
}

// TestRollbackAndWaitTimeoutDefault: rollback and wait follow the
// restored or waited revision's start-up budget when given no --timeout.
func TestRollbackAndWaitTimeoutDefault(t *testing.T) {
	f := newReleaseFakes()
	waits := f.recordWaits()
	_, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, stderr)
	_, stderr, code = f.run(t, deployArgs("--set", "image.tag=v0.11.1", "--timeout", "45m")...)
	require.Equal(t, 0, code, stderr)

	_, stderr, code = f.run(t, "rollback", "chat")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "chat rollback: timeout: 31m0s, following the startup probe's budget (no --timeout given)\n")
	_, stderr, code = f.run(t, "rollback", "chat", "--to-revision", "2", "--timeout", "12m")
	require.Equal(t, 0, code, stderr)
	assert.NotContains(t, stderr, "following the startup probe's budget")

	_, stderr, code = f.runWait(t, "chat")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "timeout 31m0s, following the startup probe's budget (no --timeout given)\n")
	_, stderr, code = f.runWait(t, "chat", "--timeout", "7m")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "2 object(s), timeout 7m0s\n")

	assert.Equal(t, []time.Duration{31 * time.Minute, 45 * time.Minute, 31 * time.Minute, 12 * time.Minute, 31 * time.Minute, 7 * time.Minute}, waits())
}
