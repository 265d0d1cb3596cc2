// StatefulSets: the ControllerRevision carrying a StatefulSet's current pod
// template, and the rescue of a StatefulSet stuck on a bad revision.

package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/release/storage"
)

// ControllerRevisionHashLabel is the label in which the StatefulSet
// controller names the ControllerRevision of each pod.
const ControllerRevisionHashLabel = appsv1.ControllerRevisionHashLabelKey

// controllerRevisionHashKey is the label of a ControllerRevision holding
// its hash.
const controllerRevisionHashKey = "controller.kubernetes.io/hash"

// podIndexLabel is the label in which the StatefulSet controller writes a
// pod's ordinal.
const podIndexLabel = appsv1.PodIndexLabel

// IsStatefulSet reports whether ref is an apps StatefulSet.
func IsStatefulSet(ref object.Ref) bool {
	return ref.Kind == "StatefulSet" && (ref.Group == "apps" || ref.Group == "")
}

// CurrentControllerRevisionsFrom returns, for every StatefulSet among objs
// (in order), the ControllerRevision carrying its current pod template:
// once its controller has observed its latest generation (watched, not
// polled), the revision named by status.updateRevision. applied holds the
// StatefulSets as an apply just returned them (by object.Ref.String(); a
// missing one is read). StatefulSets without a namespace are looked up in
// namespace. stall bounds the wait for a controller that does not act.
func CurrentControllerRevisionsFrom(ctx context.Context, client kubernetes.Interface, objs []*unstructured.Unstructured, namespace string,
	applied map[string]*unstructured.Unstructured, stall Stall) ([]storage.ControllerRevisionRef, error) {
	var refs []storage.ControllerRevisionRef
	for _, obj := range objs {
		ref := object.RefOf(obj)
		if !IsStatefulSet(ref) {
			continue
		}
		if ref.Namespace == "" {
			ref.Namespace = namespace
		}
		var start *appsv1.StatefulSet
		if u := applied[ref.String()]; u != nil {
			s := &appsv1.StatefulSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err == nil {
				start = s
			}
		}
		sts, err := ObservedStatefulSet(ctx, client, ref.Namespace, ref.Name, start, stall)
		if err != nil {
			return refs, err
		}
		cr, err := currentControllerRevision(ctx, client, sts)
		if err != nil {
			return refs, err
		}
		refs = append(refs, cr)
	}
	return refs, nil
}

// ObservedStatefulSet returns the StatefulSet namespace/name (start, when
// known) once its controller has observed its latest generation and named
// its update revision, watching until then, within stall's bound.
func ObservedStatefulSet(ctx context.Context, client kubernetes.Interface, namespace, name string, start *appsv1.StatefulSet, stall Stall) (*appsv1.StatefulSet, error) {
	sets := client.AppsV1().StatefulSets(namespace)
	return observedObject(ctx, "StatefulSet "+namespace+"/"+name, "statefulset/"+name, appsv1.Resource("statefulsets"), namespace, name, start, start != nil,
		stall, sets.Get, sets.Watch, func(s *appsv1.StatefulSet) bool {
			return s.Status.ObservedGeneration >= s.Generation && s.Status.UpdateRevision != ""
		}, func(s *appsv1.StatefulSet) int64 { return s.Status.ObservedGeneration })
}

// currentControllerRevision reads the ControllerRevision sts's status
// names as its update revision.
func currentControllerRevision(ctx context.Context, client kubernetes.Interface, sts *appsv1.StatefulSet) (storage.ControllerRevisionRef, error) {
	name := sts.Status.UpdateRevision
	cr, err := client.AppsV1().ControllerRevisions(sts.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return storage.ControllerRevisionRef{}, fmt.Errorf("StatefulSet %s/%s: get its update revision, ControllerRevision %s: %w", sts.Namespace, sts.Name, name, err)
	}
	hash := cr.Labels[controllerRevisionHashKey]
	if hash == "" {
		hash = strings.TrimPrefix(name, sts.Name+"-")
	}
	return storage.ControllerRevisionRef{StatefulSet: sts.Name, Name: cr.Name, Hash: hash, Revision: cr.Revision}, nil
}

