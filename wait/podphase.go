// Time awareness for slow starts: the phase of each new pod as the
// progress shows it (Scheduled, Pulling, Starting, Loading under the
// startup probe with its remaining budget, Ready), and the warning before
// a deploy whose --timeout is shorter than what the pods may take to start.

package wait

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// podPhases returns the phase of every pod. pulling (nil: none) returns
// the pods the kubelet reported pulling an image for (a Pulling event not
// followed by Pulled); it is called at most once, and only when a pod
// would otherwise be Scheduled, the one phase that tells apart.
func podPhases(pods []*corev1.Pod, pulling func() map[string]bool) []rollout.PodPhase {
	out := make([]rollout.PodPhase, 0, len(pods))
	var pull map[string]bool
	for _, p := range pods {
		ph := podPhase(p, false)
		if ph.Phase == rollout.PhaseScheduled && pulling != nil {
			if pull == nil {
				pull = pulling()
				pulling = nil
			}
			ph = podPhase(p, pull[p.Name])
		}
		out = append(out, ph)
	}
	return out
}

// podPhase returns where pod stands.
func podPhase(pod *corev1.Pod, pulling bool) rollout.PodPhase {
	ph := rollout.PodPhase{Pod: pod.Name}
	switch {
	case podReady(pod):
		ph.Phase = rollout.PhaseReady
		return ph
	case pod.Spec.NodeName == "":
		ph.Phase = rollout.PhasePending
		return ph
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 {
			continue
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" && w.Reason != "ContainerCreating" {
			ph.Phase = w.Reason
			return ph
		}
		if cs.State.Running != nil {
			ph.Phase = rollout.PhaseInitializing
			return ph
		}
	}
	running := false
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" && w.Reason != "ContainerCreating" {
			ph.Phase = w.Reason
			return ph
		}
		if cs.State.Terminated != nil {
			ph.Phase = rollout.PhaseExited
			return ph
		}
		if cs.State.Running == nil {
			continue
		}
		running = true
		if cs.Started != nil && *cs.Started {
			continue
		}
		if probe := startupProbeOf(pod, cs.Name); probe != nil {
			ph.Phase = rollout.PhaseLoading
			ph.StartupDeadline = cs.State.Running.StartedAt.Add(vllmcause.StartupBudget(probe))
			return ph
		}
	}
	switch {
	case running:
		ph.Phase = rollout.PhaseStarting
	case pulling:
		ph.Phase = rollout.PhasePulling
	default:
		ph.Phase = rollout.PhaseScheduled
	}
	return ph
}

// startupProbeOf returns the startup probe of container name of pod.
func startupProbeOf(pod *corev1.Pod, name string) *corev1.Probe {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return pod.Spec.Containers[i].StartupProbe
		}
	}
	return nil
}

// pullingPods returns the pods whose latest image event is Pulling.
func pullingPods(events []*corev1.Event) map[string]bool {
	latest := map[string]*corev1.Event{}
	for _, e := range events {
		if e.InvolvedObject.Kind != "Pod" || (e.Reason != "Pulling" && e.Reason != "Pulled") {
			continue
		}
		if cur := latest[e.InvolvedObject.Name]; cur == nil || !eventTime(e).Before(eventTime(cur)) {
			latest[e.InvolvedObject.Name] = e
		}
	}
	out := map[string]bool{}
	for name, e := range latest {
		if e.Reason == "Pulling" {
			out[name] = true
		}
	}
	return out
}

// podPhasesIn returns the phases of pods in namespace; the events of the
// namespace (as far as its informer has synced: it never waits) tell the
// pods pulling an image from the merely scheduled ones.
func (r *rolloutRun) podPhasesIn(namespace string, pods []*corev1.Pod) []rollout.PodPhase {
	nw := r.ns[namespace]
	if nw == nil || !nw.events.synced() {
		return podPhases(pods, nil)
	}
	return podPhases(pods, nw.pulling)
}

// StartupBudget is how long the pods of objs' Deployments may take to
// become Ready as their probes allow: the largest startup probe budget
// plus readiness probe initial delay among their containers (0: no
// container has a startup probe).
func StartupBudget(objs []*unstructured.Unstructured) time.Duration {
	var budget time.Duration
	startupNeeds(objs, func(_ string, _ *corev1.Container, _, need time.Duration) {
		budget = max(budget, need)
	})
	return budget
}

// StartupWarnings returns a warning for every Deployment of objs whose
// pods may take longer to become Ready than timeout allows: the startup
// probe's budget plus the readiness probe's initial delay. A pod still
// loading its weights when the timeout passes fails the rollout as
// Timeout, though the kubelet would have let it finish.
func StartupWarnings(objs []*unstructured.Unstructured, timeout time.Duration) []string {
	if timeout <= 0 {
		return nil
	}
	var out []string
	startupNeeds(objs, func(workload string, c *corev1.Container, ready, need time.Duration) {
		if timeout >= need {
			return
		}
		readiness := ""
		if ready > 0 {
			readiness = fmt.Sprintf(" plus the readiness probe's initial delay of %s", ready)
		}
		out = append(out, fmt.Sprintf(
			"%s container %s: --timeout %s is shorter than the startup probe's budget of %s%s: a pod still loading its weights when the timeout passes fails the rollout as Timeout, though the kubelet would let it load; raise --timeout to %s or more, or lower probes.startup.failureThreshold",
			workload, c.Name, timeout, vllmcause.DescribeStartupBudget(c.StartupProbe), readiness, need))
	})
	return out
}

// startupNeeds calls fn for every container with a startup probe in the
// Deployments and StatefulSets of objs (named as kind/name), with the
// readiness probe's initial delay and what the container may take to
// become Ready: the startup probe's budget plus that delay.
func startupNeeds(objs []*unstructured.Unstructured, fn func(workload string, c *corev1.Container, ready, need time.Duration)) {
	for _, obj := range objs {
		if obj.GroupVersionKind().Group != appsv1.GroupName {
			continue
		}
		var tmpl *corev1.PodTemplateSpec
		switch obj.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
				continue
			}
			tmpl = &d.Spec.Template
		case "StatefulSet":
			var s appsv1.StatefulSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &s); err != nil {
				continue
			}
			tmpl = &s.Spec.Template
		default:
			continue
		}
		workload := strings.ToLower(obj.GetKind()) + "/" + obj.GetName()
		for i := range tmpl.Spec.Containers {
			c := &tmpl.Spec.Containers[i]
			if c.StartupProbe == nil {
				continue
			}
			var ready time.Duration
			if c.ReadinessProbe != nil {
				ready = time.Duration(c.ReadinessProbe.InitialDelaySeconds) * time.Second
			}
			fn(workload, c, ready, vllmcause.StartupBudget(c.StartupProbe)+ready)
		}
	}
}
