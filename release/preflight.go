package release

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	deploymentutil "k8s.io/kubectl/pkg/util/deployment"
	"k8s.io/utils/ptr"
)

// SurgePolicy says what the rollout preflight does when a Deployment's
// surge pods cannot fit (--surge-policy).
type SurgePolicy string

// The surge policies.
const (
	// SurgePolicyAuto lowers maxSurge to 0 and raises maxUnavailable just
	// enough (within the PodDisruptionBudget, never for a single replica)
	// when the surge cannot fit, and refuses when nothing fits.
	SurgePolicyAuto SurgePolicy = "auto"
	// SurgePolicyStrict never changes the strategy and refuses when the
	// surge cannot fit.
	SurgePolicyStrict SurgePolicy = "strict"
	// SurgePolicyOff only reports.
	SurgePolicyOff SurgePolicy = "off"
)

// ParseSurgePolicy parses a --surge-policy value; "" is auto.
func ParseSurgePolicy(s string) (SurgePolicy, error) {
	switch p := SurgePolicy(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return SurgePolicyAuto, nil
	case SurgePolicyAuto, SurgePolicyStrict, SurgePolicyOff:
		return p, nil
	}
	return "", &StrategyInputError{Reason: fmt.Sprintf("invalid surge policy %q: want auto, strict or off", s)}
}

// ParseIntOrPercent parses a --max-surge or --max-unavailable value: a
// non-negative integer or a percentage ("25%"). flag names the flag in the
// error.
func ParseIntOrPercent(flag, value string) (*intstr.IntOrString, error) {
	v := strings.TrimSpace(value)
	bad := &StrategyInputError{Reason: fmt.Sprintf("invalid %s %q: want a non-negative integer or a percentage such as 25%%", flag, value)}
	if num, ok := strings.CutSuffix(v, "%"); ok {
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			return nil, bad
		}
		return ptr.To(intstr.FromString(strconv.Itoa(n) + "%")), nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return nil, bad
	}
	return ptr.To(intstr.FromInt32(int32(n))), nil
}

// PreflightOptions tune [Preflight].
type PreflightOptions struct {
	// Namespace is the release namespace, for objects that have none.
	Namespace string
	// Release is the release name. When set, live PodDisruptionBudgets and
	// HorizontalPodAutoscalers that carry this release's labels but are not
	// among the rendered objects are ignored: they are about to be pruned.
	Release string
	// Policy is the surge policy; "" is auto.
	Policy SurgePolicy
	// MaxSurge and MaxUnavailable, when set (--max-surge,
	// --max-unavailable), replace the chart's values for this rollout in
	// every Deployment of the release. The policy never changes a value the
	// user gave.
	MaxSurge       *intstr.IntOrString
	MaxUnavailable *intstr.IntOrString
	// Skip checks nothing: the report only carries the overrides.
	Skip bool
}

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
	// no new pods, nothing needed.
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
	// or in no quota even with every old pod gone, or a new Deployment's
	// pods do not fit.
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
	// StepSurge: the surge pods, next to every old pod.
	StepSurge = "surge"
	// StepReplace: new pods in the room that removed old pods free.
	StepReplace = "replace"
	// StepRecreate: all new pods once every old pod is gone (Recreate).
	StepRecreate = "recreate"
)

// Strategy is a Deployment's rollout strategy, as written and as the
// Deployment controller resolves it for the replica count.
type Strategy struct {
	// Type is RollingUpdate or Recreate.
	Type string `json:"type"`
	// MaxSurge and MaxUnavailable as written (defaulted to 25% as the API
	// server does); nil for Recreate.
	MaxSurge       *intstr.IntOrString `json:"maxSurge,omitempty"`
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// Surge and Unavailable are the pod counts they resolve to: surge
	// rounds up, unavailable down, and when both are 0 unavailable is 1.
	Surge       int32 `json:"surge"`
	Unavailable int32 `json:"unavailable"`
}

func (s Strategy) recreate() bool { return s.Type == string(appsv1.RecreateDeploymentStrategyType) }

