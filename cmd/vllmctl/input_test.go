package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// runRoot runs the real command tree (config binding included) with
// args; no cluster is reachable.
func runRoot(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := NewRootCommand(context.Background(), genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr})
	root.SetArgs(args)
	code := ExitCode(root.ErrOrStderr(), root.ExecuteContext(context.Background()))
	require.NoError(t, FlushStreams(root))
	return stdout.String(), stderr.String(), code
}

// TestInputErrorsBeforeTheCluster: bad namespaces, kubeconfigs and config
// files are input errors (exit 2) named in the message; template and lint
// need no readable kubeconfig.
func TestInputErrorsBeforeTheCluster(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("KUBECONFIG", filepath.Join(dir, "missing-kubeconfig"))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"invalid namespace", []string{"list", "-n", "Bad_NS"}, `namespace "Bad_NS" is invalid`},
		{"invalid namespace, deploy", []string{"deploy", "chat", "-n", "Bad_NS"}, `namespace "Bad_NS" is invalid`},
		{"missing kubeconfig", []string{"history", "chat", "--kubeconfig", filepath.Join(dir, "nope")}, "kubeconfig: stat " + filepath.Join(dir, "nope")},
		{"zero burst", []string{"list", "--kube-api-burst", "0"}, "--kube-api-burst 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runRoot(t, tc.args...)
			assert.Equal(t, 2, code, stderr)
			assert.Contains(t, stderr, tc.want)
		})
	}

	t.Run("template needs no kubeconfig", func(t *testing.T) {
		stdout, stderr, code := runRoot(t, "template", "chat")
		assert.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "namespace: default")
	})

	t.Run("unknown config file keys", func(t *testing.T) {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "vllmctl"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "vllmctl", "config.yaml"), []byte("timeout: 5m\ntimout: 6m\n"), 0o600))
		_, stderr, code := runRoot(t, "template", "chat")
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, "unknown keys timout")
	})
}
