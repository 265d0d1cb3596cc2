package servecheck

import (
	"context"
	"fmt"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubectl/pkg/util/podutils"

	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/internal/podhttp"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// Pods reads the pods of the release namespace that serve its traffic.
type Pods struct {
	Client    kubernetes.Interface
	Namespace string
}

// Selectors are the label selectors of the pods that serve the
// release: its Services' (only what a Service sends traffic to serves; a
// multi-node group's leader, not its workers), headless Services (the
// built-in chart's <fullname>-nodes, which names every pod of a group for
// DNS) only when there is no other, else, for a chart without a Service,
// its Deployments' and StatefulSets'.
func Selectors(objs []*unstructured.Unstructured) []labels.Selector {
	var services, headless, workloads []labels.Selector
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		switch {
		case gvk.Group == "" && gvk.Kind == "Service":
			sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector")
			ip, _, _ := unstructured.NestedString(o.Object, "spec", "clusterIP")
			switch {
			case len(sel) == 0:
			case ip == corev1.ClusterIPNone:
				headless = append(headless, labels.SelectorFromSet(sel))
			default:
				services = append(services, labels.SelectorFromSet(sel))
			}
		case gvk.Group == "apps" && (gvk.Kind == "Deployment" || gvk.Kind == "StatefulSet"):
			sel, _, _ := unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
			if len(sel) > 0 {
				workloads = append(workloads, labels.SelectorFromSet(sel))
			}
		}
	}
	if len(services) > 0 {
		return services
	}
	if len(headless) > 0 {
		return headless
	}
	return workloads
}

// Targets lists the pods a serve check of rec takes (see Scope):
// Ready, not terminating, selected by Selectors, in name order, each
// with its port; owners maps each to its workload ("deployment/chat").
func (ps Pods) Targets(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured, cfg *Config,
	scope Scope) ([]wait.ServeTarget, map[string]string, error) {
	selectors := Selectors(objs)
	if len(selectors) == 0 || ps.Client == nil {
		return nil, nil, nil
	}
	ns := ps.Namespace
	var pods []corev1.Pod
	if scope.Pods != nil {
		for _, name := range scope.Pods {
			p, err := ps.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, nil, fmt.Errorf("read pod %s/%s: %w", ns, name, err)
			}
			pods = append(pods, *p)
		}
	} else {
		var err error
		if pods, err = ps.Selected(ctx, selectors); err != nil {
			return nil, nil, err
		}
	}
	var targets []wait.ServeTarget
	owners := map[string]string{}
	for i := range pods {
		p := &pods[i]
		if !ServesTraffic(p, selectors) || (!scope.Live && scope.Pods == nil && !OfRevision(p, rec)) {
			continue
		}
		port := cfg.Port
		if port == 0 {
			port = podhttp.Port(p)
		}
		targets = append(targets, wait.ServeTarget{Pod: p.Name, Port: port, Node: p.Spec.NodeName})
		owners[p.Name] = ownerOf(p, rec)
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].Pod < targets[j].Pod })
	return targets, owners, nil
}

// Selected lists the pods of the release namespace that one of
// selectors selects, each once.
func (ps Pods) Selected(ctx context.Context, selectors []labels.Selector) ([]corev1.Pod, error) {
	ns := ps.Namespace
	var pods []corev1.Pod
	seen := map[string]bool{}
	for _, sel := range selectors {
		list, err := ps.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return nil, fmt.Errorf("list the pods of %s in namespace %s: %w", sel, ns, err)
		}
		for _, p := range list.Items {
			if !seen[p.Name] {
				seen[p.Name] = true
				pods = append(pods, p)
			}
		}
	}
	return pods, nil
}

// Serving are the pods that serve the release's traffic now: selected
// by Selectors(objs) (a group's leader, not its workers), Ready and
// not terminating.
func (ps Pods) Serving(ctx context.Context, objs []*unstructured.Unstructured) ([]corev1.Pod, error) {
	selectors := Selectors(objs)
	pods, err := ps.Selected(ctx, selectors)
	return slices.DeleteFunc(pods, func(p corev1.Pod) bool { return !ServesTraffic(&p, selectors) }), err
}

// Revision are the pods of revision rec: the Ready, not terminating pods
// of the ReplicaSets it made, and the serving leaders (Serving) of its
// engine groups, those of its ControllerRevisions (OfRevision).
func (ps Pods) Revision(ctx context.Context, rec *storage.Release) ([]corev1.Pod, error) {
	ns := ps.Namespace
	var out []corev1.Pod
	for _, rs := range rec.ReplicaSets {
		pods, err := ps.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "pod-template-hash=" + rs.PodTemplateHash})
		if err != nil {
			return nil, fmt.Errorf("replicaset %s/%s: list its pods: %w", ns, rs.Name, err)
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.DeletionTimestamp == nil && podutils.IsPodReady(pod) {
				out = append(out, *pod)
			}
		}
	}
	if len(rec.ControllerRevisions) > 0 {
		// Engine groups: the leaders of the revision's groups, the pods
		// the release's Service sends traffic to.
		objs, err := cluster.ParseManifest(rec.Manifest)
		if err != nil {
			return nil, fmt.Errorf("release %s revision %d: its manifest, read for its Services: %w", rec.Name, rec.Revision, err)
		}
		pods, err := ps.Serving(ctx, objs)
		if err != nil {
			return nil, err
		}
		for i := range pods {
			if OfRevision(&pods[i], rec) {
				out = append(out, pods[i])
			}
		}
	}
	return out, nil
}

// ServesTraffic reports whether pod is Ready, not terminating and
// selected by one of selectors.
func ServesTraffic(pod *corev1.Pod, selectors []labels.Selector) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	return podutils.IsPodReady(pod) && slices.ContainsFunc(selectors, func(s labels.Selector) bool { return s.Matches(labels.Set(pod.Labels)) })
}

// OfRevision reports whether pod belongs to rec's pod templates: owned by
// one of its ReplicaSets, or of one of its StatefulSets' recorded
// ControllerRevisions. A pod of another workload (a LeaderWorkerSet's)
// counts when rec recorded nothing for it.
func OfRevision(pod *corev1.Pod, rec *storage.Release) bool {
	for _, o := range pod.OwnerReferences {
		switch o.Kind {
		case "ReplicaSet":
			return len(rec.ReplicaSets) == 0 || slices.ContainsFunc(rec.ReplicaSets, func(r storage.ReplicaSetRef) bool { return r.Name == o.Name })
		case "StatefulSet":
			i := slices.IndexFunc(rec.ControllerRevisions, func(c storage.ControllerRevisionRef) bool { return c.StatefulSet == o.Name })
			return i < 0 || pod.Labels[appsv1.ControllerRevisionHashLabelKey] == rec.ControllerRevisions[i].Name
		}
	}
	return true
}

// ownerOf names pod's workload as a diagnosis does ("deployment/chat").
func ownerOf(pod *corev1.Pod, rec *storage.Release) string {
	for _, o := range pod.OwnerReferences {
		switch o.Kind {
		case "ReplicaSet":
			if i := slices.IndexFunc(rec.ReplicaSets, func(r storage.ReplicaSetRef) bool { return r.Name == o.Name }); i >= 0 {
				return "deployment/" + rec.ReplicaSets[i].Deployment
			}
			return "replicaset/" + o.Name
		case "StatefulSet":
			return "statefulset/" + o.Name
		}
	}
	return "pod/" + pod.Name
}
