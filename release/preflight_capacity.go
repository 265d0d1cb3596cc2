package release

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/klog/v2"
)

// This file holds the capacity arithmetic of the rollout preflight: pod
// requests the way Kubernetes computes them, node headroom, node placement
// rules and ResourceQuota accounting.

// ResourceGPU is the extended resource of NVIDIA GPUs.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// resVec is an amount of resources, every resource in milli-units (a pod
// count of 1 is 1000), so that cpu, memory, GPUs and pods share one
// arithmetic.
type resVec map[corev1.ResourceName]int64

func vecOf(list corev1.ResourceList) resVec {
	v := resVec{}
	for name, q := range list {
		v[name] = q.MilliValue()
	}
	return v
}

func (v resVec) add(o resVec) {
	for name, n := range o {
		v[name] += n
	}
}

func (v resVec) sub(o resVec) {
	for name, n := range o {
		v[name] -= n
	}
}

func (v resVec) maxWith(o resVec) {
	for name, n := range o {
		if n > v[name] {
			v[name] = n
		}
	}
}

func (v resVec) clone() resVec {
	c := make(resVec, len(v))
	for name, n := range v {
		c[name] = n
	}
	return c
}

func (v resVec) scaled(n int64) resVec {
	c := make(resVec, len(v))
	for name, x := range v {
		c[name] = x * n
	}
	return c
}

// names returns the resources v holds a positive amount of, GPUs first,
// then cpu, memory, the others sorted, and pods last.
func (v resVec) names() []corev1.ResourceName {
	var out []corev1.ResourceName
	for name, n := range v {
		if n > 0 {
			out = append(out, name)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := resourceRank(out[i]), resourceRank(out[j])
		if ri != rj {
			return ri < rj
		}
		return out[i] < out[j]
	})
	return out
}

func resourceRank(name corev1.ResourceName) int {
	switch name {
	case ResourceGPU:
		return 0
	case corev1.ResourceCPU:
		return 1
	case corev1.ResourceMemory:
		return 2
	case corev1.ResourcePods:
		return 4
	}
	return 3
}

// strings formats v as resource name → quantity.
func (v resVec) strings() map[string]string {
	out := map[string]string{}
	for _, name := range v.names() {
		out[string(name)] = formatAmount(name, v[name])
	}
	return out
}

// formatAmount formats a milli-unit amount of a resource as a quantity.
func formatAmount(name corev1.ResourceName, milli int64) string {
	switch {
	case name == corev1.ResourceCPU:
		return resource.NewMilliQuantity(milli, resource.DecimalSI).String()
	case milli%1000 != 0:
		return resource.NewMilliQuantity(milli, resource.DecimalSI).String()
	case name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) || strings.HasSuffix(string(name), "memory"):
		return resource.NewQuantity(milli/1000, resource.BinarySI).String()
	}
	return resource.NewQuantity(milli/1000, resource.DecimalSI).String()
}

// containerRequests returns a container's requests, with a limit standing
// for an absent request as the API server defaults it.
func containerRequests(r corev1.ResourceRequirements) resVec {
	v := vecOf(r.Limits)
	for name, q := range r.Requests {
		v[name] = q.MilliValue()
	}
	return v
}

func containerLimits(r corev1.ResourceRequirements) resVec { return vecOf(r.Limits) }

// podAmount aggregates per-container amounts the way Kubernetes does for
// scheduling and quota (k8s.io/component-helpers/resource): app containers
// and restartable init containers (sidecars) are summed; each regular init
// container runs alone next to the sidecars started before it, and the pod
// needs the largest of those; pod overhead comes on top.
func podAmount(spec *corev1.PodSpec, of func(corev1.ResourceRequirements) resVec) resVec {
	total := resVec{}
	for _, c := range spec.Containers {
		total.add(of(c.Resources))
	}
	sidecars := resVec{}
	initMax := resVec{}
	for _, c := range spec.InitContainers {
		r := of(c.Resources)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			total.add(r)
			sidecars.add(r)
			initMax.maxWith(sidecars)
			continue
		}
		r.add(sidecars)
		initMax.maxWith(r)
	}
	total.maxWith(initMax)
	total.add(vecOf(spec.Overhead))
	return total
}

