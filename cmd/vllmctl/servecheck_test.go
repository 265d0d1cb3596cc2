package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/release"
)

// TestServeCheckFlags: only what the user chose reaches the engine (the
// chart's values decide the rest), and the timeout is bounded.
func TestServeCheckFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    release.ServeCheckOptions
		invalid string
	}{
		{args: nil, want: release.ServeCheckOptions{}},
		{args: []string{"--serve-check"}, want: release.ServeCheckOptions{Enabled: ptr.To(true)}},
		{args: []string{"--serve-check=false"}, want: release.ServeCheckOptions{Enabled: ptr.To(false)}},
		{args: []string{"--serve-check-timeout", "5s"}, want: release.ServeCheckOptions{Timeout: 5 * time.Second}},
		{args: []string{"--serve-check-timeout", "60s"}, want: release.ServeCheckOptions{Timeout: time.Minute}},
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
