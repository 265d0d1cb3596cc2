package canary

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/vllmctl/vllmctl/internal/podhttp"
	"github.com/vllmctl/vllmctl/release/analysis"
)

// AnalysisTargets are the Ready canary pods and the Ready stable pods
// (the target Deployments' other pods) with the port to reach each on;
// ns is the release namespace.
func AnalysisTargets(ctx context.Context, client kubernetes.Interface, ns string, targets []Target, canaryPods []string) (analysis.Targets, error) {
	out := analysis.Targets{Namespace: ns}
	for _, t := range targets {
		dep, err := client.AppsV1().Deployments(t.Ref.Namespace).Get(ctx, t.Ref.Name, metav1.GetOptions{})
		if err != nil {
			return out, fmt.Errorf("deployment %s/%s: %w", t.Ref.Namespace, t.Ref.Name, err)
		}
		sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
		if err != nil {
			return out, fmt.Errorf("deployment %s/%s: selector: %w", t.Ref.Namespace, t.Ref.Name, err)
		}
		pods, err := client.CoreV1().Pods(t.Ref.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return out, fmt.Errorf("deployment %s/%s: list its pods: %w", t.Ref.Namespace, t.Ref.Name, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil || !podutils.IsPodReady(p) {
				continue
			}
			addTarget(&out, p, canaryPods)
		}
	}
	if len(out.Canary) == 0 {
		return out, fmt.Errorf("none of the canary pods %v is Ready", canaryPods)
	}
	return out, nil
}

// GroupAnalysisTargets are the targets of an engine group's canary among
// pods, the pods that serve the release's traffic (servecheck.Pods.Serving:
// its Service selects each group's leader, which alone runs the OpenAI
// server and its /metrics), Ready and not terminating; those among
// canaryPods (the canary groups' pods) are the canary, the other groups'
// leaders the stable side.
func GroupAnalysisTargets(ns string, pods []corev1.Pod, canaryPods []string) (analysis.Targets, error) {
	out := analysis.Targets{Namespace: ns}
	for i := range pods {
		addTarget(&out, &pods[i], canaryPods)
	}
	if len(out.Canary) == 0 {
		return out, fmt.Errorf("no pod of the canary groups %v serves the release's traffic (Ready, selected by its Service)", canaryPods)
	}
	return out, nil
}

// addTarget adds pod p to out: to its canary side when canaryPods has it,
// else to its stable side.
func addTarget(out *analysis.Targets, p *corev1.Pod, canaryPods []string) {
	tg := analysis.Target{Pod: p.Name, Port: podhttp.Port(p)}
	if slices.Contains(canaryPods, p.Name) {
		out.Canary = append(out.Canary, tg)
	} else {
		out.Stable = append(out.Stable, tg)
	}
}
