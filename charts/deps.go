package charts

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
)

// depState is one dependency declared in a Chart.yaml of the chart tree,
// after Helm's dependency processing decided whether it is enabled.
type depState struct {
	// dep is the dependency as declared (the caller's, never modified).
	dep *chart.Dependency
	// dir is the chart directory that declares it, relative to the top
	// chart's directory: "" for the top chart, "charts/sub/" for a
	// subchart (by chart names).
	dir string
	// valuesPrefix is the values path of the declaring chart: "" for the
	// top chart, "sub." for a subchart (by aliases, as Helm's condition
	// paths are).
	valuesPrefix string
	// present is the first chart in the declaring chart's charts/ with the
	// dependency's name (any version); nil when it is not vendored.
	present *chart.Chart
	// vendored is the chart Helm uses for it: same name, version within
	// the dependency's range; nil when there is none.
	vendored *chart.Chart
	// enabled is Helm's decision (condition, tags).
	enabled bool
	// strayKept: present is out of the dependency's range and Helm renders
	// it anyway, as a subchart no dependency declares.
	strayKept bool
}

// missing reports whether no chart of the dependency's name is vendored.
func (s depState) missing() bool { return s.present == nil }

// effectiveName is the name the dependency gets in the chart tree: its
// alias, else its name.
func effectiveName(d *chart.Dependency) string {
	if d.Alias != "" {
		return d.Alias
	}
	return d.Name
}

// processDependencies runs Helm's own dependency processing
// (chartutil.ProcessDependencies: condition, tags, alias, import-values, as
// `helm template` and `helm install` do) on a deep copy of ch, and returns
// that copy, ready to render, and the state of every declared dependency
// of the charts that remain.
//
// A dependency declared in a Chart.yaml but absent from that chart's
// charts/ gets an empty placeholder chart (its name, a version within its
// range) in the copy, so that Helm's own code decides whether it is
// enabled: enabled placeholders are reported by the caller (they cannot
// render), disabled ones are dropped by Helm like any disabled dependency.
// ch itself is never changed.
func processDependencies(ch *chart.Chart, user map[string]any) (*chart.Chart, []depState, error) {
	work := copyChart(ch)
	addPlaceholders(work)
	if err := chartutil.ProcessDependencies(work, copyValueMap(user)); err != nil {
		return nil, nil, &InputError{Source: "chart", File: ch.Name(), Msg: "processing the dependencies: " + err.Error(), Err: err}
	}
	var states []depState
	collectStates(work, ch, "", "", &states)
	return work, states, nil
}

// collectStates walks the processed tree (processed) alongside the
// caller's tree (orig) and records the state of every dependency orig
// declares, then descends into the dependencies Helm kept.
func collectStates(processed, orig *chart.Chart, dir, valuesPrefix string, out *[]depState) {
	if orig.Metadata == nil {
		return
	}
	for _, d := range orig.Metadata.Dependencies {
		if d == nil {
			continue
		}
		st := depState{dep: d, dir: dir, valuesPrefix: valuesPrefix}
		for _, c := range orig.Dependencies() {
			if c.Name() != d.Name {
				continue
			}
			if st.present == nil {
				st.present = c
			}
			if st.vendored == nil && chartutil.IsCompatibleRange(d.Version, c.Metadata.Version) {
				st.vendored = c
			}
		}
		kept := childNamed(processed, effectiveName(d))
		st.enabled = kept != nil
		st.strayKept = st.present != nil && st.vendored == nil && childNamed(processed, d.Name) != nil
		*out = append(*out, st)
		if st.vendored != nil && kept != nil {
			collectStates(kept, st.vendored, dir+"charts/"+d.Name+"/", valuesPrefix+effectiveName(d)+".", out)
		}
	}
	// Charts in charts/ that no dependency declares (or none in their
	// version): Helm renders them as they are.
	for _, c := range orig.Dependencies() {
		declared := slices.ContainsFunc(orig.Metadata.Dependencies, func(d *chart.Dependency) bool {
			return d != nil && d.Name == c.Name() && chartutil.IsCompatibleRange(d.Version, c.Metadata.Version)
		})
		if declared {
			continue
		}
		if kept := childNamed(processed, c.Name()); kept != nil {
			collectStates(kept, c, dir+"charts/"+c.Name()+"/", valuesPrefix+c.Name()+".", out)
		}
	}
}

