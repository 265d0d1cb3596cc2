package release

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

	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// defaultServePort is the port checked on a pod that names no container
// port http and declares none: vLLM's default.
const defaultServePort = 8000

// serveSelectors are the label selectors of the pods that serve the
// release: its Services' (only what a Service sends traffic to serves; a
// multi-node group's leader, not its workers), headless Services (the
// built-in chart's <fullname>-nodes, which names every pod of a group for
// DNS) only when there is no other, else, for a chart without a Service,
// its Deployments' and StatefulSets'.
func serveSelectors(objs []*unstructured.Unstructured) []labels.Selector {
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

// serveTargets lists the pods a serve check of rec takes (see serveScope):
// Ready, not terminating, selected by serveSelectors, in name order, each
// with its port; owners maps each to its workload ("deployment/chat").
func (e *Engine) serveTargets(ctx context.Context, rec *storage.Release, objs []*unstructured.Unstructured, cfg *serveConfig,
	scope serveScope) ([]wait.ServeTarget, map[string]string, error) {
	selectors := serveSelectors(objs)
	if len(selectors) == 0 || e.Client == nil {
		return nil, nil, nil
	}
	ns := e.Namespace()
	var pods []corev1.Pod
	if scope.pods != nil {
		for _, name := range scope.pods {
			p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, nil, fmt.Errorf("read pod %s/%s: %w", ns, name, err)
			}
			pods = append(pods, *p)
		}
	} else {
		var err error
		if pods, err = e.selectedPods(ctx, selectors); err != nil {
			return nil, nil, err
		}
	}
	var targets []wait.ServeTarget
	owners := map[string]string{}
	for i := range pods {
		p := &pods[i]
		if !servesTraffic(p, selectors) || (!scope.live && scope.pods == nil && !ofRevision(p, rec)) {
			continue
		}
		port := cfg.port
		if port == 0 {
			port = httpPort(p)
		}
		targets = append(targets, wait.ServeTarget{Pod: p.Name, Port: port, Node: p.Spec.NodeName})
		owners[p.Name] = ownerOf(p, rec)
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].Pod < targets[j].Pod })
	return targets, owners, nil
}

// selectedPods lists the pods of the release namespace that one of
// selectors selects, each once.
func (e *Engine) selectedPods(ctx context.Context, selectors []labels.Selector) ([]corev1.Pod, error) {
	ns := e.Namespace()
	var pods []corev1.Pod
	seen := map[string]bool{}
	for _, sel := range selectors {
		list, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
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

// servingPods are the pods that serve the release's traffic now: selected
// by serveSelectors(objs) (a group's leader, not its workers), Ready and
// not terminating.
func (e *Engine) servingPods(ctx context.Context, objs []*unstructured.Unstructured) ([]corev1.Pod, error) {
	selectors := serveSelectors(objs)
	pods, err := e.selectedPods(ctx, selectors)
	return slices.DeleteFunc(pods, func(p corev1.Pod) bool { return !servesTraffic(&p, selectors) }), err
}

// servesTraffic reports whether pod is Ready, not terminating and
// selected by one of selectors.
func servesTraffic(pod *corev1.Pod, selectors []labels.Selector) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	return podutils.IsPodReady(pod) && slices.ContainsFunc(selectors, func(s labels.Selector) bool { return s.Matches(labels.Set(pod.Labels)) })
}

// ofRevision reports whether pod belongs to rec's pod templates: owned by
// one of its ReplicaSets, or of one of its StatefulSets' recorded
// ControllerRevisions. A pod of another workload (a LeaderWorkerSet's)
// counts when rec recorded nothing for it.
func ofRevision(pod *corev1.Pod, rec *storage.Release) bool {
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

// httpPort is the container port a pod serves HTTP on: the one named
// http, else the first declared, else defaultServePort.
func httpPort(pod *corev1.Pod) int {
	first := 0
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == "http" {
				return int(p.ContainerPort)
			}
			if first == 0 {
				first = int(p.ContainerPort)
			}
		}
	}
	if first == 0 {
		return defaultServePort
	}
	return first
}
