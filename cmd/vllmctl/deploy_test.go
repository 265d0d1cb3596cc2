package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// releaseFakes is a fake cluster, an in-memory record store shared by all
// namespaces, a scripted waiter and a fixed clock, for the commands that
// change releases.
type releaseFakes struct {
	cluster *releasetest.Cluster
	store   *storage.Memory
	waiter  *releasetest.Waiter
	now     time.Time
}

func newReleaseFakes() *releaseFakes {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	return &releaseFakes{
		cluster: releasetest.NewCluster(),
		store:   storage.NewMemory(""),
		waiter:  &releasetest.Waiter{Now: func() time.Time { return now }},
		now:     now,
	}
}

// engine is the release engine of the fakes in namespace ns.
func (f *releaseFakes) engine(ns string) (*release.Engine, error) {
	return f.cluster.Engine(f.store.InNamespace(ns), f.waiter, releasetest.ClockFunc(func() time.Time { return f.now })), nil
}

// factory is the Factory of the fakes.
func (f *releaseFakes) factory() Factory {
	return fakeFactory{engine: f.engine, client: f.cluster.Client}
}

// commands builds each release command.
func (f *releaseFakes) commands() map[string]func(g *GlobalOptions) *cobra.Command {
	return map[string]func(g *GlobalOptions) *cobra.Command{
		"deploy":   newDeployCommand,
		"rollback": newRollbackCommand,
		"status": func(g *GlobalOptions) *cobra.Command {
			return statusCommand(&statusOptions{g: g, loc: time.UTC})
		},
		"uninstall": newUninstallCommand,
		"get":       newGetCommand,
		"test":      newTestCommand,
		"wait":      newWaitCommand,
		"diff": func(g *GlobalOptions) *cobra.Command {
			no := false
			return diffCommand(&diffOptions{g: g, color: &no})
		},
	}
}

// run runs `vllmctl args...` (args[0] is the command) on the fakes.
func (f *releaseFakes) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runRecordCommand(t, f.factory(), f.commands()[args[0]], args...)
}

// small are the values that keep the built-in chart small. The capacity
// preflight runs on the fake cluster's GPU node.
var small = []string{"--set", "resources.gpu=0", "--set", "shm.enabled=false"}

func deployArgs(extra ...string) []string {
	return append(append([]string{"deploy", "chat"}, small...), extra...)
}

func TestDeployCommand(t *testing.T) {
	f := newReleaseFakes()

	stdout, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assertGolden(t, "deploy_table.golden", stdout)
	assertGolden(t, "deploy_progress.golden", stderr)

	stdout, stderr, code = f.run(t, deployArgs("--set", "image.tag=v0.11.1", "-o", "json")...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assertGolden(t, "deploy_json.golden", stdout)
	var doc map[string]any
	dec := json.NewDecoder(strings.NewReader(stdout))
	require.NoError(t, dec.Decode(&doc))
	assert.False(t, dec.More(), "exactly one JSON document")
	for _, k := range []string{"release", "namespace", "revision", "status", "chart", "appVersion", "replicaSets", "durationSeconds"} {
		assert.Contains(t, doc, k)
	}

	stdout, _, code = f.run(t, deployArgs("--set", "image.tag=v0.11.2", "-o", "yaml", "--progress", "json")...)
	require.Equal(t, 0, code)
	assertGolden(t, "deploy_yaml.golden", stdout)

	stdout, stderr, code = f.run(t, deployArgs("--set", "image.tag=v0.12.0", "--dry-run")...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assertGolden(t, "deploy_dryrun_table.golden", stdout)

	f.waiter.Script = releasetest.FailKind("Deployment", wait.OutcomeFailed, "Progress deadline exceeded")
	stdout, stderr, code = f.run(t, deployArgs("--set", "image.tag=crash", "--no-rollback")...)
	assert.Equal(t, 4, code)
	assertGolden(t, "deploy_failed_table.golden", stdout)
	assert.Contains(t, stderr, "Error: release chat revision 4: rollout failed")

	entries, err := f.store.InNamespace("ml").List(context.Background(), "chat")
	require.NoError(t, err)
	var statuses []storage.Status
	for _, e := range entries {
		statuses = append(statuses, e.Status)
	}
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusDeployed, storage.StatusFailed}, statuses)
}

