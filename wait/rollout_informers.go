// The RolloutWatcher's informers: how they are started and stopped, and
// the ones on a Deployment, the pods of its new ReplicaSet and the events
// of a namespace. The informer of ReplicaSets is in replicasets.go.

package wait

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// informer is a running informer.
type informer struct {
	inf    cache.SharedIndexInformer
	reg    cache.ResourceEventHandlerRegistration
	cancel context.CancelFunc
}

// nsWatch holds a namespace's event informer: one watch for the events of
// pods, ReplicaSets and StatefulSets (field-selected watches, one per
// kind, would cost requests more per deploy; the few other events of the
// namespace are dropped by the handler and cost little).
type nsWatch struct {
	events *informer

	// images are the namespace's Pulling and Pulled events of pods, kept
	// by the events' handler: the phase Pulling reads only these, instead
	// of every event of the namespace (thousands in a big rollout) on
	// every evaluation.
	mu     sync.Mutex
	images map[types.UID]*corev1.Event
}

// isImageEvent reports whether e is a Pulling or Pulled event of a pod
// (see pullingPods).
func isImageEvent(e *corev1.Event) bool {
	return e.InvolvedObject.Kind == "Pod" && (e.Reason == "Pulling" || e.Reason == "Pulled")
}

// noteImage records e, when it is an image event of a pod.
func (nw *nsWatch) noteImage(e *corev1.Event) {
	if !isImageEvent(e) {
		return
	}
	nw.mu.Lock()
	if nw.images == nil {
		nw.images = map[types.UID]*corev1.Event{}
	}
	nw.images[e.UID] = e
	nw.mu.Unlock()
}

// forgetImage drops obj, a deleted event (or its tombstone).
func (nw *nsWatch) forgetImage(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	e, ok := obj.(*corev1.Event)
	if !ok || !isImageEvent(e) {
		return
	}
	nw.mu.Lock()
	delete(nw.images, e.UID)
	nw.mu.Unlock()
}

// pulling returns the pods whose latest image event is Pulling.
func (nw *nsWatch) pulling() map[string]bool {
	nw.mu.Lock()
	events := make([]*corev1.Event, 0, len(nw.images))
	for _, e := range nw.images {
		events = append(events, e)
	}
	nw.mu.Unlock()
	return pullingPods(events)
}

// synced reports whether the informer listed, and its handler received,
// the initial objects.
func (i *informer) synced() bool { return i != nil && i.reg != nil && i.reg.HasSynced() }

// waitSynced waits (up to max) for the informer to sync.
func (i *informer) waitSynced(ctx context.Context, max time.Duration) {
	if i == nil || i.reg == nil || i.synced() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max)
	defer cancel()
	select {
	case <-i.reg.HasSyncedChecker().Done():
	case <-ctx.Done():
	}
}

func (i *informer) list() []interface{} {
	if i == nil {
		return nil
	}
	return i.inf.GetStore().List()
}

// newInformer starts an informer of the objects lw lists and watches,
// calling h on changes; it ends with the wait or with stop.
func (r *rolloutRun) newInformer(what string, lw *cache.ListWatch, example runtime.Object, h cache.ResourceEventHandler) *informer {
	// The client says whether it supports streaming lists (WatchList); the
	// fake clientset of the tests does not.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, r.client), example, 0, cache.Indexers{})
	// The verdicts never read managedFields, nor most of a pod's spec: a
	// big release's pods hold far less without them.
	_ = inf.SetTransform(slim)
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		// An expired resourceVersion (410 Gone) makes the reflector
		// re-list, a dropped connection re-watch; refusals are final.
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			select {
			case r.fatal <- fmt.Errorf("%s: %w", what, err):
			default:
			}
			return
		}
		r.noteUnreachable()
	})
	reg, _ := inf.AddEventHandler(h)
	ctx, cancel := context.WithCancel(r.ctx)
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		inf.RunWithContext(ctx)
	}()
	go func() {
		// The handler may have run before the informer counts as synced:
		// evaluate again once it does.
		defer r.wg.Done()
		select {
		case <-reg.HasSyncedChecker().Done():
			r.poke()
		case <-ctx.Done():
		}
	}()
	return &informer{inf: inf, reg: reg, cancel: cancel}
}

