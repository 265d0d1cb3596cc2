package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestTemplateRenderFlags: -a adds API versions offline; --dry-run takes
// client or server; server refuses the offline-only flags; a post-renderer
// that cannot be found is exit 2 naming it.
func TestTemplateRenderFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: c\nversion: 0.1.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "cm.yaml"), []byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n  sm: {{ .Capabilities.APIVersions.Has \"monitoring.coreos.com/v1/ServiceMonitor\" | quote }}\n"), 0o644))

	cases := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{name: "offline", args: []string{"template", "r", dir}, stdout: `sm: "false"`},
		{name: "-a", args: []string{"template", "r", dir, "-a", "monitoring.coreos.com/v1/ServiceMonitor"}, stdout: `sm: "true"`},
		{name: "--api-versions, comma-separated", args: []string{"template", "r", dir, "--api-versions", "x/v1,monitoring.coreos.com/v1/ServiceMonitor"}, stdout: `sm: "true"`},
		{name: "--dry-run alone is client", args: []string{"template", "r", dir, "--dry-run"}, stdout: `sm: "false"`},
		{name: "--dry-run=client", args: []string{"template", "r", dir, "--dry-run=client"}, stdout: `sm: "false"`},
		{name: "--dry-run=bogus", args: []string{"template", "r", dir, "--dry-run=bogus"}, code: 2, stderr: `--dry-run must be "client" or "server"`},
		{name: "server with -a", args: []string{"template", "r", dir, "--dry-run=server", "-a", "x/v1"}, code: 2, stderr: "--api-versions is for an offline render"},
		{name: "server with --kube-version", args: []string{"template", "r", dir, "--dry-run=server", "--kube-version", "1.30.0"}, code: 2, stderr: "--kube-version is for an offline render"},
		{name: "server without a cluster", args: []string{"template", "r", dir, "--dry-run=server"}, code: 6, stderr: "server version"},
		{name: "post-renderer not found", args: []string{"template", "r", dir, "--post-renderer", filepath.Join(dir, "missing")}, code: 2, stderr: "post-renderer " + filepath.Join(dir, "missing")},
		{name: "post-renderer args alone", args: []string{"template", "r", dir, "--post-renderer-args", "x"}, code: 2, stderr: "--post-renderer-args needs --post-renderer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runTemplateCLI(t, tc.args...)
			assert.Equal(t, tc.code, code, "stderr: %s", stderr)
			assert.Contains(t, stdout, tc.stdout)
			assert.Contains(t, stderr, tc.stderr)
		})
	}
}

// TestTemplateDryRunIsCommandLineOnly: deploy's --dry-run (a bool) from
// VLLMCTL_DRY_RUN or the config file does not reach template's --dry-run
// (client|server), which would refuse "true" on every render.
func TestTemplateDryRunIsCommandLineOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: c\nversion: 0.1.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"), 0o644))
	for _, tc := range []struct{ name, env, config string }{
		{name: "environment", env: "true"},
		{name: "config file", config: "dry-run: true\n"},
		{name: "server from the environment is not taken", env: "server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			configEnv(t, tc.config)
			if tc.env != "" {
				t.Setenv("VLLMCTL_DRY_RUN", tc.env)
			}
			t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
			var out, errOut bytes.Buffer
			ctx := context.Background()
			cmd := NewRootCommand(ctx, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			cmd.SetArgs([]string{"template", "r", dir})
			code := ExitCode(cmd.ErrOrStderr(), cmd.ExecuteContext(ctx))
			require.NoError(t, FlushStreams(cmd))
			assert.Equal(t, 0, code, "stderr: %s", errOut.String())
			assert.Contains(t, out.String(), "kind: ConfigMap")
		})
	}
}
