package release_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/storage"
)

// TestRollbackAnalysis: rollback --analysis bakes the restored pods once
// they serve; the report is in the result and the rollback's record, and
// an analysis that refuses fails the rollback revision (exit 4, no
// further rollback). The fakes reach no pod: the analysis is
// inconclusive, and its policy decides.
func TestRollbackAnalysis(t *testing.T) {
	spec := func(policy string) *analysis.Config {
		s, err := analysis.Parse([]byte("interval: 1s\ncount: 1\ninconclusive: "+policy+"\npresets: {errorRatio: {}}\n"), "bake.yaml")
		require.NoError(t, err)
		cfg, err := s.Validate("bake.yaml", false)
		require.NoError(t, err)
		return cfg
	}
	f := newEngFixture(t)
	threeRevisions(t, f)
	ctx := context.Background()

	res, err := f.engine.Rollback(ctx, release.RollbackOptions{Name: engRelease, ToRevision: 1,
		Timeout: time.Minute, Analysis: spec(analysis.InconclusivePass)})
	require.NoError(t, err)
	require.NotNil(t, res.Analysis, "the bake's report is the result's")
	assert.Equal(t, storage.AnalysisInconclusive, res.Analysis.Outcome)
	require.NotNil(t, f.record(t, 4).Analysis, "and the rollback's record's")
	assert.Equal(t, storage.StatusDeployed, f.record(t, 4).Status)

	res, err = f.engine.Rollback(ctx, release.RollbackOptions{Name: engRelease, ToRevision: 2,
		Timeout: time.Minute, Analysis: spec(analysis.InconclusiveFail)})
	require.Error(t, err)
	assert.Equal(t, exitcode.Failed, exitcode.Of(err))
	require.NotNil(t, res.Failure)
	assert.Equal(t, rollout.VerdictAnalysisInconclusive, res.Failure.Verdict)
	rec := f.record(t, 5)
	assert.Equal(t, storage.StatusFailed, rec.Status)
	assert.Contains(t, rec.Description, "Rollback to 2 failed: AnalysisInconclusive")
	require.NotNil(t, rec.Analysis)

	// Without --analysis nothing is baked.
	res, err = f.engine.Rollback(ctx, release.RollbackOptions{Name: engRelease, ToRevision: 1, Timeout: time.Minute})
	require.NoError(t, err)
	assert.Nil(t, res.Analysis)
}
