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
// the deployed revision (an upgrade has one). It is nil when neither flag
// is given, with --reset-values, and for a first install (plan.Upgrade
// false: nothing is deployed, and Helm's install takes no previous values).
func PreviousValues(ro charts.RenderOptions, plan storage.Plan, entries []storage.Entry) (*charts.PreviousValues, error) {
	if ro.ResetValues || (!ro.ReuseValues && !ro.ResetThenReuseValues) || !plan.Upgrade || len(entries) == 0 {
		return nil, nil
	}
	var current storage.Entry
	for _, e := range entries {
		if e.Status == storage.StatusDeployed && e.Revision > current.Revision {
			current = e
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
