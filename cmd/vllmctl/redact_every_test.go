package main

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

// commandPaths are the runnable commands of the tree ("get values").
func commandPaths(root *cobra.Command) []string {
	var out []string
	var walk func(c *cobra.Command, prefix string)
	walk = func(c *cobra.Command, prefix string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			p := strings.TrimSpace(prefix + " " + sub.Name())
			if sub.HasSubCommands() {
				walk(sub, p)
				continue
			}
			out = append(out, p)
		}
	}
	walk(root, "")
	sort.Strings(out)
	return out
}

// noReleaseSecrets are the commands that never hold a release's Secret
// values, each with why; every other command is run below.
var noReleaseSecrets = map[string]string{
	"version":               "prints the build only",
	"completion bash":       "prints a shell script",
	"completion fish":       "prints a shell script",
	"completion powershell": "prints a shell script",
	"completion zsh":        "prints a shell script",
	"lint":                  "reads a chart, no release or cluster; prints rule findings",
	"template":              "prints the user's own render as `helm template` does; --dry-run=server withholds Secret data (TestTemplateRenderFlags)",
	"dependency list":       "reads Chart.yaml and charts/ only",
	"dependency update":     "vendors charts; repository credentials are masked (TestRepoErrorCodes)",
	"repo add":              "repository credentials are masked (TestRepoErrorCodes, TestRepoNamesAreSafe)",
	"repo list":             "prints names and URLs, passwords masked",
	"repo remove":           "prints names",
	"repo update":           "repository credentials are masked",
	"registry login":        "registry credentials are never printed (its tests)",
	"registry logout":       "prints the host",
	"diagnose":              "--log reads no release; a POD of a release is run in TestDiagnoseReleasePodWithholdsItsSecrets",
	"adopt":                 "prints Helm's revisions (numbers, statuses, descriptions) through the same output writers; e2e TestAdopt*",
	"handover":              "as adopt; e2e TestHandover*",
	"fleet deploy":          "one engine per target over the command's Redactor and output writers; TestFleetGateIsRedacted (fleet_test.go, and the e2e test of that name)",
	"fleet diff":            "as fleet deploy",
	"fleet status":          "as fleet deploy",
}

