package release_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// TestPreviousValuesPicksHelmsCurrentRelease: --reuse-values starts from
// the revision Helm 4's upgrade calls current: the deployed one; when none
// is deployed, the last one if it failed or was superseded (every
// revision failed); nothing on a first install or after an uninstall.
func TestPreviousValuesPicksHelmsCurrentRelease(t *testing.T) {
	type rev struct {
		status storage.Status
		tag    string
	}
	cases := []struct {
		name string
		revs []rev
		// want is the image tag reused ("" for none).
		want string
	}{
		{name: "deployed wins over a later failure", revs: []rev{{storage.StatusDeployed, "v1"}, {storage.StatusFailed, "v2"}}, want: "v1"},
		{name: "all failed: the last one", revs: []rev{{storage.StatusFailed, "v1"}, {storage.StatusFailed, "v2"}}, want: "v2"},
		{name: "last superseded, none deployed", revs: []rev{{storage.StatusFailed, "v1"}, {storage.StatusSuperseded, "v2"}}, want: "v2"},
		{name: "uninstalled: none", revs: []rev{{storage.StatusUninstalled, "v1"}}},
		{name: "first install: none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := storage.NewMemory("ml")
			ctx := context.Background()
			for i, r := range tc.revs {
				require.NoError(t, st.Create(ctx, &storage.Release{Name: "chat", Revision: i + 1, Status: r.status,
					Values: map[string]any{"image": map[string]any{"tag": r.tag}}}))
			}
			entries, err := st.List(ctx, "chat")
			if len(tc.revs) == 0 {
				entries, err = nil, nil
			}
			require.NoError(t, err)
			prev, err := release.PreviousValues(charts.RenderOptions{ReuseValues: true}, storage.PlanOf(entries), entries)
			require.NoError(t, err)
			if tc.want == "" {
				assert.Nil(t, prev)
				return
			}
			require.NotNil(t, prev)
			assert.Equal(t, tc.want, prev.User["image"].(map[string]any)["tag"])
		})
	}
}
