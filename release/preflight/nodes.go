package preflight

// This file holds what the preflight reads of nodes and the pods bound to
// them: the nodes a release's pods may go to (by label selector), the pods
// on the candidate nodes (a list per node, or one of all pods), the
// pending pods that compete for them, and the compact copy of a pod kept.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/klog/v2"

	"github.com/vllmctl/vllmctl/internal/podwire"
)

// listNodes lists the nodes matching a label selector ("" for every
// node).
func (p *preflighter) listNodes(ctx context.Context, selector string) ([]*corev1.Node, error) {
	return listAll(ctx, metav1.ListOptions{LabelSelector: selector}, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		list, err := p.client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return list, nil
	}, func(n *corev1.Node) (*corev1.Node, bool) { return n, true })
}

// maxNodeLists bounds the per-node pod lists of one preflight: above it,
// the pods of every node are read with one paged list of all namespaces
// instead (500 pods a request), which then costs fewer requests than a
// list per candidate node.
const maxNodeLists = 64

// podPageSize is the page size of pod lists: half the pager's default, as a
// decoded page of full pods is the largest thing the preflight holds (a
// 1000-replica upgrade's peak RSS is set while its pods are read).
const podPageSize = 250

// nodeListWorkers is how many per-node pod lists run at once: two, since
// each list's decoded page is held until its pods are made compact, and a
// big release's nodes hold hundreds of pods each (eight at once raised a
// 1000-replica upgrade's peak RSS by a few MiB; the lists take a few
// milliseconds each from the watch cache).
const nodeListWorkers = 2

// nodeSet is the nodes one label selector lists: how many there are, and
// the Ready, schedulable ones.
type nodeSet struct {
	selector string
	total    int
	listed   []*corev1.Node
	usable   []*nodeState
}

// nodesFor returns the nodes a pod with spec may go to as far as a label
// selector says (its nodeSelector, and the requirements of a single
// required node affinity term): the API server filters them, so a release
// pinned to a pool reads only that pool's nodes. A node listed under two
// selectors is one nodeState. Their free room is their allocatable until
// readPodsOn has read the pods bound to them. It returns nil, with a note,
// when nodes may not be read.
func (p *preflighter) nodesFor(ctx context.Context, spec *corev1.PodSpec) (*nodeSet, error) {
	if p.nodesUnreadable {
		return nil, nil
	}
	sel := nodeLabelSelector(spec)
	if set, ok := p.nodeSets[sel.String()]; ok {
		return set, nil
	}
	var nodes []*corev1.Node
	if all, ok := p.nodeSets[""]; ok || p.opts.Nodes != nil {
		// Every node is known already (listed here, or by the model-fit
		// preflight): no new list.
		known := p.opts.Nodes
		if ok {
			known = all.listed
		}
		for _, n := range known {
			if sel.Matches(labels.Set(n.Labels)) {
				nodes = append(nodes, n)
			}
		}
	} else {
		var err error
		nodes, err = p.listNodes(ctx, sel.String())
		if apierrors.IsForbidden(err) {
			p.note("nodes not readable (%v): node capacity not checked, only quotas", err)
			p.nodesUnreadable = true
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("preflight: list nodes: %w", err)
		}
	}
	set := &nodeSet{selector: sel.String(), total: len(nodes), listed: nodes}
	var excluded []string
	for _, n := range nodes {
		if ok, why := nodeUsable(n); !ok {
			excluded = append(excluded, n.Name+" "+why)
			continue
		}
		st := p.nodeByName[n.Name]
		if st == nil {
			alloc := vecOf(n.Status.Allocatable)
			st = &nodeState{node: n, alloc: alloc, free: alloc.clone()}
			if p.podsByNode != nil {
				st.subtract(p.podsByNode[n.Name], &p.deleting)
			}
			p.nodeByName[n.Name] = st
		}
		set.usable = append(set.usable, st)
	}
	sort.Slice(set.usable, func(i, j int) bool { return set.usable[i].node.Name < set.usable[j].node.Name })
	if len(excluded) > 0 {
		sort.Strings(excluded)
		p.note("nodes left out: %s", strings.Join(excluded, ", "))
	}
	p.nodeSets[set.selector] = set
	return set, nil
}

