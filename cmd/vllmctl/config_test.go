package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// configEnv gives the test an empty environment of VLLMCTL_* variables and
// a config file with content ("" for none).
func configEnv(t *testing.T, content string) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "VLLMCTL_") {
			t.Setenv(name, "")
			require.NoError(t, os.Unsetenv(name))
		}
	}
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	if content != "" {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "vllmctl"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "vllmctl", "config.yaml"), []byte(content), 0o600))
	}
}

// runConfiguredDeploy runs `vllmctl deploy args...` on the fakes with the
// environment and config file bound as the root command binds them, and
// returns the command's options once it ran.
func (f *releaseFakes) runConfiguredDeploy(t *testing.T, args ...string) (*deployOptions, string, int) {
	t.Helper()
	var o *deployOptions
	build := func(g *GlobalOptions) *cobra.Command {
		o = &deployOptions{g: g}
		cmd := deployCommand(o)
		cmd.PreRunE = func(cmd *cobra.Command, _ []string) error { return g.bindConfig(cmd) }
		return cmd
	}
	_, stderr, code := runRecordCommand(t, f.factory(), build, append([]string{"deploy"}, args...)...)
	return o, stderr, code
}

// TestConfigValuesAreDefaults: a flag's value from VLLMCTL_* or the config
// file is a default, not a flag given: a deploy without --canary is not
// refused for a canary-hold there, a deploy with --canary holds that long,
// and only --canary-hold on the command line needs --canary.
func TestConfigValuesAreDefaults(t *testing.T) {
	deploy := append([]string{"chat"}, small...)
	for _, tc := range []struct {
		name     string
		env      map[string]string
		config   string
		args     []string
		wantCode int
		wantErr  string
		wantHold time.Duration // with --canary
	}{
		{name: "environment, no canary", env: map[string]string{"VLLMCTL_CANARY_HOLD": "2m"}},
		{name: "config file, no canary", config: "canary-hold: 10m\n"},
		{name: "config file, every canary flag, no canary",
			config: "canary-hold: 10m\ncanary-gate: 'true'\ncanary-gate-timeout: 1m\ncanary-max-restarts: 2\n"},
		{name: "environment, canary", env: map[string]string{"VLLMCTL_CANARY_HOLD": "2m"},
			args: []string{"--canary", "1"}, wantHold: 2 * time.Minute},
		{name: "config file, canary", config: "canary-hold: 10m\n",
			args: []string{"--canary", "1"}, wantHold: 10 * time.Minute},
		{name: "environment over config file", env: map[string]string{"VLLMCTL_CANARY_HOLD": "2m"}, config: "canary-hold: 10m\n",
			args: []string{"--canary", "1"}, wantHold: 2 * time.Minute},
		{name: "command line over environment", env: map[string]string{"VLLMCTL_CANARY_HOLD": "2m"},
			args: []string{"--canary", "1", "--canary-hold", "3m"}, wantHold: 3 * time.Minute},
		{name: "command line without --canary", args: []string{"--canary-hold", "1m"},
			wantCode: 2, wantErr: "--canary-hold needs --canary"},
		{name: "command line without --canary, environment set", env: map[string]string{"VLLMCTL_CANARY_HOLD": "2m"},
			args: []string{"--canary-hold", "1m"}, wantCode: 2, wantErr: "--canary-hold needs --canary"},
		{name: "bad value in the environment", env: map[string]string{"VLLMCTL_CANARY_HOLD": "soon"},
			wantCode: 2, wantErr: `--canary-hold "soon" from environment or config file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			configEnv(t, tc.config)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			f := newReleaseFakes()
			o, stderr, code := f.runConfiguredDeploy(t, append(deploy, tc.args...)...)
			if tc.wantCode != 0 {
				assert.Equal(t, tc.wantCode, code, stderr)
				assert.Contains(t, stderr, tc.wantErr)
				return
			}
			assert.NotContains(t, stderr, "needs --canary")
			if tc.wantHold == 0 {
				assert.Equal(t, 0, code, stderr)
				assert.Nil(t, o.canary.opts, "no canary")
				return
			}
			require.NotNil(t, o.canary.opts, "the canary flags were accepted: %s", stderr)
			assert.Equal(t, tc.wantHold, o.canary.opts.Hold)
		})
	}
}

// TestConfigRollbackFlags: --rollback-on-failure and --no-rollback
// contradict each other only when both are typed; one typed wins over the
// other's value from the environment or the config file.
func TestConfigRollbackFlags(t *testing.T) {
	deploy := append([]string{"chat"}, small...)
	for _, tc := range []struct {
		name         string
		env          map[string]string
		config       string
		args         []string
		wantCode     int
		wantRollback bool
	}{
		{name: "defaults", wantRollback: true},
		{name: "config file turns it off", config: "no-rollback: true\n"},
		{name: "environment turns it off", env: map[string]string{"VLLMCTL_ROLLBACK_ON_FAILURE": "false"}},
		{name: "command line over config file", config: "no-rollback: true\n",
			args: []string{"--rollback-on-failure"}, wantRollback: true},
		{name: "command line over environment", env: map[string]string{"VLLMCTL_ROLLBACK_ON_FAILURE": "false"},
			args: []string{"--no-rollback=false"}, wantRollback: true},
		{name: "command line off, environment on", env: map[string]string{"VLLMCTL_ROLLBACK_ON_FAILURE": "true"},
			args: []string{"--no-rollback"}},
		{name: "both typed", args: []string{"--rollback-on-failure", "--no-rollback"}, wantCode: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			configEnv(t, tc.config)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			f := newReleaseFakes()
			o, stderr, code := f.runConfiguredDeploy(t, append(deploy, tc.args...)...)
			require.Equal(t, tc.wantCode, code, stderr)
			if tc.wantCode != 0 {
				assert.Contains(t, stderr, "contradict")
				return
			}
			assert.Equal(t, tc.wantRollback, o.rollbackOnFailure && !o.noRollback)
		})
	}
}

// TestConfigFailOnKnownCause: --fail-on-known-cause (default true) is a
// verdict flag like --max-restarts: VLLMCTL_FAIL_ON_KNOWN_CAUSE and the
// config file set it, the command line wins, and false restores the old
// rule (the watcher's WaitOnKnownCause).
func TestConfigFailOnKnownCause(t *testing.T) {
	deploy := append([]string{"chat"}, small...)
	for _, tc := range []struct {
		name   string
		env    map[string]string
		config string
		args   []string
		want   bool
	}{
		{name: "default", want: true},
		{name: "command line", args: []string{"--fail-on-known-cause=false"}},
		{name: "environment", env: map[string]string{"VLLMCTL_FAIL_ON_KNOWN_CAUSE": "false"}},
		{name: "config file", config: "fail-on-known-cause: false\n"},
		{name: "command line over environment", env: map[string]string{"VLLMCTL_FAIL_ON_KNOWN_CAUSE": "false"},
			args: []string{"--fail-on-known-cause"}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			configEnv(t, tc.config)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			f := newReleaseFakes()
			o, stderr, code := f.runConfiguredDeploy(t, append(deploy, tc.args...)...)
			require.Equal(t, 0, code, stderr)
			assert.Equal(t, tc.want, o.verdicts.failOnKnownCause)
			assert.Equal(t, !tc.want, o.verdicts.options().WaitOnKnownCause)
		})
	}
}

// TestFailOnKnownCauseFlag: deploy, wait and test have
// --fail-on-known-cause, default true, with the verdict flags.
func TestFailOnKnownCauseFlag(t *testing.T) {
	root := NewRootCommand(context.Background(), genericiooptions.NewTestIOStreamsDiscard())
	for _, name := range []string{"deploy", "wait", "test"} {
		cmd, _, err := root.Find([]string{name})
		require.NoError(t, err, name)
		fl := cmd.Flags().Lookup("fail-on-known-cause")
		require.NotNil(t, fl, name)
		assert.Equal(t, "true", fl.DefValue, name)
		assert.Contains(t, fl.Usage, "gpu-oom", name)
		assert.Contains(t, cmd.UsageString(), "--fail-on-known-cause", name)
	}
}

// TestConfigFileIsReadCapped: the config file (VLLMCTL_CONFIG or the
// default path) is read at most maxConfigFileBytes: a larger one, or an
// endless one such as /dev/zero behind a .yaml name, is exit 2 naming the
// file and the cap, before anything is asked of the cluster; a missing
// file is still fine.
func TestConfigFileIsReadCapped(t *testing.T) {
	dir := t.TempDir()
	endless := filepath.Join(dir, "endless.yaml")
	require.NoError(t, os.Symlink("/dev/zero", endless))
	huge := filepath.Join(dir, "huge.yaml")
	require.NoError(t, os.WriteFile(huge, []byte("timeout: 5m\n# "+strings.Repeat("x", maxConfigFileBytes)+"\n"), 0o600))
	fits := filepath.Join(dir, "fits.yaml")
	require.NoError(t, os.WriteFile(fits, []byte("timeout: 5m\n# "+strings.Repeat("x", maxConfigFileBytes-20)+"\n"), 0o600))

	for _, tc := range []struct {
		name, path string
		wantCode   int
		wantErr    string
	}{
		{name: "endless", path: endless, wantCode: 2, wantErr: "config file " + endless + ": file too large: larger than the cap of 1 MiB"},
		{name: "over the cap", path: huge, wantCode: 2, wantErr: "config file " + huge + ": file too large: larger than the cap of 1 MiB"},
		{name: "a directory", path: dir, wantCode: 2, wantErr: "config file " + dir + ": "},
		{name: "at the cap", path: fits},
		{name: "missing", path: filepath.Join(dir, "missing.yaml")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			configEnv(t, "")
			t.Setenv("VLLMCTL_CONFIG", tc.path)
			f := newReleaseFakes()
			o, stderr, code := f.runConfiguredDeploy(t, append([]string{"chat"}, small...)...)
			assert.Equal(t, tc.wantCode, code, stderr)
			if tc.wantCode != 0 {
				assert.Contains(t, stderr, tc.wantErr)
				recs, err := f.store.InNamespace("ml").List(context.Background(), "chat")
				require.NoError(t, err)
				assert.Empty(t, recs, "nothing deployed")
				return
			}
			require.NotNil(t, o)
		})
	}
}
