package preflight

import (
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// This file says which nodes a pod may go to: the scheduler's filters that
// depend only on the pod and the node (NodeName, NodeAffinity with the
// nodeSelector, TaintToleration, NodeUnschedulable), through
// k8s.io/component-helpers where it has them.

// nodeUsable reports whether the scheduler places new pods on n: it is
// Ready and not cordoned. Hand-written: component-helpers has no helper
// for either; the reason is reported in a note.
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

// podHoldsResources reports whether a pod still holds its node's
// resources: it is bound and not terminated. A pod being deleted still
// counts until it is gone, as it does for the scheduler.
func podHoldsResources(p *corev1.Pod) bool {
	return p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// placement is where a pod of one template may be placed, parsed once and
// matched against every node.
type placement struct {
	logger   klog.Logger
	nodeName string
	// affinity is the nodeSelector and the required node affinity
	// (component-helpers' nodeaffinity, as the scheduler's NodeAffinity
	// filter: terms ORed, requirements ANDed, an empty term matching
	// nothing, matchFields on metadata.name).
	affinity    nodeaffinity.RequiredNodeAffinity
	tolerations []corev1.Toleration
}

func newPlacement(logger klog.Logger, spec *corev1.PodSpec) placement {
	return placement{
		logger:      logger,
		nodeName:    spec.NodeName,
		affinity:    nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity),
		tolerations: spec.Tolerations,
	}
}

// MayPlace returns whether a pod with spec may go to a node as far as the
// pod and the node say: the node is Ready and not cordoned, and the pod's
// nodeName, nodeSelector, required node affinity and tolerations allow it
// (the capacity preflight's own filters, for the model-fit preflight's
// candidate nodes).
func MayPlace(logger klog.Logger, spec *corev1.PodSpec) func(*corev1.Node) bool {
	pl := newPlacement(logger, spec)
	return func(n *corev1.Node) bool {
		ok, _ := nodeUsable(n)
		return ok && pl.allows(n)
	}
}

// allows reports whether the pod may be placed on n: its nodeName, its
// nodeSelector and required node affinity, and tolerations of the node's
// NoSchedule and NoExecute taints.
func (pl placement) allows(n *corev1.Node) bool {
	// spec.nodeName is the scheduler's NodeName filter, which
	// component-helpers does not have: a one-line comparison.
	if pl.nodeName != "" && pl.nodeName != n.Name {
		return false
	}
	// An error means a requirement that does not parse and no other term
	// matched: such a pod matches no node, as for the scheduler.
	if ok, err := pl.affinity.Match(n); err != nil || !ok {
		return false
	}
	// Comparison operators (Gt, Lt) in tolerations are honoured: the API
	// server only admits them where the TaintTolerationComparisonOperators
	// feature is on, and there the scheduler honours them too.
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(pl.logger, n.Spec.Taints, pl.tolerations, repelsNewPods, true)
	return !untolerated
}

// repelsNewPods selects the taints that keep new pods off a node:
// NoSchedule and NoExecute (PreferNoSchedule only lowers the score).
func repelsNewPods(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}
