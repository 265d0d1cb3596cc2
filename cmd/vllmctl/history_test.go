package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/release/storage"
)

// updateGolden reports whether -update was given: golden files are then
// rewritten instead of compared. The flag may be registered by another test
// file of this package; it is registered here only if not.
var updateGolden = registerUpdateFlag()

func registerUpdateFlag() func() bool {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files under testdata/cli")
	}
	return func() bool {
		f := flag.Lookup("update")
		v, _ := strconv.ParseBool(f.Value.String())
		return v
	}
}

// assertGolden compares got with testdata/cli/<name>, or rewrites it under
// -update.
func assertGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "cli", name)
	if updateGolden() {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test ./cmd/vllmctl -run %s -update", t.Name())
	assert.Equal(t, string(want), got, "golden file %s (rerun with -update to rewrite)", path)
}

// recordBackends are the stores the record commands are tested with.
func recordBackends() []struct {
	name string
	// open returns a fresh store factory; all namespaces share the cluster.
	open func() func(ns string) storage.Store
} {
	return []struct {
		name string
		open func() func(ns string) storage.Store
	}{
		{"memory", func() func(string) storage.Store {
			m := storage.NewMemory("")
			return func(ns string) storage.Store { return m.InNamespace(ns) }
		}},
		{"secrets", func() func(string) storage.Store {
			cs := fake.NewClientset()
			return func(ns string) storage.Store { return storage.NewSecrets(cs, ns) }
		}},
	}
}

// seedRecords writes the history of a few releases through the release
// engine, with a fixed clock:
//
//	ml/chat:  1 superseded (install), 2 superseded, 3 failed, 4 deployed (rollback to 2)
//	ml/embed: 1 pending-install
//	dev/chat: 1 deployed
func seedRecords(t *testing.T, open func(ns string) storage.Store) {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clk := releasetest.ClockFunc(func() time.Time { return now })
	tick := func(d time.Duration) { now = now.Add(d) }
	chart := func(version, app string) *storage.Release {
		return &storage.Release{Chart: storage.Chart{Name: "vllm", Version: version, AppVersion: app},
			Values: map[string]any{"image": map[string]any{"tag": app}}, Manifest: "kind: Deployment\n"}
	}
	rs := func(hash string, rev int64) []storage.ReplicaSetRef {
		return []storage.ReplicaSetRef{{Deployment: "chat-vllm", Name: "chat-vllm-" + hash, PodTemplateHash: hash, Revision: rev}}
	}
	lock := func(s storage.Store, name string, op storage.Operation, tmpl *storage.Release) *storage.Release {
		r, err := storage.Acquire(ctx, s, name, op, storage.LockOptions{Holder: "alice@laptop pid 42", Clock: clk, Timeout: 10 * time.Minute, Record: tmpl})
		require.NoError(t, err)
		return r
	}

	ml := open("ml")
	r := lock(ml, "chat", storage.OpDeploy, chart("0.3.0", "v0.10.1"))
	tick(90 * time.Second)
	r.ReplicaSets = rs("7c9d8f6b5", 1)
	require.NoError(t, storage.MarkDeployed(ctx, ml, r, clk, "Install complete"))

	tick(time.Hour)
	r = lock(ml, "chat", storage.OpDeploy, chart("0.3.1", "v0.11.0"))
	tick(2 * time.Minute)
	r.ReplicaSets = rs("5f4b8c7d9", 2)
	require.NoError(t, storage.MarkDeployed(ctx, ml, r, clk, "Upgrade complete"))

	tick(24 * time.Hour)
	r = lock(ml, "chat", storage.OpDeploy, chart("0.3.1", "v0.11.1-crash"))
	tick(5 * time.Minute)
	r.ReplicaSets = rs("6d5e9a8c4", 3)
	held := r
	require.NoError(t, storage.MarkFailed(ctx, ml, r, clk, "Upgrade failed: container vllm\tCrashLoopBackOff\n(exit code 1)",
		&rollout.Diagnosis{Reason: "CrashLoopBackOff", Object: "Deployment/chat-vllm", Pod: "chat-vllm-6d5e9a8c4-x7k2p",
			Container: "vllm", ExitCode: 1, RestartCount: 3, Message: "back-off restarting failed container",
			Events: []string{"Back-off restarting failed container vllm"}, LogTail: []string{"ValueError: unknown model"}}))

	rb := chart("0.3.1", "v0.11.0")
	rb.RollbackOf = 2
	r, err := storage.Acquire(ctx, ml, "chat", storage.OpRollback, storage.LockOptions{Holder: "alice@laptop pid 42", Clock: clk, Held: held, Record: rb})
	require.NoError(t, err)
	tick(40 * time.Second)
	r.ReplicaSets = rs("5f4b8c7d9", 4)
	require.NoError(t, storage.MarkDeployed(ctx, ml, r, clk, "Rollback to 2"))

	tick(time.Minute)
	lock(ml, "embed", storage.OpDeploy, &storage.Release{Chart: storage.Chart{Name: "vllm", Version: "0.3.1", AppVersion: "v0.11.0"}})

	dev := open("dev")
	tick(time.Minute)
	r = lock(dev, "chat", storage.OpDeploy, chart("0.4.0-rc.1", "v0.12.0"))
	r.ReplicaSets = []storage.ReplicaSetRef{
		{Deployment: "chat-vllm", Name: "chat-vllm-8b7c6d5e4", PodTemplateHash: "8b7c6d5e4", Revision: 1},
		{Deployment: "chat-router", Name: "chat-router-4c3b2a1f9", PodTemplateHash: "4c3b2a1f9", Revision: 1},
	}
	require.NoError(t, storage.MarkDeployed(ctx, dev, r, clk, "Install complete"))
}

