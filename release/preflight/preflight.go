package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/object"
)

// fieldManager is the server-side apply field manager of the dry run that
// finds whether a pod template changes: vllmctl's own (cluster.FieldManager,
// which this package cannot import), so that the dry run sees what the
// apply will do.
const fieldManager = "vllmctl"

// Options tune [Run].
type Options struct {
	// Namespace is the release namespace, for objects that have none.
	Namespace string
	// Release is the release name. When set, live PodDisruptionBudgets and
	// HorizontalPodAutoscalers that carry this release's labels but are not
	// among the rendered objects are ignored: they are about to be pruned.
	Release string
	// Policy is the surge policy; "" is auto.
	Policy SurgePolicy
	// Nodes, when not nil, are every node of the cluster as another check
	// of the same deploy listed them (the model-fit preflight): each
	// selector's nodes are taken from them instead of listed again.
	Nodes []*corev1.Node
	// MaxSurge and MaxUnavailable, when set (--max-surge,
	// --max-unavailable), replace the chart's values for this rollout in
	// every Deployment of the release. The policy never changes a value the
	// user gave.
	MaxSurge       *intstr.IntOrString
	MaxUnavailable *intstr.IntOrString
	// Overrides, when set, gives one Deployment's overrides (a canary's
	// surge for the Deployments it holds); both nil leaves MaxSurge and
	// MaxUnavailable in force for it.
	Overrides func(namespace, name string) (maxSurge, maxUnavailable *intstr.IntOrString)
	// Skip checks nothing: the report only carries the overrides.
	Skip bool
	// OnHPAs, when set, receives the live HorizontalPodAutoscalers of each
	// namespace the preflight listed, so that the operation need not list
	// them again.
	OnHPAs func(namespace string, hpas []autoscalingv2.HorizontalPodAutoscaler)
	// Known, when set, gives what the operation already read of a
	// Deployment (ok true): its live copy (nil: absent) and the outcome of
	// the server-side dry-run apply of the rendered one (nil: the dry run
	// did not validate it). The preflight then neither reads nor dry-runs
	// that Deployment itself.
	Known func(namespace, name string) (live, applied *unstructured.Unstructured, ok bool)
	// PodClient, when set, is a podwire.Requests client the pods are
	// listed through (nil: the client's full decoding).
	PodClient rest.Interface
	// HPAs, when set, gives the live HorizontalPodAutoscalers of a
	// namespace the operation already listed (ok true): the preflight then
	// does not list them again.
	HPAs func(namespace string) (hpas []autoscalingv2.HorizontalPodAutoscaler, ok bool)
}

