package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/release/storage"
)

const soakManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: chat
  namespace: ml
spec:
  replicas: 1
  selector:
    matchLabels: {app: chat}
  template:
    metadata:
      labels: {app: chat}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.11.0
`

// TestReleaseTargetSoakBakesTheAnalysis: a soak's waits bake the
// deploy's analysis (Options.Analysis) with the verdicts of `vllmctl
// wait`, which reach the fleet's row; without one the soak only waits.
// The engine reaches no pod here: the analysis is inconclusive, which
// the spec's policy decides.
func TestReleaseTargetSoakBakesTheAnalysis(t *testing.T) {
	ctx := context.Background()
	store := storage.NewMemory("ml")
	require.NoError(t, store.Create(ctx, &storage.Release{Name: "chat", Namespace: "ml", Revision: 1, Status: storage.StatusDeployed,
		Chart: storage.Chart{Name: "c", Version: "1.0.0"}, Manifest: soakManifest, Description: "Install complete",
		ReplicaSets: []storage.ReplicaSetRef{{Deployment: "chat", Name: "chat-abc", PodTemplateHash: "abc", Revision: 1}}}))
	engine := releasetest.NewCluster().Engine(store, &releasetest.Waiter{}, nil)
	spec := func(policy string) *analysis.Config {
		s, err := analysis.Parse([]byte("interval: 1s\ncount: 1\ninconclusive: "+policy+"\npresets: {errorRatio: {}}\n"), "bake.yaml")
		require.NoError(t, err)
		cfg, err := s.Validate("bake.yaml", false)
		require.NoError(t, err)
		return cfg
	}

	target := &ReleaseTarget{Engine: engine, Options: release.DeployOptions{Name: "chat"}, SoakInterval: time.Millisecond}
	report, err := target.Soak(ctx, 10*time.Millisecond)
	require.NoError(t, err, "no analysis: the soak only waits")
	assert.Nil(t, report)

	target.Options.Analysis = spec(analysis.InconclusivePass)
	report, err = target.Soak(ctx, 10*time.Millisecond)
	require.NoError(t, err, "inconclusive: pass")
	require.NotNil(t, report, "the soak's analysis")
	assert.Equal(t, storage.AnalysisInconclusive, report.Outcome)

	target.Options.Analysis = spec(analysis.InconclusiveFail)
	report, err = target.Soak(ctx, 10*time.Millisecond)
	require.Error(t, err)
	require.NotNil(t, report, "the failing analysis comes with the error")
	assert.Equal(t, exitcode.Failed, exitcode.Of(err), "a soak never rolls back by itself")
	var re *release.RolloutError
	require.True(t, errors.As(err, &re), "%v", err)
	f := diagnosis(nil, err)
	require.NotNil(t, f)
	assert.Equal(t, rollout.VerdictAnalysisInconclusive, f.Verdict)
	assert.Contains(t, f.Message, "no way to reach the pods")
	var row TargetResult
	row.note("soak", f, err)
	assert.Equal(t, "AnalysisInconclusive", row.Verdict)
	assert.Equal(t, "AnalysisInconclusive", row.Reason)
	assert.Contains(t, row.Error, "soak of release chat in namespace ml")

	got, err := store.Get(ctx, "chat", 1)
	require.NoError(t, err)
	assert.Nil(t, got.Analysis, "a soak writes no record")
	assert.Equal(t, storage.StatusDeployed, got.Status)
}
