// ReplicaSets of a Deployment: the Deployment controller's rule for which
// one is new and which are old (shared with package release), and the
// RolloutWatcher's informer of them.

package wait

import (
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/podwire"
)

// NewReplicaSet returns, among rss, the Deployment's new ReplicaSet by the
// Deployment controller's rule: of the ReplicaSets d controls (controller
// owner reference), the oldest (by creation timestamp, then name) whose pod
// template equals d's ignoring the pod-template-hash label. It is nil when
// the controller has not created it yet. rss is not reordered.
//
// This is the rule of k8s.io/kubectl/pkg/util/deployment (listReplicaSets,
// findNewReplicaSet, equalIgnoreHash), which exports it only behind
// GetAllReplicaSets: a List through a client, without a context. Package
// wait needs it on informer caches and package release on a List bounded
// by its context, so this is the one copy.
func NewReplicaSet(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	owned := ownedReplicaSets(d, rss)
	if i := newIndex(d, owned); i >= 0 {
		return owned[i]
	}
	return nil
}

// splitReplicaSets returns, among rss, d's new ReplicaSet (see
// [NewReplicaSet]) and the other ReplicaSets d controls that still have
// pods, by name. newRS is nil when the controller has not created it yet.
func splitReplicaSets(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) (newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) {
	owned := ownedReplicaSets(d, rss)
	n := newIndex(d, owned)
	if n >= 0 {
		newRS = owned[n]
	}
	for i, rs := range owned {
		if i == n {
			continue
		}
		if (rs.Spec.Replicas != nil && *rs.Spec.Replicas > 0) || rs.Status.Replicas > 0 {
			old = append(old, rs)
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i].Name < old[j].Name })
	return newRS, old
}

// ownedReplicaSets returns the ReplicaSets among rss that d controls, by
// creation timestamp, then name (the controller's order), in a new slice.
func ownedReplicaSets(d *appsv1.Deployment, rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var owned []*appsv1.ReplicaSet
	for _, rs := range rss {
		if metav1.IsControlledBy(rs, d) {
			owned = append(owned, rs)
		}
	}
	sort.Slice(owned, func(i, j int) bool {
		ti, tj := owned[i].CreationTimestamp, owned[j].CreationTimestamp
		if ti.Equal(&tj) {
			return owned[i].Name < owned[j].Name
		}
		return ti.Before(&tj)
	})
	return owned
}

// newIndex returns the index in owned (in the controller's order) of the
// first ReplicaSet carrying d's pod template, or -1.
func newIndex(d *appsv1.Deployment, owned []*appsv1.ReplicaSet) int {
	for i, rs := range owned {
		if sameTemplate(rs, d) {
			return i
		}
	}
	return -1
}

// sameTemplate reports whether rs carries d's pod template, ignoring the
// pod-template-hash label: by the digests of their templates when they
// were decoded without them (the watcher's informers, see
// podwire.NewAppsClient), else by comparing the templates.
func sameTemplate(rs *appsv1.ReplicaSet, d *appsv1.Deployment) bool {
	a, b := rs.Annotations[podwire.TemplateDigestAnnotation], d.Annotations[podwire.TemplateDigestAnnotation]
	if a != "" || b != "" {
		return a != "" && a == b
	}
	return equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template)
}

// equalIgnoreHash compares two pod templates ignoring the pod-template-hash
// label, as the Deployment controller does to find its new ReplicaSet.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, podTemplateHashLabel)
	delete(b.Labels, podTemplateHashLabel)
	return apiequality.Semantic.DeepEqual(a, b)
}

// startReplicaSets starts the informer of the ReplicaSets a Deployment
// selects.
func (r *rolloutRun) startReplicaSets(dw *deployWatch, sel labels.Selector) {
	c := r.replicaSetsIn(dw.namespace)
	s := sel.String()
	// Every version is looked at, as pods may go away between two
	// evaluations.
	observe := func(obj any) {
		if rs, ok := obj.(*appsv1.ReplicaSet); ok && releasingPods(rs) {
			r.mu.Lock()
			dw.released = r.clk.Now()
			r.mu.Unlock()
		}
		r.poke()
	}
	dw.rs = r.newInformer("watch the ReplicaSets of "+dw.ref.String(),
		listWatch(c.List, c.Watch, func(o *metav1.ListOptions) { o.LabelSelector = s }),
		&appsv1.ReplicaSet{}, cache.ResourceEventHandlerFuncs{
			AddFunc:    observe,
			UpdateFunc: func(_, cur any) { observe(cur) },
			DeleteFunc: func(any) { r.poke() },
		})
}

// releasingPods reports whether pods of rs are going away: more than it
// wants, or terminating (status.terminatingReplicas).
func releasingPods(rs *appsv1.ReplicaSet) bool {
	return ptr.Deref(rs.Status.TerminatingReplicas, 0) > 0 || rs.Status.Replicas > ptr.Deref(rs.Spec.Replicas, 1)
}

// syncReplicaSets sorts the ReplicaSets d selects (from the synced
// informer) into new and old, and records them in dw's progress.
func (dw *deployWatch) syncReplicaSets(d *appsv1.Deployment, sel labels.Selector) {
	var rss []*appsv1.ReplicaSet
	for _, o := range dw.rs.list() {
		if rs, ok := o.(*appsv1.ReplicaSet); ok && rs.Namespace == dw.namespace && sel.Matches(labels.Set(rs.Labels)) {
			rss = append(rss, rs)
		}
	}
	dw.newRS, dw.oldRS = splitReplicaSets(d, rss)
	p := &dw.progress
	p.NewReplicaSet, p.PodTemplateHash, p.Revision = "", "", ""
	if dw.newRS != nil {
		p.NewReplicaSet = dw.newRS.Name
		p.PodTemplateHash = dw.newRS.Labels[podTemplateHashLabel]
		p.Revision = dw.newRS.Annotations[deploymentRevisionAnnotKey]
	}
	p.OldReplicaSets = nil
	for _, rs := range dw.oldRS {
		p.OldReplicaSets = append(p.OldReplicaSets, rs.Name)
	}
}

// oldRSNamed returns dw's old ReplicaSet called name, or nil.
func (dw *deployWatch) oldRSNamed(name string) *appsv1.ReplicaSet {
	for _, rs := range dw.oldRS {
		if rs.Name == name {
			return rs
		}
	}
	return nil
}