// CapacityCheck is one row of the preflight: a resource some pods of one
// rollout step need, against what the matching nodes or one quota have
// free.
type CapacityCheck struct {
	// Step is StepPod, StepCreate, StepSurge, StepReplace or StepRecreate.
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
	// [ApplyStrategyOverrides] writes it into the Deployment.
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

// PreflightReport is the result of [Preflight]: per Deployment, what its
// rollout needs, what is free, and the verdict.
type PreflightReport struct {
	Policy      SurgePolicy           `json:"policy"`
	Skipped     bool                  `json:"skipped,omitempty"`
	Deployments []DeploymentPreflight `json:"deployments"`
	// Notes say what could not be checked (e.g. nodes not readable) and
	// how pods being deleted were counted.
	Notes []string `json:"notes,omitempty"`
	// namespace is the default namespace objects without one went to.
	namespace string
}

// Changed reports whether the report changes any Deployment's strategy
// (overrides or the surge policy).
func (r *PreflightReport) Changed() bool {
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
func (r *PreflightReport) Messages() []string {
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
func (r *PreflightReport) Description() string {
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
// (failing ones and GPUs), then the surge policy's changes and the notes.
func (r *PreflightReport) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEPLOYMENT\tRESOURCE\tNEEDED\tFREE\tWHERE\tVERDICT")
	for _, d := range r.Deployments {
		rows := printedChecks(d)
		if len(rows) == 0 {
			what := "-"
			switch {
			case d.Verdict == VerdictUnchecked:
				what = "preflight skipped"
			case d.Change == ChangeUnchanged:
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
	for _, n := range r.Notes {
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return err
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
		gpu := strings.HasSuffix(c.Resource, string(ResourceGPU))
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

// PreflightError is the preflight refusing a rollout (exit code 2: nothing
// applied, no record changed). Refused lists the Deployments that cannot
// roll out, each with its failing checks.
type PreflightError struct {
	Policy  SurgePolicy
	Refused []DeploymentPreflight
	// Report is the full report.
	Report *PreflightReport
}

func (e *PreflightError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rollout preflight refused (surge policy %s); nothing was applied", e.Policy)
	for _, d := range e.Refused {
		fmt.Fprintf(&b, "\n  Deployment %s/%s (%s, %d replica%s): %s", d.Namespace, d.Name, d.Verdict, d.Replicas, plural(int64(d.Replicas)), d.Message)
		for _, c := range e.shortages(d) {
			fmt.Fprintf(&b, "\n    %s", c.summary())
		}
	}
	return b.String()
}

// shortages returns the failing checks of d, as the table prints them.
func (e *PreflightError) shortages(d DeploymentPreflight) []CapacityCheck {
	var out []CapacityCheck
	for _, c := range printedChecks(d) {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// ExitCode is 2: a rollout preflight refuses.
func (e *PreflightError) ExitCode() int { return exitInvalid }

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

// Preflight checks, before anything is applied, that the rollout of every
// Deployment among objs whose pod template changes can proceed, and applies
// the surge policy.
//
// Whether a template changes is found by a server-side dry-run apply
// (field manager vllmctl, forced) compared with the live Deployment; when
// the dry run fails the template is taken as changed. A new Deployment
// needs room for all its replicas. A changed one first needs room for its
// surge pods next to every old pod; with maxUnavailable ≥ 1 it can instead
// proceed by replacing old pods in the room they free. Room is per node:
// allocatable minus the requests of the pods bound there that are not
// Succeeded or Failed (pods being deleted still count: they hold their
// resources until they are gone), on Ready, schedulable nodes that match
// the pod's nodeSelector, required node affinity and tolerations, and in
// every ResourceQuota of the namespace that counts the pods (hard minus
// used). Deployments are checked in order and what one reserves is not
// free for the next. HPA-targeted Deployments use the live replica count.
//
// The report is returned even with an error. A refusal is a
// *PreflightError, invalid overrides a *StrategyInputError (both exit code
// 2); API errors are wrapped. Nodes, pods, quotas, PodDisruptionBudgets or
// HPAs the user may not read are left out, with a note.
func Preflight(ctx context.Context, client kubernetes.Interface, objs []*unstructured.Unstructured, opts PreflightOptions) (*PreflightReport, error) {
	policy, err := ParseSurgePolicy(string(opts.Policy))
	if err != nil {
		return nil, err
	}
	p := &preflighter{
		client: client, opts: opts, policy: policy,
		report:   &PreflightReport{Policy: policy, Skipped: opts.Skip, Deployments: []DeploymentPreflight{}, namespace: opts.Namespace},
		quotas:   map[string][]*quotaState{},
		livePDBs: map[string][]policyv1.PodDisruptionBudget{},
		liveHPAs: map[string][]hpaInfo{},
		nsPods:   map[string][]*corev1.Pod{},
	}
	deps, err := p.collect(objs)
	if err != nil {
		return nil, err
	}
	for _, d := range deps {
		if err := p.prepare(ctx, d); err != nil {
			return p.report, err
		}
	}
	if !opts.Skip {
		for _, d := range deps {
			if d.entry.Change == ChangeUnchanged {
				continue
			}
			if err := p.evaluate(ctx, d); err != nil {
				return p.report, err
			}
		}
	}
	var refused []DeploymentPreflight
	for _, d := range deps {
		p.report.Deployments = append(p.report.Deployments, *d.entry)
		if d.entry.refusal {
			refused = append(refused, *d.entry)
		}
	}
	if len(refused) > 0 {
		return p.report, &PreflightError{Policy: policy, Refused: refused, Report: p.report}
	}
	return p.report, nil
}

// ApplyStrategyOverrides returns objs with the strategy of every Deployment
// whose report entry has an Effective strategy (overrides, surge policy)
// rewritten. Rewritten Deployments are copies; other objects are returned
// as they are. A nil report returns objs.
func ApplyStrategyOverrides(objs []*unstructured.Unstructured, report *PreflightReport) ([]*unstructured.Unstructured, error) {
	if report == nil {
		return objs, nil
	}
	out := make([]*unstructured.Unstructured, len(objs))
	copy(out, objs)
	for i, obj := range objs {
		if !isDeployment(RefOf(obj)) {
			continue
		}
		ns := obj.GetNamespace()
		if ns == "" {
			ns = report.namespace
		}
		var eff *Strategy
		for _, d := range report.Deployments {
			if d.Name == obj.GetName() && d.Namespace == ns {
				eff = d.Effective
			}
		}
		if eff == nil {
			continue
		}
		c := obj.DeepCopy()
		if err := unstructured.SetNestedField(c.Object, eff.Type, "spec", "strategy", "type"); err != nil {
			return nil, fmt.Errorf("%s: set strategy: %w", RefOf(obj), err)
		}
		for field, v := range map[string]*intstr.IntOrString{"maxSurge": eff.MaxSurge, "maxUnavailable": eff.MaxUnavailable} {
			if v == nil {
				continue
			}
			var value any = int64(v.IntValue())
			if v.Type == intstr.String {
				value = v.StrVal
			}
			if err := unstructured.SetNestedField(c.Object, value, "spec", "strategy", "rollingUpdate", field); err != nil {
				return nil, fmt.Errorf("%s: set strategy: %w", RefOf(obj), err)
			}
		}
		out[i] = c
	}
	return out, nil
}

// preflighter holds what one Preflight call learned about the cluster.
type preflighter struct {
	client kubernetes.Interface
	opts   PreflightOptions
	policy SurgePolicy
	report *PreflightReport

	renderedPDBs   []policyv1.PodDisruptionBudget
	renderedHPAs   []hpaInfo
	renderedQuotas []corev1.ResourceQuota

	clusterLoaded bool
	// nodesKnown is false when nodes or pods could not be listed: node
	// checks are then left out.
	nodesKnown bool
	nodes      []*nodeState
	nodeCount  int
	// allPods holds every pod that is not terminated, by namespace, when
	// pods of all namespaces could be listed.
	allPods  map[string][]*corev1.Pod
	nsPods   map[string][]*corev1.Pod
	quotas   map[string][]*quotaState
	livePDBs map[string][]policyv1.PodDisruptionBudget
	liveHPAs map[string][]hpaInfo
}

// hpaInfo is the part of a HorizontalPodAutoscaler the preflight uses.
type hpaInfo struct {
	name, namespace string
	target          string
	minReplicas     int32
	labels          map[string]string
}

// deploymentInput is one rendered Deployment being checked.
type deploymentInput struct {
	obj      *unstructured.Unstructured
	rendered *appsv1.Deployment
	live     *appsv1.Deployment
	entry    *DeploymentPreflight
	// strategy is the chart's strategy with the overrides.
	strategy Strategy
}

func (p *preflighter) note(format string, a ...any) {
	n := fmt.Sprintf(format, a...)
	for _, have := range p.report.Notes {
		if have == n {
			return
		}
	}
	p.report.Notes = append(p.report.Notes, n)
}

// collect converts the rendered Deployments, PDBs and HPAs.
func (p *preflighter) collect(objs []*unstructured.Unstructured) ([]*deploymentInput, error) {
	var deps []*deploymentInput
	for _, obj := range objs {
		ref := RefOf(obj)
		ns := obj.GetNamespace()
		if ns == "" {
			ns = p.opts.Namespace
		}
		if ns == "" && (isDeployment(ref) || isHPA(ref) || ref.Kind == "PodDisruptionBudget" || ref.Kind == "ResourceQuota") {
			return nil, fmt.Errorf("%s: namespaced object without a namespace, and no release namespace given", ref)
		}
		switch {
		case isDeployment(ref):
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
				return nil, fmt.Errorf("%s: read Deployment: %w", ref, err)
			}
			d.Namespace = ns
			deps = append(deps, &deploymentInput{obj: obj, rendered: d,
				entry: &DeploymentPreflight{Namespace: ns, Name: d.Name}})
		case ref.Group == "policy" && ref.Kind == "PodDisruptionBudget":
			pdb := policyv1.PodDisruptionBudget{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pdb); err != nil {
				return nil, fmt.Errorf("%s: read PodDisruptionBudget: %w", ref, err)
			}
			pdb.Namespace = ns
			p.renderedPDBs = append(p.renderedPDBs, pdb)
		case ref.Group == "" && ref.Kind == "ResourceQuota":
			q := corev1.ResourceQuota{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &q); err != nil {
				return nil, fmt.Errorf("%s: read ResourceQuota: %w", ref, err)
			}
			q.Namespace = ns
			p.renderedQuotas = append(p.renderedQuotas, q)
		case isHPA(ref):
			if k, ok := hpaTarget(obj, ns); ok {
				minR, found, _ := unstructured.NestedInt64(obj.Object, "spec", "minReplicas")
				if !found {
					minR = 1
				}
				p.renderedHPAs = append(p.renderedHPAs, hpaInfo{name: obj.GetName(), namespace: ns, target: k.name, minReplicas: int32(minR)})
			}
		}
	}
	if (p.opts.MaxSurge != nil || p.opts.MaxUnavailable != nil) && len(deps) == 0 {
		p.note("--max-surge/--max-unavailable given but the release has no Deployment")
	}
	return deps, nil
}

// prepare finds the live Deployment, whether the template changes, the
// replica count and the strategy.
func (p *preflighter) prepare(ctx context.Context, d *deploymentInput) error {
	e := d.entry
	ref := RefOf(d.obj)
	ref.Namespace = e.Namespace
	if p.opts.Skip {
		// Nothing is read from the cluster: the replica count only
		// resolves the strategy's percentages for the report.
		e.Verdict = VerdictUnchecked
		e.Replicas, e.ReplicasFrom = ptr.Deref(d.rendered.Spec.Replicas, 1), "chart"
		if d.rendered.Spec.Replicas == nil {
			e.ReplicasFrom = "default"
		}
	} else {
		live, err := p.client.AppsV1().Deployments(e.Namespace).Get(ctx, e.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			e.Change = ChangeNew
		case err != nil:
			return fmt.Errorf("preflight: get %s: %w", ref, err)
		default:
			d.live = live
			if e.Change, err = p.templateChange(ctx, d, ref); err != nil {
				return err
			}
		}
		if err := p.replicas(ctx, d); err != nil {
			return err
		}
	}
	chart, err := resolveStrategy(d.rendered.Spec.Strategy, nil, nil, e.Replicas)
	if err != nil {
		return &StrategyInputError{Object: ref.String(), Reason: err.Error()}
	}
	e.Strategy = chart
	d.strategy = chart
	if p.opts.MaxSurge != nil || p.opts.MaxUnavailable != nil {
		if chart.recreate() {
			return &StrategyInputError{Object: ref.String(), Reason: "--max-surge/--max-unavailable given, but the Deployment uses the Recreate strategy"}
		}
		eff, err := resolveStrategy(d.rendered.Spec.Strategy, p.opts.MaxSurge, p.opts.MaxUnavailable, e.Replicas)
		if err != nil {
			return &StrategyInputError{Object: ref.String(), Reason: err.Error()}
		}
		d.strategy = eff
		e.Overridden = true
		if !sameStrategy(eff, chart) {
			e.Effective = ptr.To(eff)
		}
	}
	if e.Change == ChangeUnchanged {
		e.Verdict = VerdictFits
		e.Message = "pod template unchanged: no new pods"
	}
	return nil
}

func sameStrategy(a, b Strategy) bool {
	return a.Type == b.Type && intOrPercent(a.MaxSurge) == intOrPercent(b.MaxSurge) && intOrPercent(a.MaxUnavailable) == intOrPercent(b.MaxUnavailable)
}

// resolveStrategy defaults a strategy as the API server does, applies the
// overrides, and resolves the pod counts as the Deployment controller does.
func resolveStrategy(s appsv1.DeploymentStrategy, maxSurge, maxUnavailable *intstr.IntOrString, replicas int32) (Strategy, error) {
	out := Strategy{Type: string(s.Type)}
	if out.Type == "" {
		out.Type = string(appsv1.RollingUpdateDeploymentStrategyType)
	}
	if out.recreate() {
		return out, nil
	}
	if out.Type != string(appsv1.RollingUpdateDeploymentStrategyType) {
		return out, fmt.Errorf("unknown strategy type %q", out.Type)
	}
	def := intstr.FromString("25%")
	out.MaxSurge, out.MaxUnavailable = ptr.To(def), ptr.To(def)
	if ru := s.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			out.MaxSurge = ptr.To(*ru.MaxSurge)
		}
		if ru.MaxUnavailable != nil {
			out.MaxUnavailable = ptr.To(*ru.MaxUnavailable)
		}
	}
	if maxSurge != nil {
		out.MaxSurge = ptr.To(*maxSurge)
	}
	if maxUnavailable != nil {
		out.MaxUnavailable = ptr.To(*maxUnavailable)
	}
	// As validation does: both may not be 0 (before rounding).
	if zeroIntOrPercent(*out.MaxSurge) && zeroIntOrPercent(*out.MaxUnavailable) {
		return out, fmt.Errorf("maxSurge and maxUnavailable may not both be 0")
	}
	if out.MaxUnavailable.Type == intstr.String {
		if n, err := strconv.Atoi(strings.TrimSuffix(out.MaxUnavailable.StrVal, "%")); err == nil && n > 100 {
			return out, fmt.Errorf("maxUnavailable %s is more than 100%%", out.MaxUnavailable.StrVal)
		}
	}
	surge, unavailable, err := deploymentutil.ResolveFenceposts(out.MaxSurge, out.MaxUnavailable, replicas)
	if err != nil {
		return out, fmt.Errorf("resolve maxSurge %s / maxUnavailable %s: %w", out.MaxSurge, out.MaxUnavailable, err)
	}
	out.Surge, out.Unavailable = surge, unavailable
	return out, nil
}

func zeroIntOrPercent(v intstr.IntOrString) bool {
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	return err == nil && n == 0
}

// templateChange compares the pod template the apply would produce (a
// server-side dry-run apply) with the live one.
func (p *preflighter) templateChange(ctx context.Context, d *deploymentInput, ref ObjectRef) (TemplateChange, error) {
	body := d.obj.DeepCopy()
	body.SetNamespace(ref.Namespace)
	for _, f := range []string{"resourceVersion", "uid", "managedFields", "creationTimestamp", "generation", "selfLink", "deletionTimestamp"} {
		unstructured.RemoveNestedField(body.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(body.Object, "status")
	data, err := json.Marshal(body.Object)
	if err != nil {
		return "", fmt.Errorf("preflight: encode %s: %w", ref, err)
	}
	dry, err := p.client.AppsV1().Deployments(ref.Namespace).Patch(ctx, ref.Name, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true), DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		p.note("could not dry-run the apply of %s (%v): its pod template is taken as changed", ref, err)
		return ChangeChanged, nil
	}
	if apiequality.Semantic.DeepEqual(dry.Spec.Template, d.live.Spec.Template) {
		return ChangeUnchanged, nil
	}
	return ChangeChanged, nil
}

// replicas sets the replica count the rollout runs with.
func (p *preflighter) replicas(ctx context.Context, d *deploymentInput) error {
	e := d.entry
	hpa, err := p.hpaFor(ctx, e.Namespace, e.Name)
	if err != nil {
		return err
	}
	switch {
	case hpa != nil && d.live != nil:
		e.Replicas = ptr.Deref(d.live.Spec.Replicas, 1)
		e.ReplicasFrom = "live (HorizontalPodAutoscaler " + hpa.name + ")"
	case hpa != nil:
		e.Replicas = max(1, hpa.minReplicas)
		e.ReplicasFrom = "HorizontalPodAutoscaler " + hpa.name + " minReplicas"
	case d.rendered.Spec.Replicas != nil:
		e.Replicas = *d.rendered.Spec.Replicas
		e.ReplicasFrom = "chart"
	case d.live != nil:
		e.Replicas = ptr.Deref(d.live.Spec.Replicas, 1)
		e.ReplicasFrom = "live"
	default:
		e.Replicas = 1
		e.ReplicasFrom = "default"
	}
	return nil
}

// hpaFor returns the HPA that scales Deployment ns/name: a rendered one,
// else a live one (not one of this release's that is about to be pruned).
func (p *preflighter) hpaFor(ctx context.Context, ns, name string) (*hpaInfo, error) {
	for i, h := range p.renderedHPAs {
		if h.namespace == ns && h.target == name {
			return &p.renderedHPAs[i], nil
		}
	}
	live, ok := p.liveHPAs[ns]
	if !ok {
		list, err := p.client.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			p.note("HorizontalPodAutoscalers in namespace %s not readable (%v): replica counts come from the chart", ns, err)
		case err != nil:
			return nil, fmt.Errorf("preflight: list HorizontalPodAutoscalers in namespace %s: %w", ns, err)
		default:
			for _, h := range list.Items {
				gv, _ := schema.ParseGroupVersion(h.Spec.ScaleTargetRef.APIVersion)
				if h.Spec.ScaleTargetRef.Kind != "Deployment" || gv.Group != "apps" {
					continue
				}
				live = append(live, hpaInfo{name: h.Name, namespace: ns, target: h.Spec.ScaleTargetRef.Name,
					minReplicas: ptr.Deref(h.Spec.MinReplicas, 1), labels: h.Labels})
			}
		}
		p.liveHPAs[ns] = live
	}
	for i, h := range live {
		if h.target != name || p.beingPruned(h.labels, "HorizontalPodAutoscaler", h.name, ns) {
			continue
		}
		return &live[i], nil
	}
	return nil, nil
}

// beingPruned reports whether a live object carries this release's labels
// but is not rendered: the deploy prunes it.
func (p *preflighter) beingPruned(l map[string]string, kind, name, ns string) bool {
	if p.opts.Release == "" || l[LabelManagedBy] != ManagedByVllmctl || l[LabelInstance] != p.opts.Release {
		return false
	}
	switch kind {
	case "HorizontalPodAutoscaler":
		for _, h := range p.renderedHPAs {
			if h.name == name && h.namespace == ns {
				return false
			}
		}
	case "PodDisruptionBudget":
		for _, b := range p.renderedPDBs {
			if b.Name == name && b.Namespace == ns {
				return false
			}
		}
	}
	return true
}

// loadCluster lists nodes and the pods holding resources on them.
func (p *preflighter) loadCluster(ctx context.Context) error {
	if p.clusterLoaded {
		return nil
	}
	p.clusterLoaded = true
	var nodes []corev1.Node
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := p.client.CoreV1().Nodes().List(ctx, opts)
		if apierrors.IsForbidden(err) {
			p.note("nodes not readable (%v): node capacity not checked, only quotas", err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("preflight: list nodes: %w", err)
		}
		nodes = append(nodes, list.Items...)
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	pods, err := p.listPods(ctx, "")
	if apierrors.IsForbidden(err) {
		p.note("pods of all namespaces not readable (%v): node capacity not checked, only quotas", err)
		return nil
	}
	if err != nil {
		return err
	}
	p.allPods = map[string][]*corev1.Pod{}
	used := map[string]resVec{}
	deleting := 0
	for _, pod := range pods {
		p.allPods[pod.Namespace] = append(p.allPods[pod.Namespace], pod)
		if podHoldsResources(pod) {
			if pod.DeletionTimestamp != nil {
				deleting++
			}
			if used[pod.Spec.NodeName] == nil {
				used[pod.Spec.NodeName] = resVec{}
			}
			used[pod.Spec.NodeName].add(podRequests(&pod.Spec))
		}
	}
	p.nodesKnown = true
	p.nodeCount = len(nodes)
	var excluded []string
	for i := range nodes {
		n := &nodes[i]
		if ok, why := nodeUsable(n); !ok {
			excluded = append(excluded, n.Name+" "+why)
			continue
		}
		alloc := vecOf(n.Status.Allocatable)
		free := alloc.clone()
		free.sub(used[n.Name])
		p.nodes = append(p.nodes, &nodeState{node: n, alloc: alloc, free: free})
	}
	sort.Slice(p.nodes, func(i, j int) bool { return p.nodes[i].node.Name < p.nodes[j].node.Name })
	if len(excluded) > 0 {
		sort.Strings(excluded)
		p.note("nodes left out: %s", strings.Join(excluded, ", "))
	}
	if deleting > 0 {
		p.note("pods being deleted still count against their nodes until they are gone: %d", deleting)
	}
	return nil
}

// listPods lists the pods of ns ("" for all namespaces) that are not
// Succeeded or Failed.
func (p *preflighter) listPods(ctx context.Context, ns string) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	opts := metav1.ListOptions{Limit: 500, FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"}
	for {
		list, err := p.client.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			if apierrors.IsForbidden(err) {
				return nil, err
			}
			if ns == "" {
				return nil, fmt.Errorf("preflight: list pods: %w", err)
			}
			return nil, fmt.Errorf("preflight: list pods in namespace %s: %w", ns, err)
		}
		for i := range list.Items {
			pod := &list.Items[i]
			if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			out = append(out, pod)
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

// podsIn returns the pods of ns that are not terminated.
func (p *preflighter) podsIn(ctx context.Context, ns string) ([]*corev1.Pod, error) {
	if p.allPods != nil {
		return p.allPods[ns], nil
	}
	if pods, ok := p.nsPods[ns]; ok {
		return pods, nil
	}
	pods, err := p.listPods(ctx, ns)
	if apierrors.IsForbidden(err) {
		p.note("pods in namespace %s not readable (%v): the room old pods free is not counted", ns, err)
		pods, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	p.nsPods[ns] = pods
	return pods, nil
}

// quotasIn returns the ResourceQuotas of ns as they will be once the
// release is applied: the live ones, with the hard limits of the rendered
// ones (applied before the pods roll). A quota's usage is its status; for
// a quota or key that has none yet it is computed from the namespace's
// pods.
func (p *preflighter) quotasIn(ctx context.Context, ns string) ([]*quotaState, error) {
	if q, ok := p.quotas[ns]; ok {
		return q, nil
	}
	byName := map[string]*corev1.ResourceQuota{}
	list, err := p.client.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		p.note("ResourceQuotas in namespace %s not readable (%v): only the rendered ones are checked", ns, err)
	case err != nil:
		return nil, fmt.Errorf("preflight: list ResourceQuotas in namespace %s: %w", ns, err)
	default:
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
	}
	for _, r := range p.renderedQuotas {
		if r.Namespace != ns {
			continue
		}
		q := r.DeepCopy()
		if live, ok := byName[r.Name]; ok {
			q.Status = *live.Status.DeepCopy()
		} else {
			q.Status = corev1.ResourceQuotaStatus{}
		}
		q.Status.Hard = q.Spec.Hard
		byName[r.Name] = q
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []*quotaState
	for _, name := range names {
		q := byName[name]
		if err := p.fillQuotaUsage(ctx, q); err != nil {
			return nil, err
		}
		out = append(out, newQuotaState(q))
	}
	p.quotas[ns] = out
	return out, nil
}

// fillQuotaUsage computes, from the namespace's pods, the usage of the
// keys of q whose status has none (a quota not created yet, or a key just
// added).
func (p *preflighter) fillQuotaUsage(ctx context.Context, q *corev1.ResourceQuota) error {
	var missing []corev1.ResourceName
	for key := range q.Spec.Hard {
		if _, ok := quotaKeyOf(key); !ok {
			continue
		}
		if _, ok := q.Status.Used[key]; !ok {
			missing = append(missing, key)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	pods, err := p.podsIn(ctx, q.Namespace)
	if err != nil {
		return err
	}
	if q.Status.Used == nil {
		q.Status.Used = corev1.ResourceList{}
	}
	for _, key := range missing {
		k, _ := quotaKeyOf(key)
		var sum int64
		for _, pod := range pods {
			if quotaApplies(q, &pod.Spec) {
				sum += usageOf(&pod.Spec).amount(k)
			}
		}
		q.Status.Used[key] = *resource.NewMilliQuantity(sum, resource.DecimalSI)
	}
	return nil
}

// pdbsIn returns the PodDisruptionBudgets that will hold in ns after the
// apply: the rendered ones, and the live ones the apply neither replaces
// nor prunes.
func (p *preflighter) pdbsIn(ctx context.Context, ns string) ([]policyv1.PodDisruptionBudget, error) {
	live, ok := p.livePDBs[ns]
	if !ok {
		list, err := p.client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			p.note("PodDisruptionBudgets in namespace %s not readable (%v): only the rendered ones count", ns, err)
		case err != nil:
			return nil, fmt.Errorf("preflight: list PodDisruptionBudgets in namespace %s: %w", ns, err)
		default:
			live = list.Items
		}
		p.livePDBs[ns] = live
	}
	var out []policyv1.PodDisruptionBudget
	rendered := map[string]bool{}
	for _, b := range p.renderedPDBs {
		if b.Namespace == ns {
			out = append(out, b)
			rendered[b.Name] = true
		}
	}
	for _, b := range live {
		if !rendered[b.Name] && !p.beingPruned(b.Labels, "PodDisruptionBudget", b.Name, ns) {
			out = append(out, b)
		}
	}
	return out, nil
}

// disruptionsAllowed returns how many of replicas pods may be unavailable
// at once under the PDBs matching podLabels (computed from their spec as
// the disruption controller does, both forms rounding up), and the PDB
// that sets the limit; -1 when no PDB matches.
func disruptionsAllowed(pdbs []policyv1.PodDisruptionBudget, podLabels map[string]string, replicas int32) (int32, string, error) {
	allowed, by := int32(-1), ""
	for _, b := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil {
			return 0, "", fmt.Errorf("PodDisruptionBudget %s/%s: selector: %w", b.Namespace, b.Name, err)
		}
		if b.Spec.Selector == nil || !sel.Matches(labels.Set(podLabels)) {
			continue
		}
		n := replicas
		switch {
		case b.Spec.MaxUnavailable != nil:
			v, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MaxUnavailable, int(replicas), true)
			if err != nil {
				return 0, "", fmt.Errorf("PodDisruptionBudget %s/%s: maxUnavailable: %w", b.Namespace, b.Name, err)
			}
			n = int32(v)
		case b.Spec.MinAvailable != nil:
			v, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MinAvailable, int(replicas), true)
			if err != nil {
				return 0, "", fmt.Errorf("PodDisruptionBudget %s/%s: minAvailable: %w", b.Namespace, b.Name, err)
			}
			n = replicas - int32(v)
		}
		n = max(0, min(n, replicas))
		if allowed < 0 || n < allowed {
			allowed, by = n, b.Name
		}
	}
	return allowed, by, nil
}

// oldPod is a pod of the live Deployment that the rollout replaces.
type oldPod struct {
	node  string
	usage podUsage
}

// stepResult is the outcome of one rollout step's checks.
type stepResult struct {
	checks []CapacityCheck
	// placeable and admitted are how many of the step's pods the nodes can
	// place and the quotas admit.
	placeable, admitted int64
	pods                int64
}

// unlimited stands for "not limited" (no quota, nodes not checked).
const unlimited = int64(1) << 40

func (s stepResult) progress() bool { return min(s.placeable, s.admitted) >= 1 }
func (s stepResult) full() bool     { return min(s.placeable, s.admitted) >= s.pods }

// evalContext is what evaluating one Deployment needs.
type evalContext struct {
	d       *deploymentInput
	per     podUsage
	matches []*nodeState
	quotas  []*quotaState
	old     []oldPod
}

// evaluate checks one Deployment whose pod template changes.
func (p *preflighter) evaluate(ctx context.Context, d *deploymentInput) error {
	e := d.entry
	if err := p.loadCluster(ctx); err != nil {
		return err
	}
	spec := &d.rendered.Spec.Template.Spec
	ec := &evalContext{d: d, per: usageOf(spec)}
	e.PerPod = ec.per.requests.strings()
	if d.rendered.Spec.Paused {
		e.Verdict, e.Message = VerdictFits, "paused: the rollout waits until it is resumed"
		return nil
	}
	if e.Replicas == 0 {
		e.Verdict, e.Message = VerdictFits, "0 replicas: no pods"
		return nil
	}
	for _, n := range p.nodes {
		if nodeMatches(n.node, spec) {
			ec.matches = append(ec.matches, n)
		}
	}
	quotas, err := p.quotasIn(ctx, e.Namespace)
	if err != nil {
		return err
	}
	for _, q := range quotas {
		if quotaApplies(q.quota, spec) {
			ec.quotas = append(ec.quotas, q)
		}
	}
	if d.live != nil {
		if ec.old, err = p.oldPods(ctx, d.live); err != nil {
			return err
		}
	}

	if p.impossiblePod(ec) {
		return nil
	}
	s := d.strategy
	switch {
	case d.live == nil:
		r := p.step(ec, StepCreate, int64(e.Replicas), 0)
		e.Checks = append(e.Checks, r.checks...)
		if !r.full() {
			p.conclude(e, VerdictImpossible, fmt.Sprintf("a new Deployment needs room for all its pods (%d) at once; no strategy changes that", e.Replicas))
			return nil
		}
		p.reserve(ec, int64(e.Replicas))
		e.Verdict = VerdictFits
	case s.recreate():
		r := p.step(ec, StepRecreate, int64(e.Replicas), int64(len(ec.old)))
		e.Checks = append(e.Checks, r.checks...)
		if !r.full() {
			p.conclude(e, VerdictImpossible, fmt.Sprintf("Recreate: the %d new pods do not fit even once every old pod is gone", e.Replicas))
			return nil
		}
		e.Verdict = VerdictFits
	default:
		return p.rolling(ctx, ec)
	}
	return nil
}

// rolling evaluates a RollingUpdate of a live Deployment and applies the
// surge policy.
func (p *preflighter) rolling(ctx context.Context, ec *evalContext) error {
	e, s := ec.d.entry, ec.d.strategy
	if s.Surge > 0 {
		r := p.step(ec, StepSurge, int64(s.Surge), 0)
		e.Checks = append(e.Checks, r.checks...)
		if r.progress() {
			e.Verdict = VerdictFits
			fit := min(r.placeable, r.admitted, int64(s.Surge))
			if fit < int64(s.Surge) {
				e.Message = fmt.Sprintf("%d of %d surge pods fit now; the others wait for old pods to go", fit, s.Surge)
			}
			p.reserve(ec, fit)
			return nil
		}
	}
	if s.Unavailable > 0 {
		r := p.step(ec, StepReplace, int64(s.Unavailable), int64(s.Unavailable))
		if r.progress() {
			e.Checks = append(e.Checks, r.checks...)
			e.Verdict = VerdictFits
			if s.Surge > 0 {
				e.Message = fmt.Sprintf("surge pods do not fit; the rollout proceeds by replacing up to %d old pods at a time (maxUnavailable)", s.Unavailable)
			}
			return nil
		}
		if s.Surge == 0 {
			e.Checks = append(e.Checks, r.checks...)
		}
	}
	// Not even one new pod can start. Would removing every old pod help?
	all := int64(len(ec.old))
	if final := p.step(ec, StepReplace, max(all, 1), all); !final.progress() {
		e.Checks = append(e.Checks, final.checks...)
		p.conclude(e, VerdictImpossible, "a new pod does not fit even with every old pod gone")
		return nil
	}
	e.Verdict = VerdictSurgeBlocked
	reason := blockedReason(e.Checks)
	switch {
	case p.policy == SurgePolicyOff:
		e.Message = "surge blocked (" + reason + "); surge policy off: applying anyway, the rollout will stall"
		return nil
	case p.policy == SurgePolicyStrict:
		p.conclude(e, VerdictSurgeBlocked, "surge blocked ("+reason+"); surge policy strict never changes the strategy: free capacity, or pass --max-surge 0 --max-unavailable 1 to replace pods one at a time")
		return nil
	case e.Overridden:
		p.conclude(e, VerdictSurgeBlocked, "surge blocked ("+reason+") with the --max-surge/--max-unavailable given; the surge policy does not change values the user set")
		return nil
	case e.Replicas <= 1:
		p.conclude(e, VerdictSurgeBlocked, "surge blocked ("+reason+"); with 1 replica, maxUnavailable 1 takes the service down, which surge policy auto does not do: pass --max-surge 0 --max-unavailable 1 to accept that, or free capacity")
		return nil
	}
	pdbs, err := p.pdbsIn(ctx, e.Namespace)
	if err != nil {
		return err
	}
	allowed, by, err := disruptionsAllowed(pdbs, ec.d.rendered.Spec.Template.Labels, e.Replicas)
	if err != nil {
		return fmt.Errorf("preflight: Deployment %s/%s: %w", e.Namespace, e.Name, err)
	}
	limit, limitBy := e.Replicas-1, "keeping one replica serving"
	if allowed >= 0 && allowed < limit {
		limit, limitBy = allowed, fmt.Sprintf("PodDisruptionBudget %s allows %d of %d pods down", by, allowed, e.Replicas)
	}
	for k := max(1, s.Unavailable+1); k <= limit; k++ {
		r := p.step(ec, StepReplace, int64(k), int64(k))
		if !r.progress() {
			continue
		}
		e.Checks = append(e.Checks, r.checks...)
		eff := s
		eff.MaxSurge, eff.MaxUnavailable = ptr.To(intstr.FromInt32(0)), ptr.To(intstr.FromInt32(k))
		eff.Surge, eff.Unavailable = 0, k
		e.Effective, e.Adjusted = &eff, true
		e.Message = fmt.Sprintf("%s (%s)", changeText(*e, "surge policy auto"), reason)
		return nil
	}
	p.conclude(e, VerdictSurgeBlocked, fmt.Sprintf("surge blocked (%s), and replacing pods in place needs more than %d unavailable at once (%s)", reason, limit, limitBy))
	return nil
}

// conclude marks e as refused unless the policy only reports.
func (p *preflighter) conclude(e *DeploymentPreflight, v Verdict, msg string) {
	e.Verdict, e.Message = v, msg
	if p.policy != SurgePolicyOff {
		e.refusal = true
	}
}

// blockedReason names the first failing check, for messages.
func blockedReason(checks []CapacityCheck) string {
	for _, c := range checks {
		if c.OK {
			continue
		}
		where := "quota " + c.Quota
		if c.Quota == "" {
			where = "nodes " + nodeNames(c.Nodes)
		}
		return fmt.Sprintf("%s: need %s, free %s on %s", c.Resource, c.Needed, c.Free, where)
	}
	return "no room"
}

// impossiblePod checks that one new pod could ever fit: some matching node
// is large enough, and every quota's hard limit admits it. It concludes
// and returns true when not.
func (p *preflighter) impossiblePod(ec *evalContext) bool {
	e := ec.d.entry
	var checks []CapacityCheck
	var msg string
	if p.nodesKnown {
		switch {
		case len(ec.matches) == 0:
			checks = append(checks, CapacityCheck{Step: StepPod, Pods: 1, Resource: string(corev1.ResourcePods), Needed: "1", Free: "0",
				Short: "1", Where: fmt.Sprintf("nodes matching the pod's nodeSelector, affinity and tolerations (none of %d; %d Ready and schedulable)", p.nodeCount, len(p.nodes))})
			msg = "no Ready, schedulable node matches the pod's nodeSelector, required node affinity and tolerations"
		default:
			fitsSome := false
			for _, n := range ec.matches {
				fitsSome = fitsSome || fitsIn(n.alloc, ec.per.requests)
			}
			if !fitsSome {
				names := matchNames(ec.matches)
				for _, r := range ec.per.requests.names() {
					best, bestNode := int64(0), ""
					for _, n := range ec.matches {
						if n.alloc[r] > best || bestNode == "" {
							best, bestNode = n.alloc[r], n.node.Name
						}
					}
					c := CapacityCheck{Step: StepPod, Pods: 1, Resource: string(r), Needed: formatAmount(r, ec.per.requests[r]),
						Free: formatAmount(r, best), Where: "allocatable of the largest matching node " + bestNode, Nodes: names, OK: best >= ec.per.requests[r]}
					if !c.OK {
						c.Short = formatAmount(r, ec.per.requests[r]-best)
					}
					checks = append(checks, c)
				}
				msg = "one pod needs more than any matching node has allocatable"
			}
		}
	}
	for _, q := range ec.quotas {
		for _, key := range q.keys() {
			k, _ := quotaKeyOf(key)
			need := ec.per.amount(k)
			if need == 0 || q.hard[key] >= need {
				continue
			}
			checks = append(checks, CapacityCheck{Step: StepPod, Pods: 1, Resource: string(key), Needed: formatAmount(k.name, need),
				Free: formatAmount(k.name, q.hard[key]), Short: formatAmount(k.name, need-q.hard[key]),
				Where: "hard limit of quota " + q.quota.Name, Quota: q.quota.Name})
			if msg == "" {
				msg = "one pod needs more than the hard limit of quota " + q.quota.Name
			}
		}
	}
	if msg == "" {
		return false
	}
	e.Checks = append(e.Checks, checks...)
	p.conclude(e, VerdictImpossible, msg)
	return true
}

func matchNames(nodes []*nodeState) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.node.Name
	}
	return out
}

// oldPods returns the pods of the live Deployment that the rollout
// replaces: those matching its selector that are not terminated nor being
// deleted.
func (p *preflighter) oldPods(ctx context.Context, live *appsv1.Deployment) ([]oldPod, error) {
	if live.Spec.Selector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(live.Spec.Selector)
	if err != nil {
		// The API server validated the live selector; should it not
		// parse, there are no old pods to count.
		return nil, nil
	}
	pods, err := p.podsIn(ctx, live.Namespace)
	if err != nil {
		return nil, err
	}
	var out []oldPod
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, oldPod{node: pod.Spec.NodeName, usage: usageOf(&pod.Spec)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].node < out[j].node })
	return out, nil
}

// step checks room for n new pods, after `freed` old pods are removed
// (spread over their nodes, one per node in turn).
func (p *preflighter) step(ec *evalContext, step string, n, freed int64) stepResult {
	res := stepResult{pods: n, placeable: unlimited, admitted: unlimited}
	per := ec.per.requests
	removed := ec.old
	if freed < int64(len(removed)) {
		removed = spread(ec.old, freed)
	}
	if freed == 0 {
		removed = nil
	}
	var qual string
	switch step {
	case StepSurge:
		qual = fmt.Sprintf("%d surge pod%s next to the old ones", n, plural(n))
	case StepReplace:
		qual = fmt.Sprintf("%d new pod%s after removing %d old", n, plural(n), len(removed))
	case StepRecreate:
		qual = fmt.Sprintf("%d new pod%s after removing all %d old", n, plural(n), len(removed))
	default:
		qual = fmt.Sprintf("%d new pod%s", n, plural(n))
	}

	if p.nodesKnown {
		type room struct {
			name string
			free resVec
		}
		rooms := make([]room, 0, len(ec.matches))
		for _, nd := range ec.matches {
			free := nd.free.clone()
			for _, o := range removed {
				if o.node == nd.node.Name {
					free.add(o.usage.requests)
				}
			}
			rooms = append(rooms, room{name: nd.node.Name, free: free})
		}
		names := matchNames(ec.matches)
		res.placeable = 0
		for _, rm := range rooms {
			res.placeable += fitCount(rm.free, per)
		}
		for _, r := range per.names() {
			var usable, most int64
			for _, rm := range rooms {
				f := max(rm.free[r], 0)
				usable += f / per[r] * per[r]
				most = max(most, f)
			}
			if r == corev1.ResourcePods {
				usable = min(res.placeable, unlimited) * 1000
			}
			c := CapacityCheck{Step: step, Pods: n, Resource: string(r), Needed: formatAmount(r, n*per[r]), Free: formatAmount(r, usable),
				Where: "nodes " + nodeNames(names) + " (" + qual + ")", Nodes: names, MostOnOneNode: formatAmount(r, most), OK: usable >= n*per[r]}
			if !c.OK {
				c.Short = formatAmount(r, n*per[r]-usable)
			}
			res.checks = append(res.checks, c)
		}
	}

	for _, q := range ec.quotas {
		for _, key := range q.keys() {
			k, _ := quotaKeyOf(key)
			need := ec.per.amount(k)
			if need == 0 {
				continue
			}
			free := q.free[key]
			for _, o := range removed {
				free += o.usage.amount(k)
			}
			res.admitted = min(res.admitted, max(free, 0)/need)
			c := CapacityCheck{Step: step, Pods: n, Resource: string(key), Needed: formatAmount(k.name, n*need), Free: formatAmount(k.name, max(free, 0)),
				Where: fmt.Sprintf("quota %s (hard %s, used %s; %s)", q.quota.Name, formatAmount(k.name, q.hard[key]), formatAmount(k.name, q.used[key]), qual),
				Quota: q.quota.Name, OK: free >= n*need}
			if !c.OK {
				c.Short = formatAmount(k.name, n*need-max(free, 0))
			}
			res.checks = append(res.checks, c)
		}
	}
	return res
}

// spread picks n of the old pods, one per node in turn (the pods are
// sorted by node), as the Deployment controller spreads its deletions.
func spread(old []oldPod, n int64) []oldPod {
	byNode := map[string][]oldPod{}
	var order []string
	for _, o := range old {
		if _, ok := byNode[o.node]; !ok {
			order = append(order, o.node)
		}
		byNode[o.node] = append(byNode[o.node], o)
	}
	var out []oldPod
	for int64(len(out)) < n {
		for _, node := range order {
			if len(byNode[node]) > 0 && int64(len(out)) < n {
				out = append(out, byNode[node][0])
				byNode[node] = byNode[node][1:]
			}
		}
	}
	return out
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// reserve takes room for n new pods (which started next to the old ones)
// out of the matching nodes and the quotas, so that the Deployments checked
// after this one do not count it as free.
func (p *preflighter) reserve(ec *evalContext, n int64) {
	left := n
	for _, nd := range ec.matches {
		k := min(fitCount(nd.free, ec.per.requests), left)
		nd.free.sub(ec.per.requests.scaled(k))
		left -= k
	}
	for _, q := range ec.quotas {
		for _, key := range q.keys() {
			k, _ := quotaKeyOf(key)
			q.free[key] -= n * ec.per.amount(k)
		}
	}
}
