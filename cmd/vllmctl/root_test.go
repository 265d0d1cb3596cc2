package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestExecuteUnknownCommand: a command line cobra finds no command for
// is a usage error (exit 2), before anything runs; an error of a command
// that ran keeps its own code (a refused connection: 6).
func TestExecuteUnknownCommand(t *testing.T) {
	tests := []struct {
		args       []string
		wantCode   int
		wantStderr string
	}{
		{[]string{"nope"}, 2, `Error: unknown command "nope" for "vllmctl"`},
		{[]string{"nope", "--bogus"}, 2, `Error: unknown command "nope" for "vllmctl"`},
		{[]string{"get", "nope"}, 2, `Error: unknown command "nope" for "vllmctl get"`},
		{[]string{"--bogus"}, 2, "Error: unknown flag: --bogus"},
		{[]string{"status", "chat", "--kubeconfig", "KUBECONFIG"}, 6, "connection refused"},
		{[]string{"version"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Setenv("XDG_CONFIG_HOME", t.TempDir())
			// A cluster that refuses every connection.
			kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
			require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ml}}]
current-context: x
`), 0o600))
			args := slices.Clone(tt.args)
			for i, a := range args {
				if a == "KUBECONFIG" {
					args[i] = kubeconfig
				}
			}
			var stdout, stderr bytes.Buffer
			root := NewRootCommand(context.Background(), genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr})
			root.SetArgs(args)
			code := ExitCode(root.ErrOrStderr(), Execute(context.Background(), root))
			require.NoError(t, FlushStreams(root))
			assert.Equal(t, tt.wantCode, code, "stderr: %s", stderr.String())
			if tt.wantStderr == "" {
				assert.Empty(t, stderr.String())
				return
			}
			assert.Contains(t, stderr.String(), tt.wantStderr)
		})
	}
}

// TestEveryCommandGroupRefusesAnUnknownSubcommand: a mistyped subcommand
// of any command group (`vllmctl fleet deplyo`) is a usage error, exit 2,
// never the group's help with exit 0, which a CI step would take for
// success; so is a group called with no subcommand.
func TestEveryCommandGroupRefusesAnUnknownSubcommand(t *testing.T) {
	root := NewRootCommand(context.Background(), genericiooptions.NewTestIOStreamsDiscard())
	var groups [][]string
	var walk func(path []string, c *cobra.Command)
	walk = func(path []string, c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.HasSubCommands() || sub.Name() == "help" {
				continue
			}
			p := append(slices.Clone(path), sub.Name())
			groups = append(groups, p)
			walk(p, sub)
		}
	}
	walk(nil, root)
	require.NotEmpty(t, groups)
	for _, g := range groups {
		for _, args := range [][]string{append(slices.Clone(g), "deplyo"), g} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				t.Setenv("XDG_CONFIG_HOME", t.TempDir())
				var stdout, stderr bytes.Buffer
				root := NewRootCommand(context.Background(), genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr})
				root.SetArgs(args)
				code := ExitCode(root.ErrOrStderr(), Execute(context.Background(), root))
				require.NoError(t, FlushStreams(root))
				assert.Equal(t, 2, code, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
				assert.Contains(t, stderr.String(), "Error: ")
			})
		}
	}
}
