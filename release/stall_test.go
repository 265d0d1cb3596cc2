package release_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/storage"
)

// stallBudget is the engine's controller stall budget in these tests: the
// fake controller never acts on the stalled generation, so the budget's
// timer decides alone.
const stallBudget = 50 * time.Millisecond

// TestDeployControllerStalledInstall: an install whose Deployment its
// controller never observes fails early with verdict ControllerStalled
// (not after --timeout), naming the Deployment and the controller: exit 4,
// revision 1 failed.
func TestDeployControllerStalledInstall(t *testing.T) {
	f := newEngFixture(t)
	f.engine.ControllerStallTimeout = stallBudget
	f.cluster.Stalled = func(string, int64) bool { return true }
	opts := baseSpec().options()
	opts.Timeout = time.Hour
	res, err := f.engine.Deploy(context.Background(), opts)
	require.Error(t, err)
	assert.Equal(t, 4, exitCode(err), "%v", err)
	require.NotNil(t, res)
	require.NotNil(t, res.Failure)
	assert.Equal(t, rollout.VerdictControllerStalled, res.Failure.Verdict)
	assert.Equal(t, "deployment/chat", res.Failure.Object)
	assert.Contains(t, res.Failure.Message, "Deployment "+engNS+"/chat: its controller has not observed generation 1")
	assert.Contains(t, err.Error(), "is kube-controller-manager running?")
	assert.NotContains(t, err.Error(), "context deadline exceeded")
	assert.Equal(t, map[int]storage.Status{1: storage.StatusFailed}, f.statuses(t))
	assert.Contains(t, f.record(t, 1).Description, "ControllerStalled")
}

// TestDeployControllerStalledUpgradeRollsBack: an upgrade whose new
// generation its controller does not observe fails with ControllerStalled
// and is rolled back to the revision that serves: exit 3.
func TestDeployControllerStalledUpgradeRollsBack(t *testing.T) {
	f := newEngFixture(t)
	f.engine.ControllerStallTimeout = stallBudget
	f.deploy(t, baseSpec())
	// The controller ignores generation 2 (the upgrade) and acts again on
	// the rollback's generation 3.
	f.cluster.Stalled = func(_ string, gen int64) bool { return gen == 2 }
	s := baseSpec()
	s.image = "vllm/vllm-openai:v0.11.0"
	opts := s.options()
	opts.Timeout = time.Hour
	opts.RollbackOnFailure = true
	res, err := f.engine.Deploy(context.Background(), opts)
	require.Error(t, err)
	assert.Equal(t, 3, exitCode(err), "%v", err)
	require.NotNil(t, res.Failure)
	assert.Equal(t, rollout.VerdictControllerStalled, res.Failure.Verdict)
	assert.Equal(t, 1, res.RolledBackTo)
	st := f.statuses(t)
	assert.Equal(t, storage.StatusFailed, st[2])
	assert.Equal(t, storage.StatusDeployed, st[3], "the rollback to 1 is deployed")
}