func TestDeployCommandProgressJSON(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs("--progress", "json")...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	require.NotEmpty(t, lines)
	phases := map[string]bool{}
	for _, l := range lines {
		var ev release.ProgressEvent
		require.NoError(t, json.Unmarshal([]byte(l), &ev), "line %q", l)
		assert.Equal(t, "chat", ev.Release)
		phases[string(ev.Phase)] = true
	}
	for _, p := range []string{"lock", "apply", "replicaset", "wait", "done"} {
		assert.True(t, phases[p], "phase %s", p)
	}
}

func TestDeployCommandRefuses(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"invalid release name", []string{"deploy", "Chat_1"}, 2, `release name: "Chat_1" is invalid`},
		{"unknown chart", []string{"deploy", "chat", "./no-such-chart"}, 2, "no-such-chart"},
		{"bad values", deployArgs("--set", "resources.gpu=many"), 2, "resources.gpu"},
		{"bad output", deployArgs("-o", "wide"), 2, `--output "wide": want table, json or yaml`},
		{"bad progress", deployArgs("--progress", "fancy"), 2, `--progress "fancy"`},
		{"bad max surge", deployArgs("--max-surge", "lots"), 2, `invalid --max-surge "lots"`},
		{"max unavailable over 100%, grouped release", deployArgs("--set", "multiNode.nodes=2", "--max-unavailable", "101%"), 2,
			`invalid --max-unavailable "101%": a percentage may not be more than 100%`},
		{"negative max unavailable percentage", deployArgs("--max-unavailable", "-5%"), 2, `invalid --max-unavailable "-5%"`},
		{"bad timeout", deployArgs("--timeout", "0s"), 2, "--timeout 0s: must be positive"},
		{"negative history max", deployArgs("--history-max", "-1"), 2, "--history-max -1"},
		{"contradicting rollback flags", deployArgs("--rollback-on-failure", "--no-rollback"), 2, "contradict"},
		{"no release", []string{"deploy"}, 2, "accepts between 1 and 2 arg(s), received 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newReleaseFakes()
			stdout, stderr, code := f.run(t, tt.args...)
			assert.Equal(t, tt.wantCode, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, tt.wantStderr)
			assert.Empty(t, stdout)
			assert.Empty(t, f.cluster.Refs(), "nothing applied")
			all, err := f.store.ListAll(context.Background(), "")
			require.NoError(t, err)
			assert.Empty(t, all, "nothing recorded")
		})
	}
}

func TestDeployCommandLocked(t *testing.T) {
	f := newReleaseFakes()
	_, err := storage.Acquire(context.Background(), f.store.InNamespace("ml"), "chat", storage.OpDeploy,
		storage.LockOptions{Holder: "bob@ci pid 7", Clock: releasetest.ClockFunc(func() time.Time { return f.now })})
	require.NoError(t, err)
	stdout, stderr, code := f.run(t, deployArgs()...)
	assert.Equal(t, 5, code)
	assert.Empty(t, stdout)
	assert.True(t, strings.HasSuffix(stderr, "\nError: release chat in namespace ml is locked by another operation: revision 1 is pending-install "+
		"(Install in progress), held by bob@ci pid 7 for 0s; it is taken over once watched unrenewed for its lease of 2m0s, or now with --force-unlock\n"),
		"the preflight's report, then the lock's error: %s", stderr)

	_, stderr, code = f.run(t, deployArgs("--force-unlock")...)
	assert.Equal(t, 0, code, "stderr: %s", stderr)
}