// nodeLabelSelector is the label selector of the nodes a pod with spec may
// go to, as far as one can say it: its nodeSelector, and, when its required
// node affinity has a single term, that term's label requirements (In,
// NotIn, Exists, DoesNotExist mean the same there). What it cannot say
// (several terms, Gt and Lt, matchFields) the placement checks on each
// listed node: the selector may list too many nodes, never too few.
func nodeLabelSelector(spec *corev1.PodSpec) labels.Selector {
	sel := labels.SelectorFromSet(spec.NodeSelector)
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return sel
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 {
		return sel
	}
	ops := map[corev1.NodeSelectorOperator]selection.Operator{
		corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
		corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	}
	for _, e := range terms[0].MatchExpressions {
		op, ok := ops[e.Operator]
		if !ok {
			continue
		}
		r, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil {
			// The scheduler matches no node with it; the placement
			// says so for each node listed.
			continue
		}
		sel = sel.Add(*r)
	}
	return sel
}

// readPodsOn subtracts from each of nodes not read yet the requests of
// the pods bound to it that hold resources. Only the nodes a Deployment
// can use are read, with a list per node (field selector spec.nodeName,
// which the API server answers from its watch cache through its node
// index): what a deploy reads depends on the nodes its pods may go to,
// not on the size of the cluster. Above maxNodeLists nodes in one
// preflight, one paged list of all pods reads every node at once (and the
// nodes listed later). It returns false, with a note, when pods may not be
// read: node checks are then left out.
func (p *preflighter) readPodsOn(ctx context.Context, nodes []*nodeState) (bool, error) {
	if p.podsUnreadable {
		return false, nil
	}
	var pending []*nodeState
	for _, n := range nodes {
		if !n.podsRead {
			pending = append(pending, n)
		}
	}
	if len(pending) == 0 {
		return true, nil
	}
	// The namespaces listed whole (a live Deployment's, for its old
	// pods) are left out of these lists and their pods taken from there:
	// a big release's own pods are read once.
	except := p.listedNamespaces()
	var pods []*corev1.Pod
	var err error
	if p.podsByNode == nil && p.nodeLists+len(pending) > maxNodeLists {
		if pods, err = p.listPods(ctx, "", "", except); err == nil {
			p.podsByNode = p.byNode(pods, except)
			for _, n := range p.nodeByName {
				n.subtract(p.podsByNode[n.node.Name], &p.deleting)
			}
		}
	} else {
		p.nodeLists += len(pending)
		if pods, err = p.listPodsOn(ctx, pending, except); err == nil {
			byNode := p.byNode(pods, except)
			for _, n := range pending {
				n.subtract(byNode[n.node.Name], &p.deleting)
			}
		}
	}
	if apierrors.IsForbidden(err) {
		p.note("pods of all namespaces not readable (%v): node capacity not checked, only quotas", err)
		p.podsUnreadable = true
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if p.deleting > 0 {
		p.replaceNote("pods being deleted still count against their nodes until they are gone: ", fmt.Sprint(p.deleting))
	}
	return true, nil
}

// listedNamespaces returns the namespaces whose pods were listed whole,
// sorted.
func (p *preflighter) listedNamespaces() []string {
	out := make([]string, 0, len(p.nsListed))
	for ns := range p.nsListed {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// byNode groups pods, and those of the namespaces listed whole among
// except, by their node.
func (p *preflighter) byNode(pods []*corev1.Pod, except []string) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	add := func(pod *corev1.Pod) {
		if pod.Spec.NodeName != "" {
			out[pod.Spec.NodeName] = append(out[pod.Spec.NodeName], pod)
		}
	}
	for _, pod := range pods {
		add(pod)
	}
	for _, ns := range except {
		for _, pod := range p.nsPods[ns] {
			add(pod)
		}
	}
	return out
}

// subtract takes the requests of the pods bound to n that hold resources
// out of its free room, once, counting those being deleted in deleting.
func (n *nodeState) subtract(pods []*corev1.Pod, deleting *int) {
	if n.podsRead {
		return
	}
	n.podsRead = true
	for _, pod := range pods {
		if pod.Spec.NodeName != n.node.Name || !podHoldsResources(pod) {
			continue
		}
		if pod.DeletionTimestamp != nil {
			*deleting++
		}
		n.free.sub(podRequests(&pod.Spec))
	}
}

// noteCompetitors notes the pending pods of other workloads that may take
// the room this Deployment's pods are counted on: not bound yet, allowed
// on one of its nodes and small enough for it. They are not counted (the
// scheduler orders pods by priority, and they may go elsewhere); the note
// says the room may go to them first. The pending pods are listed once,
// with the field selector spec.nodeName= (unbound pods only).
func (p *preflighter) noteCompetitors(ctx context.Context, ec *evalContext) error {
	d := ec.d.rendered
	return p.noteCompetitorsOf(ctx, "Deployment "+d.Name, d.Namespace, d.Spec.Selector, ec.per.requests, ec.matches)
}

// noteCompetitorsOf is noteCompetitors for the workload what (e.g.
// "StatefulSet engine-g0") of namespace ns whose own pods selector
// matches, with pods requesting per on the nodes matches.
func (p *preflighter) noteCompetitorsOf(ctx context.Context, what, ns string, selector *metav1.LabelSelector, per resVec, matches []*nodeState) error {
	if p.pending == nil {
		pods, err := listAll(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=,status.phase=Pending"}, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := p.podLister("").List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return list, nil
		}, func(pod *corev1.Pod) (*corev1.Pod, bool) {
			if pod.Spec.NodeName != "" || pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
				return nil, false
			}
			c := compactPod(pod)
			c.Spec.Affinity, c.Spec.Tolerations = pod.Spec.Affinity, pod.Spec.Tolerations
			return c, true
		})
		switch {
		case apierrors.IsForbidden(err):
			p.note("pending pods of all namespaces not readable (%v): pods waiting for the same nodes are not named", err)
			pods = []*corev1.Pod{}
		case err != nil:
			return fmt.Errorf("preflight: list pending pods: %w", err)
		case pods == nil:
			pods = []*corev1.Pod{} // listed: none
		}
		p.pending = pods
	}
	own, _ := metav1.LabelSelectorAsSelector(selector)
	var names []string
	total := resVec{}
	for _, pod := range p.pending {
		if pod.Namespace == ns && own != nil && !own.Empty() && own.Matches(labels.Set(pod.Labels)) {
			continue // the workload's own pods
		}
		req := podRequests(&pod.Spec)
		if !sharesScarce(req, per) {
			continue
		}
		pl := newPlacement(klog.FromContext(ctx), &pod.Spec)
		for _, n := range matches {
			if pl.allows(n.node) && fitsIn(n.alloc, req) {
				names = append(names, pod.Namespace+"/"+pod.Name)
				total.add(req)
				break
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	shown := names
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(names)-5))
	}
	var asks []string
	for _, r := range per.names() {
		if isScarce(r) && total[r] > 0 {
			asks = append(asks, string(r)+" "+formatAmount(r, total[r]))
		}
	}
	p.note("%s: %d pending pod(s) of other workloads may take the same nodes first (%s), requesting %s; the scheduler places pods by priority, so the room counted here may go to them",
		what, len(names), strings.Join(shown, ", "), strings.Join(asks, ", "))
	return nil
}

