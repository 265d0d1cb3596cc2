package release_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/release"
)

// TestPostRendererOnlyChangeIsANewRevision: the record keeps the
// post-renderer the manifest went through (path and args), so a change to
// it alone, one whose output is the same objects, is a new revision that
// records it, and diff reports it (~ post-renderer postRenderer); the same
// post-renderer stays up to date.
func TestPostRendererOnlyChangeIsANewRevision(t *testing.T) {
	same := filepath.Join(t.TempDir(), "same.sh")
	require.NoError(t, os.WriteFile(same, []byte("#!/bin/sh\ncat\n"), 0o755))
	pr := func(args ...string) *charts.PostRenderer { return &charts.PostRenderer{Path: same, Args: args} }
	with := func(p *charts.PostRenderer) release.DeployOptions {
		opts := leanHooks(baseSpec().options()) // objects the fake's dry run leaves as they are live
		opts.Render.Options.PostRenderer = p
		return opts
	}
	for _, tc := range []struct {
		name        string
		first, next *charts.PostRenderer
		action      diff.Action
		shown       string
	}{
		{"added", nil, pr("a"), diff.ActionCreate, "+" + same + " a"},
		{"its args changed", pr("a"), pr("b"), diff.ActionChange, "+" + same + " b"},
		{"removed", pr("a"), nil, diff.ActionPrune, "-" + same + " a"},
		{"the same", pr("a"), pr("a"), "", ""},
		{"none either time", nil, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEngFixture(t)
			ctx := context.Background()
			_, err := f.engine.Deploy(ctx, with(tc.first))
			require.NoError(t, err)
			next := with(tc.next)

			rep, err := f.engine.Diff(ctx, release.DiffOptions{Name: engRelease, Render: next.Render})
			require.NoError(t, err)
			var text strings.Builder
			require.NoError(t, rep.WriteText(&text, false))
			res, err := f.engine.Deploy(ctx, next)
			require.NoError(t, err)
			if tc.action == "" {
				assert.True(t, rep.Empty(), "diff: no changes:\n%s", text.String())
				assert.Equal(t, 1, res.Revision)
				assert.True(t, res.UpToDate)
				return
			}
			require.Len(t, rep.Recorded, 1, "%s", text.String())
			assert.Equal(t, diff.RecordedPostRenderer, rep.Recorded[0].What)
			assert.Equal(t, "postRenderer", rep.Recorded[0].Name)
			assert.Equal(t, tc.action, rep.Recorded[0].Action)
			assert.Contains(t, text.String(), tc.action.Symbol()+" post-renderer postRenderer\n")
			assert.Contains(t, rep.Recorded[0].Diff, tc.shown)
			assert.Equal(t, 2, res.Revision, "a new revision")
			assert.False(t, res.UpToDate)
			assert.Equal(t, tc.next, f.record(t, 2).PostRenderer, "the record keeps the post-renderer it went through")
		})
	}
}
