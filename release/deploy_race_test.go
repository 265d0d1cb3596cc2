package release_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// raceChart renders one ConfigMap carrying a value, and with revision
// .Release.Revision, IsUpgrade and the server version.
func raceChart(revision bool) *chart.Chart {
	data := `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  greeting: {{ .Values.greeting | quote }}
`
	if revision {
		data += `  revision: "{{ .Release.Revision }}"
  upgrade: "{{ .Release.IsUpgrade }}"
  kube: "{{ .Capabilities.KubeVersion.Version }}"
`
	}
	return &chart.Chart{
		Metadata:  &chart.Metadata{APIVersion: "v2", Name: "race", Version: "0.1.0", KubeVersion: ">=1.37.2-0"},
		Values:    map[string]any{"greeting": "hello"},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte(data)}},
	}
}

// racingStore is a record store whose first List (the deploy's look at
// the records before it takes the lock) lets another deploy run to the end
// right after it: the first deploy then decides from records that are no
// longer the newest, as when two pipelines race.
type racingStore struct {
	storage.Store
	once sync.Once
	race func()
}

func (s *racingStore) List(ctx context.Context, name string) ([]storage.Entry, error) {
	entries, err := s.Store.List(ctx, name)
	s.once.Do(s.race)
	return entries, err
}

func raceOptions(revision bool, greeting string) release.DeployOptions {
	return release.DeployOptions{
		Name: engRelease,
		Render: release.RenderInput{Chart: raceChart(revision), Options: charts.RenderOptions{
			Namespace: engNS, Set: []string{"greeting=" + greeting},
		}},
		HistoryMax: 10,
	}
}

// TestDeployDecidesUnderTheLock: the revision number, .Release.Revision,
// IsUpgrade and the up-to-date decision are those of the records as they
// are once the lock is held, not as they were when the deploy started.
func TestDeployDecidesUnderTheLock(t *testing.T) {
	cases := []struct {
		name string
		// first is what revision 1 deploys, racer what the other deploy
		// writes as revision 2 meanwhile, mine what the racing deploy
		// deploys.
		first, racer, mine string
		// wantRevision is the revision the racing deploy ends on;
		// upToDate says it recorded nothing.
		wantRevision int
		upToDate     bool
		// revision: the chart renders .Release.Revision (never up to date).
		revision bool
	}{
		{name: "the other deploy took the next revision: render and record revision 3",
			first: "a", racer: "b", mine: "c", wantRevision: 3, revision: true},
		{name: "not up to date before the lock, up to date under it: no new revision",
			first: "a", racer: "b", mine: "b", wantRevision: 2, upToDate: true},
		{name: "up to date before the lock, not under it: deployed as revision 3",
			first: "a", racer: "b", mine: "a", wantRevision: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newEngFixture(t)
			ctx := context.Background()
			_, err := f.engine.Deploy(ctx, raceOptions(tc.revision, tc.first))
			require.NoError(t, err)

			racer := *f.engine
			racer.Progress = nil
			mine := *f.engine
			mine.Store = &racingStore{Store: f.store, race: func() {
				res, err := racer.Deploy(ctx, raceOptions(tc.revision, tc.racer))
				require.NoError(t, err)
				require.Equal(t, 2, res.Revision)
			}}
			res, err := mine.Deploy(ctx, raceOptions(tc.revision, tc.mine))
			require.NoError(t, err)
			assert.Equal(t, tc.wantRevision, res.Revision)
			if tc.upToDate {
				assert.Contains(t, res.Description, "up to date")
				assert.Equal(t, map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusDeployed}, f.statuses(t),
					"no record written, the pending one removed")
				return
			}
			assert.Equal(t, map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusSuperseded, 3: storage.StatusDeployed}, f.statuses(t))
			if tc.revision {
				rec := f.record(t, 3)
				assert.Contains(t, rec.Manifest, `revision: "3"`, "rendered for the revision the lock holds")
				assert.Contains(t, rec.Manifest, `upgrade: "true"`)
				assert.Contains(t, rec.Manifest, `kube: v1.37.2`, "the server's version")
			}
			assert.Equal(t, tc.mine, f.configMap(engRelease + "-config").Object["data"].(map[string]any)["greeting"])
		})
	}
}