// podRequests returns what one pod of spec requests, including one pod
// slot. Pod-level requests (or limits standing for them) of cpu and memory
// replace the containers' sum, as with the PodLevelResources feature.
func podRequests(spec *corev1.PodSpec) resVec {
	v := podAmount(spec, containerRequests)
	if spec.Resources != nil {
		pod := containerRequests(*spec.Resources)
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if n, ok := pod[name]; ok {
				v[name] = n + vecOf(spec.Overhead)[name]
			}
		}
	}
	v[corev1.ResourcePods] = 1000
	return v
}

// podLimits returns the limits of one pod of spec, for quota limits.*.
func podLimits(spec *corev1.PodSpec) resVec {
	v := podAmount(spec, containerLimits)
	if spec.Resources != nil {
		for name, q := range spec.Resources.Limits {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
				v[name] = q.MilliValue() + vecOf(spec.Overhead)[name]
			}
		}
	}
	return v
}

// podHoldsResources reports whether a pod still holds its node's
// resources: it is bound and not terminated. A pod being deleted still
// counts until it is gone, as it does for the scheduler.
func podHoldsResources(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// nodeUsable reports whether the scheduler places new pods on n: it is
// Ready and not cordoned.
func nodeUsable(n *corev1.Node) (bool, string) {
	if n.Spec.Unschedulable {
		return false, "unschedulable (cordoned)"
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return true, ""
			}
			return false, "NotReady"
		}
	}
	return false, "NotReady (no Ready condition)"
}

// nodeMatches reports whether a pod of spec may be placed on n: its
// nodeName, nodeSelector, required node affinity, and tolerations of the
// node's NoSchedule and NoExecute taints.
func nodeMatches(n *corev1.Node, spec *corev1.PodSpec) bool {
	if spec.NodeName != "" && spec.NodeName != n.Name {
		return false
	}
	for k, v := range spec.NodeSelector {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false
		}
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if !nodeSelectorMatches(n, a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution) {
			return false
		}
	}
	for i := range n.Spec.Taints {
		taint := &n.Spec.Taints[i]
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !tolerated(spec.Tolerations, taint) {
			return false
		}
	}
	return true
}

func tolerated(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), taint, true) {
			return true
		}
	}
	return false
}

// nodeSelectorMatches evaluates required node affinity: the terms are
// ORed, the requirements of a term ANDed, and an empty term matches
// nothing.
func nodeSelectorMatches(n *corev1.Node, sel *corev1.NodeSelector) bool {
	for _, term := range sel.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		if termMatches(n, term) {
			return true
		}
	}
	return false
}

func termMatches(n *corev1.Node, term corev1.NodeSelectorTerm) bool {
	for _, req := range term.MatchExpressions {
		r, err := labels.NewRequirement(req.Key, selectionOp(req.Operator), req.Values)
		if err != nil || !r.Matches(labels.Set(n.Labels)) {
			return false
		}
	}
	for _, req := range term.MatchFields {
		if req.Key != "metadata.name" {
			return false
		}
		r, err := labels.NewRequirement(req.Key, selectionOp(req.Operator), req.Values)
		if err != nil || !r.Matches(labels.Set{"metadata.name": n.Name}) {
			return false
		}
	}
	return true
}

func selectionOp(op corev1.NodeSelectorOperator) selection.Operator {
	switch op {
	case corev1.NodeSelectorOpIn:
		return selection.In
	case corev1.NodeSelectorOpNotIn:
		return selection.NotIn
	case corev1.NodeSelectorOpExists:
		return selection.Exists
	case corev1.NodeSelectorOpDoesNotExist:
		return selection.DoesNotExist
	case corev1.NodeSelectorOpGt:
		return selection.GreaterThan
	case corev1.NodeSelectorOpLt:
		return selection.LessThan
	}
	return selection.Operator(op)
}

// nodeState is one usable node: what it can give and what its pods use.
type nodeState struct {
	node *corev1.Node
	// alloc is the node's allocatable resources.
	alloc resVec
	// free is allocatable minus the requests of the pods holding resources
	// on it, minus what earlier Deployments of this preflight reserved.
	free resVec
}

// fitCount returns how many pods requesting per fit into free.
func fitCount(free, per resVec) int64 {
	best := int64(-1)
	for name, need := range per {
		if need <= 0 {
			continue
		}
		n := free[name] / need
		if free[name] < 0 {
			n = 0
		}
		if best < 0 || n < best {
			best = n
		}
	}
	if best < 0 {
		return 1 << 30 // requests nothing: unlimited
	}
	return best
}

