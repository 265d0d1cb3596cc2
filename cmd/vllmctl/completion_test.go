package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestCompletionCommand: `completion SHELL` prints the script of each
// shell cobra supports on stdout; an unknown shell is a usage error.
func TestCompletionCommand(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	run := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		root := NewRootCommand(context.Background(), genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr})
		root.SetArgs(args)
		code := ExitCode(root.ErrOrStderr(), Execute(context.Background(), root))
		require.NoError(t, FlushStreams(root))
		return stdout.String(), stderr.String(), code
	}
	for shell, want := range map[string]string{
		"bash":       "# bash completion V2 for vllmctl",
		"zsh":        "#compdef vllmctl",
		"fish":       "# fish completion for vllmctl",
		"powershell": "# powershell completion for vllmctl",
	} {
		t.Run(shell, func(t *testing.T) {
			stdout, stderr, code := run("completion", shell)
			assert.Equal(t, 0, code, "stderr: %s", stderr)
			assert.Contains(t, stdout, want)
			assert.Empty(t, stderr)
		})
	}
	t.Run("unknown shell", func(t *testing.T) {
		_, stderr, code := run("completion", "tcsh")
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, `unknown command "tcsh"`)
	})
	t.Run("no shell", func(t *testing.T) {
		_, stderr, code := run("completion")
		assert.Equal(t, 2, code)
		assert.Contains(t, stderr, "a subcommand is required")
	})
	t.Run("commands complete", func(t *testing.T) {
		stdout, _, code := run("__complete", "dep")
		assert.Equal(t, 0, code)
		assert.Contains(t, stdout, "deploy\t")
		assert.Contains(t, stdout, "dependency\t")
	})
}
