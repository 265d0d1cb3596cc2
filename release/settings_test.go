package release_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/release"
)

// TestSettingOnlyChangeIsANewRevision: the values vllmctl reads back
// from a record (serveCheck, analysis: the settings of the checks that
// rollback, wait and test run later) render no object, yet a change to
// them alone is a new revision that records them, and diff reports it;
// the same settings, or a change to a value nothing reads, stay up to
// date.
func TestSettingOnlyChangeIsANewRevision(t *testing.T) {
	with := func(set ...string) release.DeployOptions {
		opts := leanHooks(baseSpec().options()) // objects the fake's dry run leaves as they are live
		opts.Render.Options.Set = set
		return opts
	}
	for _, tc := range []struct {
		name        string
		first, next []string
		changed     string
		action      diff.Action
	}{
		{"serve check timeout", []string{"serveCheck.enabled=false,serveCheck.timeout=30s"}, []string{"serveCheck.enabled=false,serveCheck.timeout=45s"},
			"serveCheck", diff.ActionChange},
		{"analysis added", nil, []string{"analysis.interval=10s"}, "analysis", diff.ActionCreate},
		{"analysis removed", []string{"analysis.interval=10s"}, nil, "analysis", diff.ActionPrune},
		{"same settings", []string{"analysis.interval=10s"}, []string{"analysis.interval=10s"}, "", ""},
		{"a value nothing reads", []string{"other=1"}, []string{"other=2"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEngFixture(t)
			ctx := context.Background()
			_, err := f.engine.Deploy(ctx, with(tc.first...))
			require.NoError(t, err)
			next := with(tc.next...)

			rep, err := f.engine.Diff(ctx, release.DiffOptions{Name: engRelease, Render: next.Render})
			require.NoError(t, err)
			var text strings.Builder
			require.NoError(t, rep.WriteText(&text, false))
			res, err := f.engine.Deploy(ctx, next)
			require.NoError(t, err)
			if tc.changed == "" {
				assert.True(t, rep.Empty(), "diff: no changes:\n%s", text.String())
				assert.Equal(t, 1, res.Revision)
				assert.True(t, res.UpToDate)
				return
			}
			require.Len(t, rep.Recorded, 1, "%s", text.String())
			assert.Equal(t, diff.RecordedValues, rep.Recorded[0].What)
			assert.Equal(t, tc.changed, rep.Recorded[0].Name)
			assert.Equal(t, tc.action, rep.Recorded[0].Action)
			assert.Contains(t, text.String(), tc.action.Symbol()+" values "+tc.changed+"\n")
			assert.Equal(t, 2, res.Revision, "a new revision")
			assert.False(t, res.UpToDate)
			rec := f.record(t, 2)
			if tc.next != nil {
				assert.Contains(t, rec.ComputedValues, tc.changed, "the record keeps the new settings")
			} else {
				assert.NotContains(t, rec.ComputedValues, tc.changed)
			}
		})
	}
}