// TestEveryCommandWithholdsSecrets runs every command that reads or
// writes a release, in every output and progress format, on a release
// whose Secret holds a known token that its rollout also echoes (a pod
// logging it, an error quoting it), and finds the token in no output: the
// one redaction at the output streams, not a list of fields. A command
// added to the tree must join the runs or say in noReleaseSecrets why it
// holds no Secret.
func TestEveryCommandWithholdsSecrets(t *testing.T) {
	const token = "hf_EveryCommandToken<&>31"
	other := "hf_OtherTokenValue_8642"
	b64 := base64.StdEncoding.EncodeToString([]byte(token))
	leak := leakingRollout("container exited: invalid token "+token, rollout.Diagnosis{Verdict: rollout.VerdictCrashLoop,
		Reason: "CrashLoopBackOff", Object: "deployment/chat",
		Message: "401 Unauthorized for token " + token, Evidence: "HF_TOKEN=" + b64,
		LogTail: []string{"using token " + token, "cut " + token[:12] + "…"}, Hints: []string{"check " + token}})
	chart := "../../testdata/charts/diffdemo"
	set := []string{"--set", "secret.token=" + token, "--skip-preflight"}
	keep := []string{"--history-max", "0"}

	type run struct {
		args []string
		// leak makes the fake watcher fail the rollout, echoing the token.
		leak bool
	}
	runs := map[string][]run{}
	add := func(path string, leak bool, args ...string) {
		runs[path] = append(runs[path], run{args: args, leak: leak})
	}
	outputs := []string{"table", "json", "yaml"}
	progress := []string{"plain", "json"}
	for _, p := range progress {
		add("deploy", false, append(append(append([]string{"deploy", "chat", chart}, set...), keep...), "--progress", p)...)
		for _, o := range outputs {
			add("deploy", true, append(append(append([]string{"deploy", "chat", chart}, set...), keep...),
				"--set", "config.maxModelLen=v"+p+o, "--progress", p, "-o", o)...)
			add("deploy", true, append(append(append([]string{"deploy", "chat", chart}, set...), keep...),
				"--set", "config.maxModelLen=n"+p+o, "--no-rollback", "--progress", p, "-o", o)...)
		}
	}
	for _, o := range []string{"", "json"} {
		args := append(append([]string{"diff", "chat", chart}, set...), "--set", "secret.user="+other, "--set", "config.maxModelLen=x")
		if o != "" {
			args = append(args, "-o", o)
		}
		add("diff", false, args...)
	}
	for _, o := range outputs {
		add("status", false, "status", "chat", "-o", o)
		add("history", false, "history", "chat", "-o", o)
		add("list", false, "list", "-o", o)
		for _, p := range progress {
			add("wait", true, "wait", "chat", "--progress", p, "-o", o)
			add("test", true, "test", "chat", "--progress", p, "-o", o)
		}
	}
	for _, o := range []string{"yaml", "json"} {
		add("get values", false, "get", "values", "chat", "-o", o)
		add("get values", false, "get", "values", "chat", "--all", "-o", o)
	}
	add("get manifest", false, "get", "manifest", "chat")
	add("get hooks", false, "get", "hooks", "chat")
	add("get notes", false, "get", "notes", "chat")
	for _, p := range progress {
		add("rollback", true, "rollback", "chat", "--to-revision", "1", "--progress", p, "-o", "json")
	}
	add("rollback", false, "rollback", "chat", "--to-revision", "1")
	for _, o := range outputs {
		add("uninstall", false, "uninstall", "chat", "--keep-history", "-o", o)
		add("deploy", false, append(append(append([]string{"deploy", "chat", chart}, set...), keep...), "--progress", "json", "-o", o)...)
	}

	root := NewRootCommand(context.Background(), genericiooptions.NewTestIOStreamsDiscard())
	for _, path := range commandPaths(root) {
		_, exempt := noReleaseSecrets[path]
		assert.True(t, exempt != (len(runs[path]) > 0),
			"command %q: run it here, or say in noReleaseSecrets why it holds no Secret (not both)", path)
	}

	f := newReleaseFakes()
	build := f.commands()
	build["history"] = newHistoryCommand
	build["list"] = newListCommand
	order := []string{"deploy", "diff", "status", "history", "list", "wait", "test", "get values", "get manifest",
		"get hooks", "get notes", "rollback", "uninstall"}
	require.ElementsMatch(t, order, keys(runs))
	printed := 0
	for _, path := range order {
		for _, r := range runs[path] {
			f.waiter.Script = nil
			if r.leak {
				f.waiter.Script = leak
			}
			stdout, stderr, code := runRecordCommand(t, f.factory(), build[r.args[0]], r.args...)
			name := strings.Join(r.args, " ")
			require.NotEqual(t, 2, code, "%s: %s", name, stderr)
			out := stdout + stderr
			printed += len(out)
			for _, v := range []string{token, token[:12], b64, other} {
				assert.NotContains(t, out, v, "%s (exit %d)", name, code)
			}
		}
	}
	assert.Greater(t, printed, 10000, "the commands printed their output")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestFailingPostRendererWithholdsSecrets: a post-renderer that fails
// echoing its input (the rendered Secret among it) on stderr, or prints
// it back as what is not YAML, is quoted in the command's error, and the
// token still reaches no output: the render teaches the one redaction the
// Secrets first, whichever command ran it (exit 2, nothing applied).
func TestFailingPostRendererWithholdsSecrets(t *testing.T) {
	const token = "hf_Q7zX31kLm9_5517"
	chart := "../../testdata/charts/diffdemo"
	dir := t.TempDir()
	scripts := map[string]string{
		// The Secret's data, in the last lines of stderr.
		"echoes-stderr": "grep -A1 '^data:' >&2; exit 3",
		// The decoded token, alone on stderr.
		"echoes-decoded": "grep '^  token:' | tr -d ' \"' | cut -d: -f2 | base64 -d >&2; exit 3",
	}
	f := newReleaseFakes()
	build := f.commands()
	build["template"] = newTemplateCommand
	for name, body := range scripts {
		path := filepath.Join(dir, name+".sh")
		require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
		for _, args := range [][]string{
			{"deploy", "chat", chart, "--skip-preflight"},
			{"diff", "chat", chart},
			{"template", "chat", chart},
		} {
			args := append(slices.Clone(args), "--set", "secret.token="+token, "--post-renderer", path)
			t.Run(name+" "+args[0], func(t *testing.T) {
				stdout, stderr, code := runRecordCommand(t, f.factory(), build[args[0]], args...)
				assert.Equal(t, 2, code, "stderr: %s", stderr)
				assert.Contains(t, stderr, "post-renderer "+path)
				assert.NotContains(t, stdout+stderr, token)
				assert.NotContains(t, stdout+stderr, base64.StdEncoding.EncodeToString([]byte(token)))
			})
		}
	}
	recs, err := f.store.List(context.Background(), "chat")
	require.NoError(t, err)
	assert.Empty(t, recs, "nothing recorded")
}
