package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/release/servecheck"
)

// TestServeCheckFlags: only what the user chose reaches the engine (the
// chart's values decide the rest), and the timeout is bounded.
func TestServeCheckFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    servecheck.Options
		invalid string
	}{
		{args: nil, want: servecheck.Options{}},
		{args: []string{"--serve-check"}, want: servecheck.Options{Enabled: ptr.To(true)}},
		{args: []string{"--serve-check=false"}, want: servecheck.Options{Enabled: ptr.To(false)}},
		{args: []string{"--serve-check-timeout", "5s"}, want: servecheck.Options{Timeout: 5 * time.Second}},
		{args: []string{"--serve-check-timeout", "60s"}, want: servecheck.Options{Timeout: time.Minute}},
		{args: []string{"--serve-check-timeout", "0"}, invalid: "--serve-check-timeout: 0s"},
		{args: []string{"--serve-check-timeout", "-1s"}, invalid: "--serve-check-timeout: -1s"},
		{args: []string{"--serve-check-timeout", "61m"}, invalid: "--serve-check-timeout: 1h1m0s"},
	} {
		t.Run("args "+strings.Join(tc.args, " "), func(t *testing.T) {
			var s serveCheckFlags
			fs := pflag.NewFlagSet("deploy", pflag.ContinueOnError)
			s.AddFlags(fs)
			require.NoError(t, fs.Parse(tc.args))
			s.Complete(fs, nil)
			err := s.Validate()
			if tc.invalid != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.invalid)
				assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.options())
		})
	}
}

// TestServeCheckTimeoutFromConfig: --serve-check-timeout from
// VLLMCTL_SERVE_CHECK_TIMEOUT or the config file is bounded as the flag
// is: exit 2 naming it, before any cluster is contacted (no kubeconfig).
func TestServeCheckTimeoutFromConfig(t *testing.T) {
	for _, tc := range []struct{ name, env, config, want string }{
		{name: "environment 0", env: "0", want: "--serve-check-timeout: 0s"},
		{name: "environment negative", env: "-5s", want: "--serve-check-timeout: -5s"},
		{name: "environment huge", env: "1000h", want: "--serve-check-timeout: 1000h0m0s"},
		{name: "environment not a duration", env: "soon", want: "serve-check-timeout"},
		{name: "config file 0", config: "serve-check-timeout: 0s\n", want: "--serve-check-timeout: 0s"},
		{name: "config file huge", config: "serve-check-timeout: 1000000h\n", want: "--serve-check-timeout: 1000000h0m0s"},
		{name: "config file wrong type", config: "serve-check-timeout: [1]\n", want: "serve-check-timeout"},
	} {
		for _, args := range [][]string{{"deploy", "probe", "vllm"}, {"wait", "probe"}, {"rollback", "probe"}, {"test", "probe"}} {
			t.Run(tc.name+" "+args[0], func(t *testing.T) {
				configEnv(t, tc.config)
				if tc.env != "" {
					t.Setenv("VLLMCTL_SERVE_CHECK_TIMEOUT", tc.env)
				}
				t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
				_, stderr, code := runRoot(t, args...)
				assert.Equal(t, exitcode.Invalid, code, "stderr: %s", stderr)
				assert.Contains(t, stderr, tc.want)
			})
		}
	}
}