func childNamed(c *chart.Chart, name string) *chart.Chart {
	for _, d := range c.Dependencies() {
		if d.Name() == name {
			return d
		}
	}
	return nil
}

// addPlaceholders gives every dependency declared in c's tree whose chart
// is not in charts/ (no chart of that name, as Helm's CheckDependencies
// sees it) an empty chart of its name and a version within its range.
func addPlaceholders(c *chart.Chart) {
	for _, sub := range c.Dependencies() {
		addPlaceholders(sub)
	}
	added := map[string]bool{}
	for _, d := range c.Metadata.Dependencies {
		if d == nil || added[d.Name] || childNamed(c, d.Name) != nil {
			continue
		}
		added[d.Name] = true
		c.AddDependency(&chart.Chart{Metadata: &chart.Metadata{
			APIVersion: chart.APIVersionV2,
			Name:       d.Name,
			Version:    placeholderVersion(d.Version),
		}})
	}
}

// constraintVersionRe finds the versions written in a semver constraint.
var constraintVersionRe = regexp.MustCompile(`(\d+)(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:-([0-9A-Za-z.-]+))?`)

// placeholderVersion returns a version that satisfies the semver
// constraint (Helm's IsCompatibleRange), trying the versions the
// constraint names and their neighbours; "0.0.0" when it finds none (an
// invalid constraint matches no version, in Helm too).
func placeholderVersion(constraint string) string {
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return "0.0.0"
	}
	var cands []*semver.Version
	for _, m := range constraintVersionRe.FindAllStringSubmatch(constraint, -1) {
		num := func(s string) uint64 {
			n, _ := strconv.ParseUint(s, 10, 64)
			return n
		}
		major, minor, patch := num(m[1]), num(m[2]), num(m[3])
		base := semver.New(major, minor, patch, m[4], "")
		cands = append(cands, base, semver.New(major, minor, patch, "", ""))
		for _, next := range []semver.Version{base.IncPatch(), base.IncMinor(), base.IncMajor()} {
			cands = append(cands, &next)
		}
		if patch > 0 {
			cands = append(cands, semver.New(major, minor, patch-1, "", ""))
		}
		if minor > 0 {
			cands = append(cands, semver.New(major, minor-1, 999999, "", ""))
		}
		if major > 0 {
			cands = append(cands, semver.New(major-1, 999999, 999999, "", ""))
		}
	}
	cands = append(cands, semver.New(0, 0, 0, "", ""), semver.New(1, 0, 0, "", ""))
	for _, v := range cands {
		if c.Check(v) {
			return v.String()
		}
	}
	return "0.0.0"
}

// copyChart deep-copies what Helm's dependency processing changes in a
// chart tree (metadata, its dependency list, values, the tree itself);
// template and file contents are shared, they are only read.
func copyChart(c *chart.Chart) *chart.Chart {
	out := &chart.Chart{
		Raw:           c.Raw,
		Metadata:      copyMetadata(c.Metadata),
		Lock:          c.Lock,
		Templates:     c.Templates,
		Values:        copyValueMap(c.Values),
		Schema:        c.Schema,
		SchemaModTime: c.SchemaModTime,
		Files:         c.Files,
		ModTime:       c.ModTime,
	}
	for _, d := range c.Dependencies() {
		out.AddDependency(copyChart(d))
	}
	return out
}