func TestRollbackCommand(t *testing.T) {
	f := newReleaseFakes()
	for _, tag := range []string{"v0.10.0", "v0.11.0", "v0.11.1"} {
		_, stderr, code := f.run(t, deployArgs("--set", "image.tag="+tag)...)
		require.Equal(t, 0, code, "stderr: %s", stderr)
	}

	stdout, stderr, code := f.run(t, "rollback", "chat", "--to-revision", "1")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assertGolden(t, "rollback_table.golden", stdout)
	assertGolden(t, "rollback_progress.golden", stderr)

	stdout, stderr, code = f.run(t, "rollback", "chat", "-o", "json")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assertGolden(t, "rollback_json.golden", stdout)

	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"unknown revision", []string{"rollback", "chat", "--to-revision", "9"}, "Error: revision 9 of release chat not found; revisions: 1, 2, 3, 4, 5\n"},
		{"unknown release", []string{"rollback", "nope"}, "Error: release nope not found in namespace ml\n"},
		{"negative revision", []string{"rollback", "chat", "--to-revision", "-2"}, "Error: --to-revision -2: must be 1 or more"},
		{"invalid release name", []string{"rollback", "Chat_1"}, `Error: invalid release name "Chat_1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := f.run(t, tt.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tt.wantStderr)
		})
	}
}

func TestStatusCommand(t *testing.T) {
	f := newReleaseFakes()
	for _, tag := range []string{"v0.10.0", "v0.11.0"} {
		_, stderr, code := f.run(t, deployArgs("--set", "image.tag="+tag)...)
		require.Equal(t, 0, code, "stderr: %s", stderr)
	}
	stdout, stderr, code := f.run(t, "status", "chat")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assertGolden(t, "status_table.golden", stdout)
	stdout, _, code = f.run(t, "status", "chat", "-o", "json")
	require.Equal(t, 0, code)
	assertGolden(t, "status_json.golden", stdout)

	_, stderr, code = f.run(t, "status", "nope")
	assert.Equal(t, 2, code)
	assert.Equal(t, "Error: release nope not found in namespace ml\n", stderr)
}

func TestUninstallCommand(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	stdout, stderr, code := f.run(t, "uninstall", "chat", "--keep-history")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assertGolden(t, "uninstall_keep_table.golden", stdout)
	assert.Empty(t, f.cluster.Refs())

	stdout, stderr, code = f.run(t, "uninstall", "chat", "-o", "json")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assertGolden(t, "uninstall_json.golden", stdout)
	all, err := f.store.ListAll(context.Background(), "")
	require.NoError(t, err)
	assert.Empty(t, all)

	_, stderr, code = f.run(t, "uninstall", "chat")
	assert.Equal(t, 2, code)
	assert.Equal(t, "Error: release chat not found in namespace ml\n", stderr)
}

func TestDeployCommandDiff(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	stdout, stderr, code := f.run(t, deployArgs("--set", "image.tag=v0.11.1", "--diff", "--progress", "json")...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stderr, "~ apps/v1 Deployment ml/chat")
	assert.Contains(t, stderr, "+        image: vllm/vllm-openai:v0.11.1")
	assert.NotContains(t, stdout, "apps/v1 Deployment", "the diff goes to stderr, the result to stdout")
	assert.Contains(t, stdout, "REVISION: 2")
}

// TestDeployCommandDryRunDiff: `deploy --dry-run --diff` (deploy --help's
// example) prints what would change, and records nothing.
func TestDeployCommandDryRunDiff(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	_, stderr, code = f.run(t, deployArgs("--set", "image.tag=v0.11.1", "--dry-run", "--diff", "--progress", "plain")...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Contains(t, stderr, "~ apps/v1 Deployment ml/chat")
	assert.Contains(t, stderr, "+        image: vllm/vllm-openai:v0.11.1")
	all, err := f.store.ListAll(context.Background(), "")
	require.NoError(t, err)
	assert.Len(t, all, 1, "nothing recorded")
}