// slim is the informers' transform: before an object enters the cache, it
// drops its managedFields, which no verdict reads, a pod's spec but for
// what the verdicts and the progress read (see slimPod), and a Job's pod
// template.
func slim(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		slimPod(o)
	case *batchv1.Job:
		// Its pods are watched: the verdicts never read its template.
		o.Spec.Template = corev1.PodTemplateSpec{}
	case *unstructured.Unstructured:
		if isLeaderWorkerSet(o.GroupVersionKind()) {
			// Its pods are watched: the verdicts never read its templates.
			unstructured.RemoveNestedField(o.Object, "spec", "leaderWorkerTemplate", "leaderTemplate")
			unstructured.RemoveNestedField(o.Object, "spec", "leaderWorkerTemplate", "workerTemplate")
		}
	}
	return obj, nil
}

// slimPod keeps of pod's spec its node and its containers' names and
// startup probes (the phase Loading), and drops its annotations: a
// diagnosis reads the whole pod again (diagnoser.withSpec).
func slimPod(pod *corev1.Pod) {
	pod.Annotations = nil
	pod.Spec = corev1.PodSpec{
		NodeName:       pod.Spec.NodeName,
		Containers:     slimContainers(pod.Spec.Containers),
		InitContainers: slimContainers(pod.Spec.InitContainers),
	}
}

func slimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, StartupProbe: c.StartupProbe}
	}
	return out
}

// listWatch returns a ListWatch calling list and watch with the options
// modified by mod.
func listWatch[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error), watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), mod func(*metav1.ListOptions)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			mod(&o)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			mod(&o)
			return watchFn(ctx, o)
		},
	}
}

// pokeHandler wakes the main loop on any change.
func (r *rolloutRun) pokeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { r.poke() },
		UpdateFunc: func(any, any) { r.poke() },
		DeleteFunc: func(any) { r.poke() },
	}
}

// podHandler wakes the main loop on changes of pods the verdicts judge,
// counting the observations of each pod (see podJudge.judge), and raises
// the alarm (see settle) when a pod's trouble changed (see podTrouble).
func (r *rolloutRun) podHandler() cache.ResourceEventHandlerFuncs {
	observe := func(old *corev1.Pod, obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			r.mu.Lock()
			r.obs[p.UID]++
			r.mu.Unlock()
			if t := podTrouble(p); t != "" && (old == nil || podTrouble(old) != t) {
				r.raise()
			}
		}
		r.poke()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { observe(nil, obj) },
		UpdateFunc: func(old, cur any) {
			o, _ := old.(*corev1.Pod)
			c, _ := cur.(*corev1.Pod)
			if o == nil || c == nil || c.ResourceVersion == "" || o.ResourceVersion != c.ResourceVersion {
				observe(o, cur)
				return
			}
			r.poke()
		},
		DeleteFunc: func(any) { r.poke() },
	}
}

// podTrouble describes what of pod's state may be a verdict (see
// podJudge.judge): its containers that wait on an error, terminated with
// an error or restarted, and its being unschedulable; "" when there is
// none, the case of nearly every update of a healthy rollout, which
// allocates nothing.
func podTrouble(pod *corev1.Pod) string {
	var b strings.Builder
	for _, statuses := range [2][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range statuses {
			cs := &statuses[i]
			waiting := ""
			if cs.State.Waiting != nil {
				waiting = cs.State.Waiting.Reason
			}
			failed := cs.State.Terminated != nil && (cs.State.Terminated.ExitCode != 0 || cs.State.Terminated.Reason == reasonOOMKilled)
			quiet := waiting == "" || waiting == "ContainerCreating" || waiting == "PodInitializing"
			if quiet && !failed && cs.RestartCount == 0 {
				continue
			}
			fmt.Fprintf(&b, "%s:%s:%t:%d;", cs.Name, waiting, failed, cs.RestartCount)
		}
	}
	if c := podCondition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Reason == reasonUnschedulable {
		b.WriteString(reasonUnschedulable)
	}
	return b.String()
}

// deploymentHandler wakes the main loop on any change of a Deployment (or
// StatefulSet), and tells a settling loop that one changed (see settle).
func (r *rolloutRun) deploymentHandler() cache.ResourceEventHandler {
	turn := func() {
		select {
		case r.turned <- struct{}{}:
		default:
		}
		r.poke()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { turn() },
		UpdateFunc: func(any, any) { turn() },
		DeleteFunc: func(any) { turn() },
	}
}

// start starts the informer of a Deployment; its ReplicaSets' and new
// pods' start once it is seen (evaluate).
func (dw *deployWatch) start(r *rolloutRun) {
	c := r.deploymentsIn(dw.namespace)
	dw.self = r.newInformer("watch "+dw.ref.String(), listWatch(c.List, c.Watch, byName(dw.name)), &appsv1.Deployment{}, r.deploymentHandler())
}

