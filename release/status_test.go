package release_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

func TestStatus(t *testing.T) {
	ctx := context.Background()
	f := newEngFixture(t)
	r1 := f.deploy(t, baseSpec())
	s := baseSpec()
	s.image = "v2"
	r2 := f.deploy(t, s)
	_, err := f.cluster.Prune(ctx, s.objects()[:1], nil, cluster.PruneOptions{Release: engRelease, Namespace: engNS})
	require.NoError(t, err)

	rep, err := f.engine.Status(ctx, engRelease)
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Revision)
	assert.Equal(t, storage.StatusDeployed, rep.Status)
	assert.Equal(t, "Upgrade complete", rep.Description)
	assert.Equal(t, r2.ReplicaSets, rep.RecordedReplicaSets)
	got := map[string]string{}
	for _, o := range rep.Objects {
		got[o.Object.String()] = o.Status
	}
	assert.Equal(t, map[string]string{
		"v1 ConfigMap ml/chat-config": release.LiveNotFound,
		"v1 Service ml/chat":          "Current",
		"apps/v1 Deployment ml/chat":  "Current",
	}, got)
	require.Len(t, rep.ReplicaSets, 1, "the old ReplicaSet has no replicas")
	assert.Equal(t, r2.ReplicaSets[0], rep.ReplicaSets[0].ReplicaSetRef)
	assert.True(t, rep.ReplicaSets[0].Current)
	assert.Equal(t, int32(1), rep.ReplicaSets[0].ReadyReplicas)
	assert.NotEqual(t, r1.ReplicaSets[0].Name, rep.ReplicaSets[0].Name)

	_, err = f.engine.Status(ctx, "nope")
	assert.Equal(t, 2, exitCode(err))
}