// isScarce reports whether r is a resource pods compete for by name: an
// extended resource (GPUs and the like), not cpu, memory, storage or the
// pod count, which every pod asks for.
func isScarce(r corev1.ResourceName) bool {
	switch r {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage:
		return false
	}
	return true
}

// sharesScarce reports whether two pods' requests both ask for one scarce
// resource.
func sharesScarce(a, b resVec) bool {
	for r, v := range a {
		if v > 0 && b[r] > 0 && isScarce(r) {
			return true
		}
	}
	return false
}

// listPodsOn lists the pods bound to each of nodes, nodeListWorkers lists
// at a time. The first error (a Forbidden one as it is) stops the rest.
func (p *preflighter) listPodsOn(ctx context.Context, nodes []*nodeState, except []string) ([]*corev1.Pod, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(nodeListWorkers)
	found := make([][]*corev1.Pod, len(nodes))
	for i, n := range nodes {
		g.Go(func() error {
			pods, err := p.listPods(gctx, "", n.node.Name, except)
			found[i] = pods
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, pods := range found {
		out = append(out, pods...)
	}
	return out, nil
}

// podLister lists the pods of ns ("": all namespaces): through
// opts.PodClient when set.
func (p *preflighter) podLister(ns string) interface {
	List(context.Context, metav1.ListOptions) (*corev1.PodList, error)
} {
	if p.opts.PodClient != nil {
		return podwire.Pods{RC: p.opts.PodClient, Namespace: ns}
	}
	return p.client.CoreV1().Pods(ns)
}

// listPods lists the pods of ns ("" for all namespaces but those of
// except) that are not Succeeded or Failed, those bound to node only when
// node is set. A Forbidden error is returned as it is.
func (p *preflighter) listPods(ctx context.Context, ns, node string, except []string) ([]*corev1.Pod, error) {
	selector := "status.phase!=Succeeded,status.phase!=Failed"
	if ns == "" {
		for i := len(except) - 1; i >= 0; i-- {
			selector = "metadata.namespace!=" + except[i] + "," + selector
		}
	}
	if node != "" {
		selector = "spec.nodeName=" + node + "," + selector
	}
	out, err := listAll(ctx, metav1.ListOptions{FieldSelector: selector, Limit: podPageSize}, func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		list, err := p.podLister(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		return list, nil
	}, func(pod *corev1.Pod) (*corev1.Pod, bool) {
		// The field selector already leaves these out; a server (or fake)
		// that ignores it does not.
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || (node != "" && pod.Spec.NodeName != node) ||
			(ns == "" && slices.Contains(except, pod.Namespace)) {
			return nil, false
		}
		return compactPod(pod), true
	})
	switch {
	case err == nil:
		return out, nil
	case apierrors.IsForbidden(err):
		return nil, err
	case node != "":
		return nil, fmt.Errorf("preflight: list pods on node %s: %w", node, err)
	case ns == "":
		return nil, fmt.Errorf("preflight: list pods: %w", err)
	}
	return nil, fmt.Errorf("preflight: list pods in namespace %s: %w", ns, err)
}

// compactPod is what the preflight reads of a listed pod: its name,
// labels and deletion, node, phase, and what its requests and the quotas'
// scopes depend on. A namespace of 1000 pods holds a fraction of the
// memory the listed pods (managedFields, environment, probes, volumes)
// did, and the list's pages are freed once read.
func compactPod(pod *corev1.Pod) *corev1.Pod {
	spec := pod.Spec
	spec.Volumes, spec.Affinity, spec.Tolerations, spec.ReadinessGates = nil, nil, nil, nil
	spec.Containers = compactContainers(pod.Spec.Containers)
	spec.InitContainers = compactContainers(pod.Spec.InitContainers)
	spec.EphemeralContainers = nil
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, Labels: pod.Labels,
			DeletionTimestamp: pod.DeletionTimestamp, OwnerReferences: pod.OwnerReferences,
		},
		Spec:   spec,
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}
}

func compactContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
	return out
}