func copyMetadata(m *chart.Metadata) *chart.Metadata {
	if m == nil {
		return nil
	}
	out := *m
	out.Sources = slices.Clone(m.Sources)
	out.Keywords = slices.Clone(m.Keywords)
	out.Maintainers = slices.Clone(m.Maintainers)
	out.Annotations = maps.Clone(m.Annotations)
	if m.Dependencies != nil {
		out.Dependencies = make([]*chart.Dependency, len(m.Dependencies))
		for i, d := range m.Dependencies {
			if d == nil {
				continue
			}
			cp := *d
			cp.Tags = slices.Clone(d.Tags)
			if d.ImportValues != nil {
				cp.ImportValues = copyValue(d.ImportValues).([]any)
			}
			out.Dependencies[i] = &cp
		}
	}
	return &out
}

func copyValueMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return copyValue(m).(map[string]any)
}

// copyValue deep-copies parsed YAML: maps and lists are copied, scalars
// shared.
func copyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = copyValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e)
		}
		return out
	default:
		return v
	}
}

// missingDependencies turns the states of the dependencies that
// are not vendored into one warning line each (disabled: rendered
// without) and one *InputError for all the enabled ones (they cannot
// render).
func missingDependencies(states []depState, chartName, chartDir string) ([]string, error) {
	var warnings, enabled []string
	for _, st := range states {
		where := "charts/"
		if st.dir != "" {
			where = st.dir + "charts/"
		}
		if st.strayKept {
			warnings = append(warnings, fmt.Sprintf("dependency %s: %s holds %s %s, outside that range: rendering it as Helm does, "+
				"as a subchart no dependency declares (%s)", describeDependency(st.dep), where, st.present.Name(),
				st.present.Metadata.Version, vendorHint(st.dep, chartDir, st.dir)))
		}
		if !st.missing() {
			continue
		}
		if !st.enabled {
			warnings = append(warnings, fmt.Sprintf("dependency %s is not in %s and is disabled (%s): rendering without it",
				describeDependency(st.dep), where, st.toggles()))
			continue
		}
		enabled = append(enabled, fmt.Sprintf("dependency %s is enabled (%s) but not in %s: %s",
			describeDependency(st.dep), st.toggles(), where, vendorHint(st.dep, chartDir, st.dir)))
	}
	if len(enabled) == 0 {
		return slices.Compact(warnings), nil
	}
	return nil, &InputError{Source: "chart", File: chartName, Msg: strings.Join(slices.Compact(enabled), "; ")}
}

// describeDependency names a dependency for messages: "redis 17.3.2
// (https://charts.example.com/stable)", with " as ALIAS" when aliased.
func describeDependency(d *chart.Dependency) string {
	repo := d.Repository
	if repo == "" {
		repo = "no repository"
	}
	s := fmt.Sprintf("%s %s (%s)", d.Name, d.Version, repo)
	if d.Alias != "" {
		s += " as " + d.Alias
	}
	return s
}

// toggles says what enables or disables the dependency: its condition
// (as a values path of the top chart) and tags.
func (s depState) toggles() string {
	var parts []string
	if s.dep.Condition != "" {
		var conds []string
		for c := range strings.SplitSeq(s.dep.Condition, ",") {
			if c = strings.TrimSpace(c); c != "" {
				conds = append(conds, s.valuesPrefix+c)
			}
		}
		parts = append(parts, "condition "+strings.Join(conds, ","))
	}
	if len(s.dep.Tags) > 0 {
		parts = append(parts, "tags "+strings.Join(s.dep.Tags, ", "))
	}
	if len(parts) == 0 {
		return "no condition or tags"
	}
	return strings.Join(parts, ", ")
}

// vendorHint says how to put the dependency into charts/: `vllmctl
// dependency update` (file://, chart repositories and OCI registries alike)
// on the directory of the chart that declares it (dir, relative
// to chartDir, "CHART" when unknown).
func vendorHint(d *chart.Dependency, chartDir, dir string) string {
	if chartDir == "" {
		chartDir = "CHART"
	}
	target := chartDir
	if dir != "" {
		target = strings.TrimSuffix(chartDir, "/") + "/" + strings.TrimSuffix(dir, "/")
	}
	if d.Repository == "" {
		return "it names no repository: copy the chart into " + strings.TrimSuffix(target, "/") + "/charts/"
	}
	return "vendor it with `vllmctl dependency update " + target + "`"
}
