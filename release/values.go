package release

import (
	"fmt"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/release/storage"
)

// PreviousValues returns the values a render with --reuse-values or
// --reset-then-reuse-values (ro) starts from: those of the release's
// current revision among entries, as Helm 4's upgrade picks its
// "current release" (helm.sh/helm/v4/pkg/action/upgrade.go prepareUpgrade):
// the deployed revision; when none is deployed, the last revision if it
// failed or was superseded (every revision failed: Helm reuses the last
// one's values, not the chart's defaults). It is nil when neither flag is
// given, with --reset-values, and for a first install (no revision, or
// the last one is none of those).
func PreviousValues(ro charts.RenderOptions, plan storage.Plan, entries []storage.Entry) (*charts.PreviousValues, error) {
	if ro.ResetValues || (!ro.ReuseValues && !ro.ResetThenReuseValues) || len(entries) == 0 {
		return nil, nil
	}
	current, _ := storage.DeployedAmong(entries)
	if current.Revision == 0 && !plan.Upgrade {
		// Nothing deployed: Helm's upgrade then takes the last revision
		// when it failed or was superseded (all revisions failed).
		last := entries[0]
		for _, e := range entries {
			if e.Revision > last.Revision {
				last = e
			}
		}
		if last.Status == storage.StatusFailed || last.Status == storage.StatusSuperseded {
			current = last
		}
	}
	if current.Revision == 0 {
		return nil, nil
	}
	r, err := current.Release()
	if err != nil {
		return nil, fmt.Errorf("read the values of revision %d: %w", current.Revision, err)
	}
	return &charts.PreviousValues{Revision: r.Revision, User: r.Values, Computed: r.ComputedValues}, nil
}