// startPods starts the informer of the pods of a Deployment's new
// ReplicaSet: its selector plus the pod-template-hash.
func (r *rolloutRun) startPods(dw *deployWatch, sel labels.Selector, hash string) error {
	req, err := labels.NewRequirement(podTemplateHashLabel, selection.Equals, []string{hash})
	if err != nil {
		return fmt.Errorf("%s: pod-template-hash %q: %w", dw.ref, hash, err)
	}
	r.watchPods(&dw.watchBase, sel.Add(*req).String(), r.podHandler())
	dw.podHash = hash
	dw.judge = r.newJudge()
	return nil
}

// routineReasons are the reasons of the Normal events that every pod or
// rollout leaves, one or more per pod (the scheduler's, the kubelet's and
// the controllers' bookkeeping), which no verdict reads: the events'
// watch asks the API server to leave them out, so that what a deploy
// reads does not grow with the pods its namespace started in the last
// hour (a namespace keeps events for an hour: five rollouts of 1000
// replicas leave 5000 Scheduled events). A diagnosis lists the failed
// pod's own events, these included, when it needs them (podEvents).
// Pulling, Pulled and Killing stay: the phase Pulling and the cause
// startup-probe read them.
func routineReasons() []string {
	return []string{"Created", "ScalingReplicaSet", "Scheduled", "Started", "SuccessfulCreate", "SuccessfulDelete"}
}

// eventsFieldSelector is the events' watch's field selector: every event
// but the routine ones.
func eventsFieldSelector() string {
	reasons := routineReasons()
	sel := make([]fields.Selector, 0, len(reasons))
	for _, reason := range reasons {
		sel = append(sel, fields.OneTermNotEqualSelector("reason", reason))
	}
	return fields.AndSelectors(sel...).String()
}

// startEvents starts the informer of the events of pods, ReplicaSets and
// StatefulSets in a namespace, but for the routine ones.
func (r *rolloutRun) startEvents(namespace string) *nsWatch {
	c := r.client.CoreV1().Events(namespace)
	nw := &nsWatch{}
	sel := eventsFieldSelector()
	nw.events = r.newInformer("watch the events in namespace "+namespace,
		listWatch(c.List, c.Watch, func(o *metav1.ListOptions) { o.FieldSelector = sel }), &corev1.Event{}, r.eventHandler(nw))
	return nw
}

// eventHandler notes the events about pods, ReplicaSets and StatefulSets
// that happen during the wait: Warnings to report, and FailedCreate
// events of ReplicaSets and StatefulSets; and keeps nw's image events, those from before the wait
// included.
func (r *rolloutRun) eventHandler(nw *nsWatch) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			e, ok := obj.(*corev1.Event)
			if !ok {
				return
			}
			nw.noteImage(e)
			// Events from before the wait are history, not news.
			if !initial {
				r.noteEvent(e)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, _ := old.(*corev1.Event)
			e, ok := cur.(*corev1.Event)
			if !ok {
				return
			}
			nw.noteImage(e)
			if o == nil || o.Count != e.Count || o.Message != e.Message || !eventTime(o).Equal(eventTime(e)) {
				r.noteEvent(e)
			}
		},
		DeleteFunc: nw.forgetImage,
	}
}

// noteEvent records e, an event of a pod, a ReplicaSet or a StatefulSet,
// and wakes the main loop; events of other kinds are ignored.
func (r *rolloutRun) noteEvent(e *corev1.Event) {
	kind := e.InvolvedObject.Kind
	if kind != "Pod" && kind != "ReplicaSet" && kind != "StatefulSet" && kind != lwsKind {
		return
	}
	r.mu.Lock()
	if e.Type == corev1.EventTypeWarning || (kind == lwsKind && e.Reason == reasonRecreateGroup) {
		r.warnings = append(r.warnings, e)
	}
	if kind != "Pod" && e.Reason == reasonFailedCreate {
		if r.failedRS == nil {
			r.failedRS = map[types.UID]*corev1.Event{}
		}
		r.failedRS[e.InvolvedObject.UID] = e
		if r.failedAt == nil {
			r.failedAt = map[types.UID]time.Time{}
		}
		r.failedAt[e.InvolvedObject.UID] = r.clk.Now()
	}
	r.mu.Unlock()
	if kind != "Pod" && e.Reason == reasonFailedCreate {
		r.raise()
	}
	r.poke()
}
