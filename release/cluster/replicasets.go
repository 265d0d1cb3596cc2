// The ReplicaSet carrying a Deployment's current pod template, once its
// controller has observed the Deployment's latest generation.

package cluster

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	deploymentutil "k8s.io/kubectl/pkg/util/deployment"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// RevisionAnnotation is the annotation in which the Deployment controller
// numbers a Deployment's ReplicaSets.
const RevisionAnnotation = deploymentutil.RevisionAnnotation

// CurrentReplicaSetsFrom returns, for every Deployment among objs (in
// order), the ReplicaSet carrying its current pod template (see
// currentReplicaSet); Deployments without a namespace are looked up in
// namespace. It starts from the
// Deployments as an apply just returned them (by object.Ref.String(); a
// missing one is read), so that none is read again, and with stall's bound
// on a Deployment controller that does not act.
func CurrentReplicaSetsFrom(ctx context.Context, client kubernetes.Interface, objs []*unstructured.Unstructured, namespace string,
	applied map[string]*unstructured.Unstructured, stall Stall) ([]storage.ReplicaSetRef, error) {
	var refs []storage.ReplicaSetRef
	for _, obj := range objs {
		ref := object.RefOf(obj)
		if !ref.IsDeployment() {
			continue
		}
		ns := ref.Namespace
		if ns == "" {
			ns = namespace
		}
		ref.Namespace = ns
		var start *appsv1.Deployment
		if u := applied[ref.String()]; u != nil {
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err == nil {
				start = d
			}
		}
		rs, err := currentReplicaSet(ctx, client, ns, ref.Name, start, stall)
		if err != nil {
			return refs, err
		}
		refs = append(refs, rs)
	}
	return refs, nil
}

// currentReplicaSet waits until the Deployment controller has observed the
// Deployment's latest generation (status.observedGeneration >=
// metadata.generation), watching the Deployment from the resourceVersion it
// read, then returns the ReplicaSet the Deployment controls whose pod
// template equals the Deployment's, ignoring the pod-template-hash label:
// the controller's own rule for its "new" ReplicaSet. If several match, the
// oldest wins, as in the controller.
//
// ctx bounds the wait. A paused Deployment, or one whose controller has not
// created the ReplicaSet, is an error.
// It starts from the Deployment start, when known (else it is read).
func currentReplicaSet(ctx context.Context, client kubernetes.Interface, namespace, name string, start *appsv1.Deployment, stall Stall) (storage.ReplicaSetRef, error) {
	obj := "Deployment " + namespace + "/" + name
	d, err := observedDeployment(ctx, client, namespace, name, start, stall)
	if err != nil {
		return storage.ReplicaSetRef{}, err
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return storage.ReplicaSetRef{}, fmt.Errorf("%s: invalid selector: %w", obj, err)
	}
	list, err := client.AppsV1().ReplicaSets(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return storage.ReplicaSetRef{}, fmt.Errorf("%s: list ReplicaSets: %w", obj, err)
	}
	rs := NewReplicaSet(d, list.Items)
	if rs == nil {
		if d.Spec.Paused {
			return storage.ReplicaSetRef{}, fmt.Errorf("%s is paused: its controller creates no ReplicaSet for the current pod template", obj)
		}
		return storage.ReplicaSetRef{}, fmt.Errorf("%s: no ReplicaSet it controls has its current pod template (generation %d)", obj, d.Generation)
	}
	ref := storage.ReplicaSetRef{
		Deployment:      name,
		Name:            rs.Name,
		PodTemplateHash: rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey],
	}
	rev, err := deploymentutil.Revision(rs)
	if err != nil {
		return storage.ReplicaSetRef{}, fmt.Errorf("ReplicaSet %s/%s: annotation %s=%q: %w", namespace, rs.Name, RevisionAnnotation, rs.Annotations[RevisionAnnotation], err)
	}
	ref.Revision = rev
	return ref, nil
}

// observed reports whether the Deployment controller has seen d's latest
// spec.
func observed(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation
}

// observedDeployment returns the Deployment once its controller has
// observed its latest generation, watching (not polling) until then.
func observedDeployment(ctx context.Context, client kubernetes.Interface, namespace, name string, start *appsv1.Deployment, stall Stall) (*appsv1.Deployment, error) {
	deps := client.AppsV1().Deployments(namespace)
	return observedObject(ctx, "Deployment "+namespace+"/"+name, "deployment/"+name, appsv1.Resource("deployments"), namespace, name, start, start != nil,
		stall, deps.Get, deps.Watch, observed, func(d *appsv1.Deployment) int64 { return d.Status.ObservedGeneration })
}

// generational is an object whose controller reports the generation it
// observed.
type generational interface {
	runtime.Object
	GetName() string
	GetGeneration() int64
	GetResourceVersion() string
}

// observedObject returns the object name (start, when known and read from
// the cluster, else read) once isObserved says its controller observed its
// latest generation, watching from the resourceVersion it read (a retry
// watcher, field selector on the name) until then. what names the object
// in errors, ref as kubectl does ("deployment/web"). Past stall's budget
// (the API server reachable) it fails with a *wait.ControllerStalledError;
// observedOf reads the generation the object's status reports observed.
func observedObject[T generational](ctx context.Context, what, ref string, gr schema.GroupResource, namespace, name string, start T, known bool,
	stall Stall,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	isObserved func(T) bool, observedOf func(T) int64) (T, error) {
	var zero T
	obj := start
	if !known || obj.GetResourceVersion() == "" {
		var err error
		if obj, err = get(ctx, name, metav1.GetOptions{}); err != nil {
			return zero, fmt.Errorf("get %s: %w", what, err)
		}
	}
	if isObserved(obj) {
		return obj, nil
	}
	sctx, reset, elapsed, stop := stall.watch(ctx)
	defer stop()
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	watches := 0
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = selector
		w, err := watchFn(ctx, o)
		if watches++; watches > 1 || err != nil {
			// The last watch ended, or this one could not start: the API
			// server may have gone away; its time does not count.
			reset()
		}
		return w, err
	}}
	w, err := watchtools.NewRetryWatcherWithContext(sctx, obj.GetResourceVersion(), lw)
	if err != nil {
		return zero, fmt.Errorf("watch %s: %w", what, err)
	}
	defer w.Stop()
	generation := obj.GetGeneration()
	_, err = watchtools.UntilWithoutRetry(sctx, w, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Deleted:
			return false, apierrors.NewNotFound(gr, name)
		case watch.Error:
			return false, apierrors.FromObject(ev.Object)
		}
		got, ok := ev.Object.(T)
		if !ok || got.GetName() != name {
			return false, nil
		}
		obj, generation = got, got.GetGeneration()
		return isObserved(got), nil
	})
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		} else if errors.Is(context.Cause(sctx), errStalled) {
			return zero, &wait.ControllerStalledError{Object: what, Ref: ref, Namespace: namespace,
				Generation: generation, Observed: observedOf(obj), After: elapsed()}
		}
		return zero, fmt.Errorf("%s: waiting for its controller to observe generation %d: %w", what, generation, err)
	}
	return obj, nil
}

// newReplicaSet returns the Deployment's new ReplicaSet among items, by the
// Deployment controller's rule: see [wait.NewReplicaSet], the one copy of
// it.
func NewReplicaSet(d *appsv1.Deployment, items []appsv1.ReplicaSet) *appsv1.ReplicaSet {
	rss := make([]*appsv1.ReplicaSet, len(items))
	for i := range items {
		rss[i] = &items[i]
	}
	return wait.NewReplicaSet(d, rss)
}