// runRecordCommand runs one command built by build under a root carrying
// the kubectl flags, as NewRootCommand does, with a kubeconfig whose
// context namespace is "ml" and factory in place of the cluster's. It
// returns stdout, stderr and the exit code.
func runRecordCommand(t *testing.T, factory Factory, build func(g *GlobalOptions) *cobra.Command, args ...string) (string, string, int) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: test
  user: {token: test}
contexts:
- name: test
  context: {cluster: test, user: test, namespace: ml}
current-context: test
`), 0o600))
	var stdout, stderr bytes.Buffer
	g := newGlobalOptions(genericclioptions.NewConfigFlags(true),
		genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr})
	g.Factory = factory
	root := &cobra.Command{Use: "vllmctl", SilenceUsage: true, SilenceErrors: true}
	root.SetOut(g.Streams.Out)
	root.SetErr(g.Streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	g.ConfigFlags.AddFlags(root.PersistentFlags())
	sub := build(g)
	wrapArgs(sub)
	root.AddCommand(sub)
	root.SetArgs(append(args, "--kubeconfig", kubeconfig))
	err := root.ExecuteContext(context.Background())
	code := ExitCode(g.Streams.ErrOut, err)
	require.NoError(t, FlushStreams(root))
	return stdout.String(), stderr.String(), code
}

func TestHistoryCommand(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		golden     string // stdout golden file; "" expects no stdout
		wantCode   int
		wantStderr string
	}{
		{name: "table", args: []string{"history", "chat"}, golden: "history_table.golden"},
		{name: "json", args: []string{"history", "chat", "-o", "json"}, golden: "history_json.golden"},
		{name: "yaml", args: []string{"history", "chat", "--output=yaml"}, golden: "history_yaml.golden"},
		{name: "pending release", args: []string{"history", "embed"}, golden: "history_pending_table.golden"},
		{name: "other namespace", args: []string{"history", "chat", "-n", "dev"}, golden: "history_dev_table.golden"},
		{name: "unknown release", args: []string{"history", "nope"}, wantCode: 2,
			wantStderr: "Error: release nope not found in namespace ml\n"},
		{name: "unknown release in namespace", args: []string{"history", "embed", "-n", "dev"}, wantCode: 2,
			wantStderr: "Error: release embed not found in namespace dev\n"},
		{name: "invalid release name", args: []string{"history", "Chat_1"}, wantCode: 2,
			wantStderr: "Error: invalid release name \"Chat_1\""},
		{name: "bad output", args: []string{"history", "chat", "-o", "wide"}, wantCode: 2,
			wantStderr: "Error: --output \"wide\": want table, json or yaml\n"},
		{name: "no release", args: []string{"history"}, wantCode: 2, wantStderr: "Error: accepts 1 arg(s), received 0\n"},
	}
	for _, be := range recordBackends() {
		t.Run(be.name, func(t *testing.T) {
			open := be.open()
			seedRecords(t, open)
			build := func(g *GlobalOptions) *cobra.Command {
				return historyCommand(&historyOptions{g: g, loc: time.UTC})
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					stdout, stderr, code := runRecordCommand(t, storeFactory(open), build, tt.args...)
					assert.Equal(t, tt.wantCode, code, "stderr: %s", stderr)
					if tt.wantStderr != "" {
						assert.Contains(t, stderr, tt.wantStderr)
					} else {
						assert.Empty(t, stderr)
					}
					if tt.golden == "" {
						assert.Empty(t, stdout)
						return
					}
					assertGolden(t, tt.golden, stdout)
				})
			}
		})
	}
}

func TestHistoryJSONIsOneDocument(t *testing.T) {
	open := recordBackends()[0].open()
	seedRecords(t, open)
	stdout, _, code := runRecordCommand(t, storeFactory(open), newHistoryCommand, "history", "chat", "-o", "json")
	require.Equal(t, 0, code)
	var rows []map[string]any
	dec := json.NewDecoder(strings.NewReader(stdout))
	require.NoError(t, dec.Decode(&rows))
	assert.False(t, dec.More(), "exactly one JSON document")
	require.Len(t, rows, 4)
	assert.Equal(t, "deployed", rows[3]["status"])
	assert.Equal(t, float64(2), rows[3]["rollbackOf"])
	assert.Equal(t, "CrashLoopBackOff", rows[2]["failure"].(map[string]any)["reason"])
}

func TestReplicaSetsCell(t *testing.T) {
	tests := []struct {
		name string
		refs []storage.ReplicaSetRef
		want string
	}{
		{"none", nil, "<none>"},
		{"one", []storage.ReplicaSetRef{{Name: "chat-vllm-abc", PodTemplateHash: "abc", Revision: 3}}, "chat-vllm-abc(abc, rev 3)"},
		{"two", []storage.ReplicaSetRef{{Name: "a-1", PodTemplateHash: "1", Revision: 1}, {Name: "b-2", PodTemplateHash: "2", Revision: 7}},
			"a-1(1, rev 1), b-2(2, rev 7)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, replicaSetsCell(tt.refs))
		})
	}
}