// Run checks, before anything is applied, that the rollout of every
// Deployment among objs can proceed with every pod it adds, and that the
// pods of every engine group fit at once, and applies the surge policy.
//
// Whether a template changes is found by a server-side dry-run apply
// (field manager vllmctl, forced) compared with the live Deployment; when
// the dry run fails the template is taken as changed. A new Deployment
// needs room for all its replicas. A live one whose replica count goes up
// (the rendered replicas, or an HPA's minReplicas above the live count)
// needs room for the added pods next to every running pod, whether its
// template changes or not: no strategy helps there, so a shortage refuses
// under auto as under strict. A changed template then needs room for the
// surge pods too, next to every old pod and the added ones; with
// maxUnavailable ≥ 1 it can instead proceed by replacing old pods in the
// room they free. Scale-downs need nothing. Room is per node:
// allocatable minus the requests of the pods bound there that are not
// Succeeded or Failed (pods being deleted still count: they hold their
// resources until they are gone), on Ready, schedulable nodes that match
// the pod's nodeSelector, required node affinity and tolerations, and in
// every ResourceQuota of the namespace that counts the pods (hard minus
// used). Deployments are checked in order and what one reserves is not
// free for the next. HPA-targeted Deployments use the live replica count,
// or the HPA's minReplicas when it is higher (the HPA scales up to it).
//
// The engine groups among objs (StatefulSets labelled [GroupLabel]) are
// checked after the Deployments, in index order, against what they left
// free: each group's new pods must all fit at once (gang fit), one per
// distinct candidate node under a required podAntiAffinity on
// kubernetes.io/hostname, with the group's own live pods counted as gone
// when its template changes (found by a dry-run apply, as for a
// Deployment), and within the quotas; each placed group reserves its
// nodes and quota before the next. A group that does not fit is refused
// under auto and strict alike; under off groups are not checked.
//
// The report is returned even with an error. A refusal is an *Error,
// invalid overrides a *StrategyInputError (both exit code 2); API errors
// are wrapped. Nodes, pods, quotas, PodDisruptionBudgets or HPAs the user
// may not read are left out, with a note.
func Run(ctx context.Context, client kubernetes.Interface, objs []*unstructured.Unstructured, opts Options) (*Report, error) {
	policy, err := ParseSurgePolicy(string(opts.Policy))
	if err != nil {
		return nil, err
	}
	p := &preflighter{
		client: client, opts: opts, policy: policy,
		report:   &Report{Policy: policy, Skipped: opts.Skip, Deployments: []DeploymentPreflight{}, namespace: opts.Namespace},
		quotas:   map[string][]*quotaState{},
		livePDBs: map[string][]policyv1.PodDisruptionBudget{},
		liveHPAs: map[string][]hpaInfo{},
		nsPods:   map[string][]*corev1.Pod{},
		nsListed: map[string]bool{},
		nodeSets: map[string]*nodeSet{}, nodeByName: map[string]*nodeState{},
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
			if d.entry.Change == ChangeUnchanged && d.added == 0 {
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
	if err := p.checkGroups(ctx); err != nil {
		return p.report, err
	}
	var groups []GroupPreflight
	for _, g := range p.report.Groups {
		if g.refusal {
			groups = append(groups, g)
		}
	}
	if len(refused) > 0 || len(groups) > 0 {
		return p.report, &Error{Policy: policy, Refused: refused, RefusedGroups: groups, Report: p.report}
	}
	return p.report, nil
}

// preflighter holds what one Run call learned about the cluster.
type preflighter struct {
	client kubernetes.Interface
	opts   Options
	policy SurgePolicy
	report *Report

	renderedPDBs   []policyv1.PodDisruptionBudget
	renderedHPAs   []hpaInfo
	renderedQuotas []corev1.ResourceQuota
	// groups are the rendered engine groups, checked after the
	// Deployments.
	groups []*groupInput

	// nodeSets are the nodes listed, by label selector; nodeByName each
	// listed node's state. nodesUnreadable and podsUnreadable are set when
	// nodes or pods of all namespaces could not be listed: node checks are
	// then left out.
	nodeSets        map[string]*nodeSet
	nodeByName      map[string]*nodeState
	nodesUnreadable bool
	podsUnreadable  bool
	// nodeLists counts the per-node pod lists made; podsByNode holds every
	// pod once the pods of all namespaces were listed instead. deleting
	// counts the pods being deleted on the nodes read.
	nodeLists  int
	podsByNode map[string][]*corev1.Pod
	deleting   int
	// pending are the unbound pending pods of the cluster, once listed.
	pending []*corev1.Pod
	// nsPods are the pods of a namespace, once listed (nil when they may
	// not be read); nsListed the namespaces whose pods were listed whole,
	// which the lists of pods by node then leave out.
	nsPods   map[string][]*corev1.Pod
	nsListed map[string]bool
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
	annotations     map[string]string
}

// deploymentInput is one rendered Deployment being checked.
type deploymentInput struct {
	obj      *unstructured.Unstructured
	rendered *appsv1.Deployment
	live     *appsv1.Deployment
	entry    *DeploymentPreflight
	// strategy is the chart's strategy with the overrides.
	strategy Strategy
	// liveReplicas is the live Deployment's replica count, and added the
	// pods the rollout adds to it (entry.Replicas − liveReplicas when
	// higher, else 0); both 0 for a new Deployment.
	liveReplicas int32
	added        int32
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

// replaceNote sets the note that starts with prefix to prefix+value,
// adding it when there is none: a figure that grows as the preflight
// reads more keeps one note.
func (p *preflighter) replaceNote(prefix, value string) {
	for i, have := range p.report.Notes {
		if strings.HasPrefix(have, prefix) {
			p.report.Notes[i] = prefix + value
			return
		}
	}
	p.report.Notes = append(p.report.Notes, prefix+value)
}

// collect converts the rendered Deployments, PDBs and HPAs.
func (p *preflighter) collect(objs []*unstructured.Unstructured) ([]*deploymentInput, error) {
	var deps []*deploymentInput
	for _, obj := range objs {
		ref := object.RefOf(obj)
		ns := obj.GetNamespace()
		if ns == "" {
			ns = p.opts.Namespace
		}
		if ns == "" && (ref.IsDeployment() || ref.IsHPA() || ref.Kind == "PodDisruptionBudget" || ref.Kind == "ResourceQuota" || isGroup(obj)) {
			return nil, fmt.Errorf("%s: namespaced object without a namespace, and no release namespace given", ref)
		}
		switch {
		case ref.IsDeployment():
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
				return nil, fmt.Errorf("%s: read Deployment: %w", ref, err)
			}
			d.Namespace = ns
			deps = append(deps, &deploymentInput{obj: obj, rendered: d,
				entry: &DeploymentPreflight{Namespace: ns, Name: d.Name}})
		case isStatefulSet(ref):
			if !isGroup(obj) {
				if !p.opts.Skip {
					p.note("StatefulSet %s/%s is not an engine group (no %s label): its capacity is not checked", ns, obj.GetName(), GroupLabel)
				}
				continue
			}
			s := &appsv1.StatefulSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, s); err != nil {
				return nil, fmt.Errorf("%s: read StatefulSet: %w", ref, err)
			}
			p.groups = append(p.groups, newGroupInput(obj, s, ns))
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
		case ref.IsHPA():
			if target, ok := hpaTarget(obj); ok {
				minR, found, _ := unstructured.NestedInt64(obj.Object, "spec", "minReplicas")
				if !found {
					minR = 1
				}
				p.renderedHPAs = append(p.renderedHPAs, hpaInfo{name: obj.GetName(), namespace: ns, target: target, minReplicas: int32(minR)})
			}
		}
	}
	if (p.opts.MaxSurge != nil || p.opts.MaxUnavailable != nil) && len(deps) == 0 && !slices.ContainsFunc(objs, isGroup) {
		p.note("--max-surge/--max-unavailable given but the release has no Deployment and no engine group")
	}
	return deps, nil
}

// prepare finds the live Deployment, whether the template changes, the
// replica count and the strategy.
func (p *preflighter) prepare(ctx context.Context, d *deploymentInput) error {
	e := d.entry
	ref := object.RefOf(d.obj)
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
		if err := p.liveDeployment(ctx, d, ref); err != nil {
			return err
		}
		if err := p.replicas(ctx, d); err != nil {
			return err
		}
		if d.live != nil {
			d.liveReplicas = ptr.Deref(d.live.Spec.Replicas, 1)
			d.added = max(0, e.Replicas-d.liveReplicas)
		}
	}
	chart, err := d.resolve(nil, nil, e.Replicas)
	if err != nil {
		return err
	}
	e.Strategy = chart
	d.strategy = chart
	surge, unavailable := p.opts.MaxSurge, p.opts.MaxUnavailable
	if p.opts.Overrides != nil {
		if s, u := p.opts.Overrides(ref.Namespace, ref.Name); s != nil || u != nil {
			surge, unavailable = s, u
		}
	}
	if surge != nil || unavailable != nil {
		if chart.recreate() {
			return &StrategyInputError{Object: ref.String(), Reason: "--max-surge/--max-unavailable given, but the Deployment uses the Recreate strategy"}
		}
		eff, err := d.resolve(surge, unavailable, e.Replicas)
		if err != nil {
			return err
		}
		d.strategy = eff
		e.Overridden = true
		if !sameStrategy(eff, chart) {
			e.Effective = ptr.To(eff)
		}
	}
	if e.Change == ChangeUnchanged && d.added == 0 {
		e.Verdict = VerdictFits
		e.Message = msgUnchanged
		if e.Replicas < d.liveReplicas {
			e.Message = fmt.Sprintf("pod template unchanged, replicas %d→%d: no new pods", d.liveReplicas, e.Replicas)
		}
	}
	return nil
}

