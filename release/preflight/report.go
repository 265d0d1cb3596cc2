package preflight

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/vllm"
)

// exitInvalid is the exit code for invalid input, which a
// refusing preflight also returns: nothing was applied.
const exitInvalid = exitcode.Invalid

// TemplateChange says whether applying a Deployment rolls out new pods.
type TemplateChange string

// The template changes.
const (
	// ChangeNew is a Deployment that does not exist yet: all its pods are
	// new.
	ChangeNew TemplateChange = "new"
	// ChangeChanged is a Deployment whose pod template the apply changes.
	ChangeChanged TemplateChange = "changed"
	// ChangeUnchanged is a Deployment whose pod template stays as it is:
	// no rollout; only the pods a replica increase adds need room.
	ChangeUnchanged TemplateChange = "unchanged"
)

// Verdict is the preflight's conclusion for one Deployment.
type Verdict string

// The verdicts.
const (
	// VerdictFits: the rollout can proceed with the chart's strategy (and
	// the user's overrides).
	VerdictFits Verdict = "fits"
	// VerdictSurgeBlocked: the rollout cannot start with the chart's
	// strategy, because not even one surge pod fits, but it can by
	// replacing old pods in place (a larger maxUnavailable).
	VerdictSurgeBlocked Verdict = "surge-blocked"
	// VerdictImpossible: no strategy helps: a pod fits on no matching node
	// or in no quota even with every old pod gone, a new Deployment's pods
	// do not fit, or the pods a replica increase adds do not fit next to
	// the running ones.
	VerdictImpossible Verdict = "impossible"
	// VerdictUnchecked: the preflight was skipped.
	VerdictUnchecked Verdict = "unchecked"
)

// The steps a [CapacityCheck] checks.
const (
	// StepPod: one pod against the largest matching node's allocatable or
	// a quota's hard limit.
	StepPod = "pod"
	// StepCreate: all pods of a new Deployment.
	StepCreate = "create"
	// StepScaleUp: the pods a replica increase adds (rendered replicas or
	// an HPA's minReplicas above the live count), next to every running
	// pod.
	StepScaleUp = "scale-up"
	// StepSurge: the surge pods, next to every old pod.
	StepSurge = "surge"
	// StepReplace: new pods in the room that removed old pods free.
	StepReplace = "replace"
	// StepRecreate: all new pods once every old pod is gone (Recreate).
	StepRecreate = "recreate"
	// StepGang: all new pods of an engine group at once, its old pods
	// gone.
	StepGang = "gang"
)

// CapacityCheck is one row of the preflight: a resource some pods of one
// rollout step need, against what the matching nodes or one quota have
// free.
type CapacityCheck struct {
	// Step is StepPod, StepCreate, StepScaleUp, StepSurge, StepReplace or
	// StepRecreate.
	Step string `json:"step"`
	// Pods is the number of new pods the step needs room for.
	Pods int64 `json:"pods"`
	// Resource is a resource name on nodes (nvidia.com/gpu, cpu, memory,
	// pods: for pods, whole pods that fit with all their requests) or a
	// ResourceQuota hard key (requests.nvidia.com/gpu, limits.cpu, pods).
	Resource string `json:"resource"`
	Needed   string `json:"needed"`
	Free     string `json:"free"`
	// Short is Needed minus Free when the check fails.
	Short string `json:"short,omitempty"`
	// Where is "nodes a, b" or "quota q", with what the step assumes.
	Where string `json:"where"`
	// Nodes are the matching nodes of a node check.
	Nodes []string `json:"nodes,omitempty"`
	// Quota names the ResourceQuota of a quota check.
	Quota string `json:"quota,omitempty"`
	// MostOnOneNode is the largest free amount on a single matching node
	// (per-node fit: a pod needing 8 GPUs needs one node with 8 free).
	MostOnOneNode string `json:"mostOnOneNode,omitempty"`
	OK            bool   `json:"ok"`
}

