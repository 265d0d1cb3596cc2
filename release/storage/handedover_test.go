package storage

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// TestHandedOverReleaseIsNotLocked: once a release is handed over to Helm
// no operation takes its lock (exit 2, nothing written).
func TestHandedOverReleaseIsNotLocked(t *testing.T) {
	ctx := context.Background()
	s := NewMemory("llm")
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for rev, st := range map[int]Status{1: StatusSuperseded, 2: StatusHandedOver} {
		require.NoError(t, s.Create(ctx, &Release{Name: "chat", Revision: rev, Status: st, Created: now, Updated: now}))
	}
	_, err := Acquire(ctx, s, "chat", OpDeploy, LockOptions{Timeout: time.Minute})
	var ho *HandedOverError
	require.ErrorAs(t, err, &ho)
	assert.Equal(t, exitcode.Invalid, ho.ExitCode())
	assert.Equal(t, 2, ho.Revision)
	assert.Contains(t, err.Error(), "`vllmctl adopt chat` takes it back")
	entries, err := s.List(ctx, "chat")
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no pending record written")
}