// fitsIn reports whether per fits into have for every resource.
func fitsIn(have, per resVec) bool { return fitCount(have, per) >= 1 }

// quotaKey is what one ResourceQuota hard key counts for a pod.
type quotaKey struct {
	limits bool
	name   corev1.ResourceName
}

// quotaKeyOf maps a ResourceQuota hard key to the pod amount it counts;
// ok is false for keys that do not count pods' compute resources (object
// counts, storage).
func quotaKeyOf(key corev1.ResourceName) (quotaKey, bool) {
	s := string(key)
	switch {
	case s == "pods" || s == "count/pods":
		return quotaKey{name: corev1.ResourcePods}, true
	case s == "cpu" || s == "memory" || s == "ephemeral-storage":
		return quotaKey{name: key}, true
	case strings.HasPrefix(s, "requests."):
		name := strings.TrimPrefix(s, "requests.")
		if name == "storage" {
			return quotaKey{}, false
		}
		return quotaKey{name: corev1.ResourceName(name)}, true
	case strings.HasPrefix(s, "limits."):
		return quotaKey{limits: true, name: corev1.ResourceName(strings.TrimPrefix(s, "limits."))}, true
	}
	return quotaKey{}, false
}

// podUsage is what one pod counts against quotas: requests (with a pod
// slot) and limits.
type podUsage struct {
	requests resVec
	limits   resVec
}

func usageOf(spec *corev1.PodSpec) podUsage {
	return podUsage{requests: podRequests(spec), limits: podLimits(spec)}
}

func (u podUsage) amount(k quotaKey) int64 {
	if k.limits {
		return u.limits[k.name]
	}
	return u.requests[k.name]
}

// quotaState is one ResourceQuota of a namespace.
type quotaState struct {
	quota *corev1.ResourceQuota
	// free is hard minus used, minus what earlier Deployments of this
	// preflight reserved, per hard key that counts pods.
	free map[corev1.ResourceName]int64
	hard map[corev1.ResourceName]int64
	used map[corev1.ResourceName]int64
}

func newQuotaState(q *corev1.ResourceQuota) *quotaState {
	s := &quotaState{quota: q, free: map[corev1.ResourceName]int64{}, hard: map[corev1.ResourceName]int64{}, used: map[corev1.ResourceName]int64{}}
	hard := q.Spec.Hard
	if len(hard) == 0 {
		hard = q.Status.Hard
	}
	for key, h := range hard {
		if _, ok := quotaKeyOf(key); !ok {
			continue
		}
		used := q.Status.Used[key]
		s.hard[key] = h.MilliValue()
		s.used[key] = used.MilliValue()
		s.free[key] = h.MilliValue() - used.MilliValue()
	}
	return s
}

// keys returns the quota's pod-counting keys, sorted.
func (s *quotaState) keys() []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(s.free))
	for k := range s.free {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// quotaApplies reports whether quota q counts pods of spec, from its
// scopes and scope selector. Unknown scopes are assumed to apply.
func quotaApplies(q *corev1.ResourceQuota, spec *corev1.PodSpec) bool {
	for _, scope := range q.Spec.Scopes {
		if !scopeMatches(scope, corev1.ScopeSelectorOpExists, nil, spec) {
			return false
		}
	}
	if q.Spec.ScopeSelector != nil {
		for _, e := range q.Spec.ScopeSelector.MatchExpressions {
			if !scopeMatches(e.ScopeName, e.Operator, e.Values, spec) {
				return false
			}
		}
	}
	return true
}

func scopeMatches(scope corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values []string, spec *corev1.PodSpec) bool {
	switch scope {
	case corev1.ResourceQuotaScopeTerminating:
		return spec.ActiveDeadlineSeconds != nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return spec.ActiveDeadlineSeconds == nil
	case corev1.ResourceQuotaScopeBestEffort:
		return isBestEffort(spec)
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !isBestEffort(spec)
	case corev1.ResourceQuotaScopePriorityClass:
		pc := spec.PriorityClassName
		switch op {
		case corev1.ScopeSelectorOpExists:
			return pc != ""
		case corev1.ScopeSelectorOpDoesNotExist:
			return pc == ""
		case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
			in := false
			for _, v := range values {
				in = in || v == pc
			}
			return in == (op == corev1.ScopeSelectorOpIn)
		}
	}
	return true
}

func isBestEffort(spec *corev1.PodSpec) bool {
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
				return false
			}
		}
	}
	return true
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
