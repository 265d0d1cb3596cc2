package storage

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRewritingDoesNotStack: wrapping a Rewriting store again replaces its
// rule, so a store wrapped by every operation still rewrites once.
func TestRewritingDoesNotStack(t *testing.T) {
	ctx := context.Background()
	mem := NewMemory("ml")
	calls := 0
	upper := func(r *Release) *Release {
		calls++
		c := *r
		c.Description = strings.ToUpper(c.Description)
		return &c
	}
	s := Rewriting(Rewriting(mem, upper), upper)
	inner, ok := s.(*rewritingStore)
	require.True(t, ok)
	_, twice := inner.Store.(*rewritingStore)
	require.False(t, twice, "one wrapper")

	rec := sampleRecord(t, "chat", 1, StatusDeployed)
	rec.Description = "install complete"
	require.NoError(t, s.Create(ctx, rec))
	require.Equal(t, 1, calls)
	require.Equal(t, "install complete", rec.Description, "the caller's record is left as it is")
	got, err := mem.Get(ctx, "chat", 1)
	require.NoError(t, err)
	require.Equal(t, "INSTALL COMPLETE", got.Description)

	rec.Description = "upgraded"
	require.NoError(t, s.Update(ctx, rec), "the caller's record carries the stored copy's token")
	got, err = mem.Get(ctx, "chat", 1)
	require.NoError(t, err)
	require.Equal(t, "UPGRADED", got.Description)
}