// resolve resolves the rendered Deployment's strategy with the overrides
// for replicas (resolveStrategy); an error is a *StrategyInputError naming
// the Deployment.
func (d *deploymentInput) resolve(maxSurge, maxUnavailable *intstr.IntOrString, replicas int32) (Strategy, error) {
	s, err := resolveStrategy(d.rendered.Spec.Strategy, maxSurge, maxUnavailable, replicas)
	if err != nil {
		ref := object.RefOf(d.obj)
		ref.Namespace = d.entry.Namespace
		return s, &StrategyInputError{Object: ref.String(), Reason: err.Error()}
	}
	return s, nil
}

// msgUnchanged is the message of a Deployment whose apply adds no pod.
const msgUnchanged = "pod template unchanged: no new pods"

// isStatefulSet reports whether ref is an apps StatefulSet.
func isStatefulSet(ref object.Ref) bool { return ref.Group == "apps" && ref.Kind == "StatefulSet" }

// isGroup reports whether obj is an engine group: a StatefulSet labelled
// GroupLabel.
func isGroup(obj *unstructured.Unstructured) bool {
	_, ok := obj.GetLabels()[GroupLabel]
	return ok && isStatefulSet(object.RefOf(obj))
}

// hpaTarget returns the name of the Deployment an HPA scales, if it scales
// one.
func hpaTarget(hpa *unstructured.Unstructured) (string, bool) {
	kind, _, _ := unstructured.NestedString(hpa.Object, "spec", "scaleTargetRef", "kind")
	name, _, _ := unstructured.NestedString(hpa.Object, "spec", "scaleTargetRef", "name")
	apiVersion, _, _ := unstructured.NestedString(hpa.Object, "spec", "scaleTargetRef", "apiVersion")
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind != "Deployment" || gv.Group != "apps" || name == "" {
		return "", false
	}
	return name, true
}