func (c CapacityCheck) summary() string {
	s := fmt.Sprintf("%s: need %s, free %s on %s", c.Resource, c.Needed, c.Free, c.Where)
	if c.Short != "" {
		s += ", short " + c.Short
	}
	if c.showMost() {
		s += " (at most " + c.MostOnOneNode + " free on one node)"
	}
	return s
}

// showMost reports whether the largest free amount on one node says more
// than Free: for failing checks of a resource that is free, but split.
func (c CapacityCheck) showMost() bool {
	return !c.OK && c.Resource != string(corev1.ResourcePods) && c.MostOnOneNode != "" && c.MostOnOneNode != "0" && c.MostOnOneNode != c.Free
}

// DeploymentPreflight is the preflight of one Deployment of the release.
type DeploymentPreflight struct {
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	Change    TemplateChange `json:"change,omitempty"`
	// Replicas is the replica count the rollout runs with; ReplicasFrom
	// says where it comes from (chart, live, HorizontalPodAutoscaler ...,
	// default).
	Replicas     int32  `json:"replicas"`
	ReplicasFrom string `json:"replicasFrom"`
	// PerPod is what one new pod requests (pods: 1).
	PerPod map[string]string `json:"perPod,omitempty"`
	// Strategy is the chart's strategy, resolved.
	Strategy Strategy `json:"strategy"`
	// Effective is the strategy the rollout is applied with when it is not
	// the chart's: the user's overrides, then the surge policy's change.
	// [ApplyOverrides] writes it into the Deployment.
	Effective *Strategy `json:"effective,omitempty"`
	// Overridden is set when --max-surge or --max-unavailable were given
	// (the objects may already carry them: then Effective stays nil);
	// Adjusted when the surge policy changed the strategy.
	Overridden bool    `json:"overridden,omitempty"`
	Adjusted   bool    `json:"adjusted,omitempty"`
	Verdict    Verdict `json:"verdict"`
	// Checks are the rows of the table: the rollout step the strategy
	// starts with, and the step the surge policy chose.
	Checks []CapacityCheck `json:"checks,omitempty"`
	// Message explains the verdict or the change, in one line.
	Message string `json:"message,omitempty"`
	// refusal is set when this Deployment makes the preflight refuse.
	refusal bool
}

// Report is the result of [Run]: per Deployment, what its rollout needs,
// what is free, and the verdict; per engine group, whether its pods fit
// at once.
type Report struct {
	Policy      SurgePolicy           `json:"policy"`
	Skipped     bool                  `json:"skipped,omitempty"`
	Deployments []DeploymentPreflight `json:"deployments"`
	// Groups are the engine groups (StatefulSets labelled
	// vllmctl.io/group): whether each group's pods fit at once.
	Groups []GroupPreflight `json:"groups,omitempty"`
	// Notes say what could not be checked (e.g. nodes not readable) and
	// how pods being deleted were counted.
	Notes []string `json:"notes,omitempty"`
	// namespace is the default namespace objects without one went to.
	namespace string
}

// Changed reports whether the report changes any Deployment's strategy
// (overrides or the surge policy).
func (r *Report) Changed() bool {
	if r == nil {
		return false
	}
	for _, d := range r.Deployments {
		if d.Effective != nil {
			return true
		}
	}
	return false
}

// Messages returns the lines to print loudly on stderr: one per strategy
// the surge policy changed, and the overrides.
func (r *Report) Messages() []string {
	if r == nil {
		return nil
	}
	var out []string
	for _, d := range r.Deployments {
		if d.Adjusted {
			out = append(out, "WARNING: "+d.Message+"; pods are replaced without surge, so serving capacity drops during the rollout")
		} else if d.Overridden && d.Effective != nil {
			out = append(out, "NOTE: "+changeText(d, "strategy override"))
		}
	}
	return out
}

