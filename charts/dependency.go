package charts

import (
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// Statuses of a dependency (DependencyStatus.Status).
const (
	// DependencyOK: a chart of its name and a version within its range is
	// in charts/.
	DependencyOK = "ok"
	// DependencyMissing: no chart of its name is in charts/.
	DependencyMissing = "missing"
	// DependencyWrongVersion: charts/ holds a chart of its name, in a
	// version outside its range.
	DependencyWrongVersion = "wrong version"
	// DependencyDisabled: the chart's default values turn it off
	// (condition, tags), vendored or not.
	DependencyDisabled = "disabled"
)

// DependencyStatus is one dependency of a chart's Chart.yaml as `vllmctl
// dependency list` shows it.
type DependencyStatus struct {
	Name       string `json:"name"`
	Alias      string `json:"alias,omitempty"`
	Version    string `json:"version"`
	Repository string `json:"repository"`
	// Status is DependencyOK, DependencyMissing, DependencyWrongVersion or
	// DependencyDisabled.
	Status string `json:"status"`
	// Vendored is the version of the chart of its name in charts/, if any.
	Vendored  string   `json:"vendored,omitempty"`
	Enabled   bool     `json:"enabled"`
	Condition string   `json:"condition,omitempty"`
	Tags      []string `json:"tags,omitempty"`
}

// ListDependencies returns the status of each dependency ch's Chart.yaml
// declares, in order. Whether one is enabled is Helm's decision
// (ProcessDependencies) with the chart's default values; a disabled one is
// DependencyDisabled whether it is vendored or not. ch is not changed.
func ListDependencies(ch *chart.Chart) ([]DependencyStatus, error) {
	_, states, err := processDependencies(ch, map[string]any{})
	if err != nil {
		return nil, err
	}
	out := []DependencyStatus{}
	for _, st := range states {
		if st.dir != "" {
			continue // a subchart's own dependencies
		}
		d := st.dep
		s := DependencyStatus{
			Name: d.Name, Alias: d.Alias, Version: d.Version, Repository: d.Repository,
			Enabled: st.enabled, Condition: d.Condition, Tags: d.Tags,
		}
		if st.present != nil {
			s.Vendored = st.present.Metadata.Version
		}
		switch {
		case !st.enabled:
			s.Status = DependencyDisabled
		case st.missing():
			s.Status = DependencyMissing
		case st.vendored != nil || d.Version == st.present.Metadata.Version:
			// Helm's `dependency list` takes an exact match even when the
			// version does not parse as a constraint.
			s.Status = DependencyOK
		default:
			s.Status = DependencyWrongVersion
		}
		out = append(out, s)
	}
	return out, nil
}