// RescueEvent is one step of a rescue: a pod evicted, or waited for.
type RescueEvent struct {
	Pod     string
	Action  string // "evicted", "gone", "blocked"
	Message string
}

// RescueStatefulSet frees a StatefulSet stuck on a bad revision, the
// rollout failure its controller cannot undo (kubernetes#67250): once its
// controller observed the restored template, every pod of it still on
// another revision than the update revision that is not Ready is evicted,
// highest ordinal first, through the Eviction API (so that
// PodDisruptionBudgets are respected: an eviction refused for a budget is
// retried until ctx ends), leaving its PersistentVolumeClaims alone. The
// controller then creates those pods again from the restored template.
// Pods on the old revision that are Ready are left to the controller's
// own rolling update. It returns the pods evicted; report (may be nil)
// sees each step.
func RescueStatefulSet(ctx context.Context, client kubernetes.Interface, clk clock.Clock, namespace, name string, report func(RescueEvent)) ([]string, error) {
	what := "StatefulSet " + namespace + "/" + name
	sts, err := ObservedStatefulSet(ctx, client, namespace, name, nil, Stall{})
	if err != nil {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid selector: %w", what, err)
	}
	list, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("%s: list its pods: %w", what, err)
	}
	stuck := StuckPods(sts, list.Items)
	var evicted []string
	for _, pod := range stuck {
		gone, err := evict(ctx, client, clk, pod, report)
		if err != nil {
			return evicted, fmt.Errorf("%s: evict pod %s (revision %s): %w", what, pod.Name, pod.Labels[ControllerRevisionHashLabel], err)
		}
		if !gone {
			evicted = append(evicted, pod.Name)
		}
	}
	return evicted, nil
}

// StuckPods returns the pods among pods that sts controls, are on another
// revision than its update revision, are not Ready and are not being
// deleted, highest ordinal first: the order in which a rescue evicts
// them (the StatefulSet controller's own order for a scale-down).
func StuckPods(sts *appsv1.StatefulSet, pods []corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		owner := metav1.GetControllerOf(p)
		if owner == nil || owner.Kind != "StatefulSet" || owner.Name != sts.Name {
			continue
		}
		if p.DeletionTimestamp != nil || p.Labels[ControllerRevisionHashLabel] == sts.Status.UpdateRevision || podutils.IsPodReady(p) {
			continue
		}
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b *corev1.Pod) int { return ordinal(b) - ordinal(a) })
	return out
}

// ordinal is a StatefulSet pod's index: its pod-index label, else the
// number after the last dash of its name (-1 when neither says).
func ordinal(p *corev1.Pod) int {
	s := p.Labels[podIndexLabel]
	if s == "" {
		if i := strings.LastIndexByte(p.Name, '-'); i >= 0 {
			s = p.Name[i+1:]
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// evictRetry is how long a rescue waits before asking again for an
// eviction a PodDisruptionBudget refused.
const evictRetry = time.Second

// evict evicts pod (its UID as precondition: a pod of the same name the
// controller made since is not touched); a refusal for a disruption budget
// (429) is retried every evictRetry until ctx ends. gone reports a pod
// that no longer existed.
func evict(ctx context.Context, client kubernetes.Interface, clk clock.Clock, pod *corev1.Pod, report func(RescueEvent)) (gone bool, err error) {
	uid := pod.UID
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	}
	say := func(action, msg string) {
		if report != nil {
			report(RescueEvent{Pod: pod.Name, Action: action, Message: msg})
		}
	}
	blocked := false
	for {
		err := client.CoreV1().Pods(pod.Namespace).EvictV1(ctx, ev)
		switch {
		case err == nil:
			say("evicted", fmt.Sprintf("on revision %s, not ready", pod.Labels[ControllerRevisionHashLabel]))
			return false, nil
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			say("gone", "already deleted or replaced")
			return true, nil
		case !apierrors.IsTooManyRequests(err):
			return false, err
		}
		if !blocked {
			say("blocked", "a PodDisruptionBudget refuses the eviction for now: "+err.Error())
			blocked = true
		}
		select {
		case <-ctx.Done():
			return false, errors.Join(ctx.Err(), err)
		case <-clk.After(evictRetry):
		}
	}
}