// Description returns the suffix to append to the revision record's
// description when the report changed a strategy, e.g. "surge policy auto:
// Deployment qwen maxSurge 1→0, maxUnavailable 0→1 (nvidia.com/gpu: need
// 8, free 0 on nodes gpu-node-1, gpu-node-2)"; "" when nothing changed.
func (r *Report) Description() string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, d := range r.Deployments {
		switch {
		case d.Adjusted:
			parts = append(parts, d.Message)
		case d.Overridden && d.Effective != nil:
			parts = append(parts, changeText(d, "strategy override"))
		}
	}
	return strings.Join(parts, "; ")
}

func changeText(d DeploymentPreflight, what string) string {
	from, to := d.Strategy, d.Strategy
	if d.Effective != nil {
		to = *d.Effective
	}
	return fmt.Sprintf("%s: Deployment %s maxSurge %s→%s, maxUnavailable %s→%s", what, d.Name,
		intOrPercent(from.MaxSurge), intOrPercent(to.MaxSurge), intOrPercent(from.MaxUnavailable), intOrPercent(to.MaxUnavailable))
}

func intOrPercent(v *intstr.IntOrString) string {
	if v == nil {
		return "-"
	}
	return v.String()
}

// Print writes the report as a table: one row per interesting check
// (failing ones and GPUs), then the surge policy's changes; then, when
// there are engine groups, a table with a row per group and the groups'
// messages (the Deployments' table is left out when there are groups and
// no Deployment); then the notes.
func (r *Report) Print(w io.Writer) error {
	if len(r.Deployments) > 0 || len(r.Groups) == 0 {
		if err := r.printDeployments(w); err != nil {
			return err
		}
	}
	if err := r.printGroups(w); err != nil {
		return err
	}
	for _, n := range r.Notes {
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

// printGroups writes the engine groups as a table, one row per group,
// then the messages of those that do not fit.
func (r *Report) printGroups(w io.Writer) error {
	if len(r.Groups) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSTATEFULSET\tPODS\tPER POD\tCANDIDATE NODES\tNODES THAT FIT\tVERDICT")
	for _, g := range r.Groups {
		pods := fmt.Sprint(g.Pods)
		if g.NewPods != g.Pods && g.Verdict != VerdictUnchecked {
			pods = fmt.Sprintf("%d (%d new)", g.Pods, g.NewPods)
		}
		cand, fit := "-", "-"
		if g.CandidateNodes > 0 {
			cand, fit = fmt.Sprint(g.CandidateNodes), fmt.Sprint(g.FitNodes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Group, g.StatefulSet, pods, perPodText(g.PerPod), cand, fit, g.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, g := range r.Groups {
		if g.Message != "" {
			if _, err := fmt.Fprintf(w, "%s: %s\n", g.StatefulSet, g.Message); err != nil {
				return err
			}
		}
	}
	return nil
}

// perPodText formats a pod's requests for the table: GPUs, cpu, memory.
func perPodText(per map[string]string) string {
	var parts []string
	for _, r := range []corev1.ResourceName{vllm.GPUResource, corev1.ResourceCPU, corev1.ResourceMemory} {
		if v, ok := per[string(r)]; ok {
			parts = append(parts, string(r)+" "+v)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// printDeployments writes the Deployments' table and messages.
func (r *Report) printDeployments(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEPLOYMENT\tRESOURCE\tNEEDED\tFREE\tWHERE\tVERDICT")
	for _, d := range r.Deployments {
		rows := printedChecks(d)
		if len(rows) == 0 {
			what := "-"
			switch {
			case d.Verdict == VerdictUnchecked:
				what = "preflight skipped"
			case d.Change == ChangeUnchanged && (d.Message == "" || d.Message == msgUnchanged):
				what = "pod template unchanged"
			case d.Message != "":
				what = d.Message
			}
			fmt.Fprintf(tw, "%s\t-\t-\t-\t%s\t%s\n", d.Name, what, d.Verdict)
			continue
		}
		for _, c := range rows {
			where := c.Where
			if c.showMost() {
				where += " (at most " + c.MostOnOneNode + " on one node)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Name, c.Resource, c.Needed, c.Free, where, d.Verdict)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range r.Deployments {
		if d.Message != "" && (d.Adjusted || d.Verdict != VerdictFits || d.Overridden) {
			if _, err := fmt.Fprintf(w, "%s: %s\n", d.Name, d.Message); err != nil {
				return err
			}
		}
	}
	return nil
}

// printedChecks keeps the table short: failing checks and GPU checks, or
// the pod-count check when there are neither.
func printedChecks(d DeploymentPreflight) []CapacityCheck {
	failing := map[string]int{}
	for _, c := range d.Checks {
		if !c.OK && c.Resource != string(corev1.ResourcePods) {
			failing[c.Step]++
		}
	}
	var out []CapacityCheck
	for _, c := range d.Checks {
		gpu := strings.HasSuffix(c.Resource, string(vllm.GPUResource))
		// The pod-count row on nodes combines all requests: print it when
		// it is the only one failing.
		pods := c.Resource == string(corev1.ResourcePods) && c.Quota == ""
		if gpu || (!c.OK && (!pods || failing[c.Step] == 0)) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		for _, c := range d.Checks {
			if c.Resource == string(corev1.ResourcePods) {
				out = append(out, c)
			}
		}
	}
	return out
}

// Error is the preflight refusing a rollout (exit code 2: nothing
// applied, no record changed). Refused lists the Deployments that cannot
// roll out, each with its failing checks; RefusedGroups the engine groups
// whose pods cannot all run at once.
type Error struct {
	Policy  SurgePolicy
	Refused []DeploymentPreflight
	// RefusedGroups lists the engine groups whose pods cannot all run at
	// once.
	RefusedGroups []GroupPreflight
	// Report is the full report.
	Report *Report
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rollout preflight refused (surge policy %s); nothing was applied", e.Policy)
	for _, d := range e.Refused {
		fmt.Fprintf(&b, "\n  Deployment %s/%s (%s, %d replica%s): %s", d.Namespace, d.Name, d.Verdict, d.Replicas, plural(int64(d.Replicas)), d.Message)
		for _, c := range e.shortages(d) {
			fmt.Fprintf(&b, "\n    %s", c.summary())
		}
	}
	for _, g := range e.RefusedGroups {
		fmt.Fprintf(&b, "\n  StatefulSet %s/%s (group %s, %s, %d pod%s): %s", g.Namespace, g.StatefulSet, g.Group, g.Verdict, g.Pods, plural(int64(g.Pods)), g.Message)
		for _, c := range g.Checks {
			if !c.OK {
				fmt.Fprintf(&b, "\n    %s", c.summary())
			}
		}
	}
	return b.String()
}

// shortages returns the failing checks of d, as the table prints them.
func (e *Error) shortages(d DeploymentPreflight) []CapacityCheck {
	var out []CapacityCheck
	for _, c := range printedChecks(d) {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// ExitCode is 2: a rollout preflight refuses.
func (e *Error) ExitCode() int { return exitInvalid }

// StrategyInputError reports an invalid surge policy, --max-surge or
// --max-unavailable, or overrides a Deployment cannot take (exit code 2).
type StrategyInputError struct {
	// Object is the Deployment, when the error is about one.
	Object string
	Reason string
}

func (e *StrategyInputError) Error() string {
	if e.Object == "" {
		return e.Reason
	}
	return e.Object + ": " + e.Reason
}

// ExitCode is 2: invalid input.
func (e *StrategyInputError) ExitCode() int { return exitInvalid }

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// nodeNames formats up to three node names, the rest counted.
func nodeNames(names []string) string {
	if len(names) == 0 {
		return "no nodes"
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	if len(sorted) <= 3 {
		return strings.Join(sorted, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(sorted[:3], ", "), len(sorted)-3)
}
