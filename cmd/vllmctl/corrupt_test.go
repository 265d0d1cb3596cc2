package main

import (
	"context"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/release/storage"
)

// TestCorruptRecord: one record Secret whose data is garbage never hides
// the other records or releases (list, history: exit 0, a warning naming
// the Secret); deploy and plain rollback refuse naming it with exit 6
// before writing any record; rollback to an intact revision works;
// history --repair marks it and deploys work again.
func TestCorruptRecord(t *testing.T) {
	f := newReleaseFakes()
	ctx := context.Background()
	secrets := func(ns string) storage.Store { return storage.NewSecrets(f.cluster.Client, ns) }
	engine := func(ns string) (*release.Engine, error) {
		return f.cluster.Engine(secrets(ns), f.waiter, releasetest.ClockFunc(func() time.Time { return f.now })), nil
	}
	factory := fakeFactory{engine: engine, store: secrets, client: f.cluster.Client}
	cmds := map[string]func(g *GlobalOptions) *cobra.Command{
		"deploy":   newDeployCommand,
		"rollback": newRollbackCommand,
		"history": func(g *GlobalOptions) *cobra.Command {
			return historyCommand(&historyOptions{g: g, loc: time.UTC})
		},
		"list": func(g *GlobalOptions) *cobra.Command {
			return listCommand(&listOptions{g: g, loc: time.UTC})
		},
	}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runRecordCommand(t, factory, cmds[args[0]], args...)
	}
	for _, extra := range [][]string{nil, {"--set", "image.tag=v0.11.1"}} {
		_, stderr, code := run(deployArgs(extra...)...)
		require.Equal(t, 0, code, stderr)
	}
	_, stderr, code := run(append([]string{"deploy", "other"}, small...)...)
	require.Equal(t, 0, code, stderr)

	// Corrupt revision 2 of chat.
	corrupt := func(rev int) {
		s, err := f.cluster.Client.CoreV1().Secrets("ml").Get(ctx, storage.SecretName("chat", rev), metav1.GetOptions{})
		require.NoError(t, err)
		s.Data["release"] = []byte("garbage, not gzip")
		_, err = f.cluster.Client.CoreV1().Secrets("ml").Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	secretName := storage.SecretName("chat", 2)
	corrupt(2)
	records := func() int {
		l, err := f.cluster.Client.CoreV1().Secrets("ml").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return len(l.Items)
	}
	before := records()

	stdout, stderr, code := run("list")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `chat\s+ml\s+2\s+unreadable`, stdout)
	assert.Regexp(t, `other\s+ml\s+1\s+deployed`, stdout, "the other release is listed")
	assert.Contains(t, stderr, "warning: release chat revision 2: record Secret ml/"+secretName+" is unreadable")

	stdout, stderr, code = run("history", "chat")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^1\s+.*superseded`, stdout)
	assert.Regexp(t, `(?m)^2\s+.*unreadable`, stdout)
	assert.Contains(t, stderr, secretName)

	_, stderr, code = run(deployArgs("--set", "image.tag=v0.12.0")...)
	assert.Equal(t, 6, code, stderr)
	assert.Contains(t, stderr, secretName)
	assert.Contains(t, stderr, "--repair")
	_, stderr, code = run("rollback", "chat")
	assert.Equal(t, 6, code, stderr)
	assert.Contains(t, stderr, secretName)
	assert.Equal(t, before, records(), "no record written")

	_, stderr, code = run("rollback", "chat", "--to-revision", "1")
	assert.Equal(t, 0, code, "an intact revision can be restored: %s", stderr)
	assert.Equal(t, before+1, records())

	stdout, _, _ = run("history", "chat")
	assert.Regexp(t, `(?m)^2\s+.*superseded\s+.*unreadable record superseded by revision 3`, stdout,
		"the rollback superseded the unreadable deployed record with a readable one")

	// history --repair marks an unreadable record.
	corrupt(1)
	_, stderr, code = run(deployArgs("--set", "image.tag=v0.12.0")...)
	assert.Equal(t, 6, code, stderr)
	_, stderr, code = run("history", "chat", "--repair")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "repaired revision 1")
	stdout, _, _ = run("history", "chat")
	assert.Regexp(t, `(?m)^1\s+.*superseded\s+.*unreadable record replaced by vllmctl history --repair`, stdout)
	_, stderr, code = run(deployArgs("--set", "image.tag=v0.12.0")...)
	assert.Equal(t, 0, code, "deploys work again: %s", stderr)
}
