package release_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

func refStrings(refs []object.Ref) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.String()
	}
	return out
}

func TestUninstall(t *testing.T) {
	ctx := context.Background()
	f := newEngFixture(t)
	f.deploy(t, baseSpec())
	// A failed revision added chat-extra: it goes too.
	f.waiter.Script = releasetest.FailKind("Deployment", wait.OutcomeFailed, "CrashLoopBackOff")
	s := baseSpec()
	s.extra = true
	_, err := f.engine.Deploy(ctx, s.options())
	require.Error(t, err)
	f.cluster.Put(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "someone-else", "namespace": engNS},
	}})

	res, err := f.engine.Uninstall(ctx, release.UninstallOptions{Name: engRelease})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"apps/v1 Deployment ml/chat",
		"v1 Service ml/chat",
		"v1 ConfigMap ml/chat-extra",
		"v1 ConfigMap ml/chat-config",
	}, refStrings(res.Deleted), "reverse apply order")
	assert.Equal(t, []string{"v1 ConfigMap ml/someone-else"}, f.cluster.Refs(), "only the release's objects deleted")
	assert.Empty(t, f.statuses(t), "records deleted")
	assert.Equal(t, []int{1, 2, 3}, res.DeletedRecords)
	assert.Equal(t, storage.StatusUninstalled, res.Status)
	assert.False(t, res.KeptHistory)

	_, err = f.engine.Uninstall(ctx, release.UninstallOptions{Name: engRelease})
	assert.Equal(t, 2, exitCode(err))
	assert.Contains(t, err.Error(), "release chat not found in namespace ml")
}

func TestUninstallKeepHistory(t *testing.T) {
	ctx := context.Background()
	f := newEngFixture(t)
	f.deploy(t, baseSpec())
	res, err := f.engine.Uninstall(ctx, release.UninstallOptions{Name: engRelease, KeepHistory: true})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Revision)
	assert.Len(t, res.Deleted, 3)
	assert.Empty(t, f.cluster.Refs())
	assert.Equal(t, map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusUninstalled}, f.statuses(t))
	assert.Equal(t, "Uninstallation complete", f.record(t, 2).Description)

	again, err := f.engine.Uninstall(ctx, release.UninstallOptions{Name: engRelease, KeepHistory: true})
	require.NoError(t, err)
	assert.Equal(t, 2, again.Revision, "already uninstalled: nothing written")
	assert.Len(t, f.statuses(t), 2)

	// Deploying again is an install.
	r := f.deploy(t, baseSpec())
	assert.Equal(t, 3, r.Revision)
	assert.Equal(t, "Install complete", f.record(t, 3).Description)
	assert.Empty(t, r.Pruned)
}

func TestUninstallLocked(t *testing.T) {
	ctx := context.Background()
	f := newEngFixture(t)
	f.deploy(t, baseSpec())
	_, err := storage.Acquire(ctx, f.store, engRelease, storage.OpDeploy, storage.LockOptions{Holder: "bob"})
	require.NoError(t, err)
	_, err = f.engine.Uninstall(ctx, release.UninstallOptions{Name: engRelease})
	assert.Equal(t, 5, exitCode(err))
	assert.Len(t, f.cluster.Refs(), 3, "nothing deleted")
}
