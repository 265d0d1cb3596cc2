package storage

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSelect: the revision asked for, else the deployed one (the highest,
// should two be), else the last; a revision or release that does not
// exist is a *NotFoundError listing what exists.
func TestSelect(t *testing.T) {
	ctx := context.Background()
	s := NewMemory("ml")
	for _, r := range []*Release{
		sampleRecord(t, "web", 1, StatusSuperseded),
		sampleRecord(t, "web", 2, StatusDeployed),
		sampleRecord(t, "web", 3, StatusDeployed),
		sampleRecord(t, "web", 4, StatusFailed),
		sampleRecord(t, "api", 1, StatusFailed),
		sampleRecord(t, "api", 2, StatusFailed),
	} {
		require.NoError(t, s.Create(ctx, r))
	}
	for _, tc := range []struct {
		name     string
		release  string
		revision int
		want     int
	}{
		{"revision asked for", "web", 1, 1},
		{"a failed one too", "web", 4, 4},
		{"the deployed one, the highest", "web", 0, 3},
		{"none deployed: the last", "api", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := Select(ctx, s, tc.release, tc.revision)
			require.NoError(t, err)
			assert.Equal(t, tc.want, rec.Revision)
			assert.Equal(t, tc.release, rec.Name)
		})
	}
	_, err := Select(ctx, s, "web", 9)
	var nf *NotFoundError
	require.True(t, errors.As(err, &nf), "%v", err)
	assert.Equal(t, 9, nf.Revision)
	assert.Equal(t, []int{1, 2, 3, 4}, nf.Existing)
	_, err = Select(ctx, s, "gone", 0)
	require.True(t, errors.As(err, &nf), "%v", err)

	entries, err := s.List(ctx, "web")
	require.NoError(t, err)
	e, ok := DeployedAmong(entries)
	require.True(t, ok)
	assert.Equal(t, 3, e.Revision)
	_, ok = DeployedAmong(entries[:1])
	assert.False(t, ok)
	e, ok = RevisionAmong(entries, 2)
	require.True(t, ok)
	assert.Equal(t, StatusDeployed, e.Status)
	_, ok = RevisionAmong(entries, 5)
	assert.False(t, ok)
}
