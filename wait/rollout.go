package wait

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// RolloutWatcher waits for Deployments to roll out and detects failed
// rollouts early, with a [Diagnosis].
//
// It watches, never polls: per Deployment, informers (list, then watch from
// the list's resourceVersion; re-listed on 410 Gone, re-established after
// dropped connections) on the Deployment itself (field selector on its
// name), on its ReplicaSets (its label selector), on the pods of its new
// ReplicaSet only (its selector plus pod-template-hash), and, per
// namespace, on the events of pods and of ReplicaSets (field selector on
// involvedObject.kind). A healthy rollout therefore costs a fixed number of
// requests however long it takes. Other objects are left to another
// Waiter, a [KstatusWaiter] by default.
//
// A Deployment succeeds by kubectl rollout status' rules: its controller
// observed the latest generation, every replica is updated, no old replica
// is left, and every updated replica is available. It fails on the
// verdicts of [RolloutOptions] about the pods of its new ReplicaSet, when
// its Progressing condition says ProgressDeadlineExceeded, or when its new
// ReplicaSet cannot create pods (FailedCreate). Pods of old ReplicaSets
// failing do not fail the rollout; they are reported as warnings.
type RolloutWatcher struct {
	client kubernetes.Interface
	others Waiter
	opts   RolloutOptions
}

var _ Waiter = (*RolloutWatcher)(nil)

// NewRolloutWatcher returns a RolloutWatcher reading the cluster through
// client. others waits for the objects that are not Deployments; it may be
// nil when there are none.
func NewRolloutWatcher(client kubernetes.Interface, others Waiter, opts RolloutOptions) *RolloutWatcher {
	return &RolloutWatcher{client: client, others: others, opts: opts.withDefaults()}
}

// NewRolloutWatcherForConfig returns a RolloutWatcher for the cluster of
// cfg, with a KstatusWaiter (and a discovery-backed REST mapper) for the
// objects that are not Deployments.
func NewRolloutWatcherForConfig(cfg *rest.Config, opts RolloutOptions) (*RolloutWatcher, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return NewRolloutWatcher(client, NewKstatusWaiter(dyn, mapper), opts), nil
}

// Wait watches objs until every Deployment rolled out and every other
// object is Current, a failure verdict is reached, opts.Timeout passes or
// ctx ends. See [Waiter]. On a failure or a timeout the Result carries a
// Diagnosis and the error is a *RolloutFailedError wrapping a
// *NotReadyError. An error from the cluster (a watch refused) ends the
// wait with OutcomeError.
//
// The events of a Deployment carry a RolloutProgress; one is sent whenever
// its status, message or progress changes, and one per warning (with the
// status unchanged). The last event of a failed Deployment carries the
// failure verdict.
func (w *RolloutWatcher) Wait(ctx context.Context, objs []*unstructured.Unstructured, opts Options) (Result, error) {
	if opts.Events != nil {
		defer close(opts.Events)
	}
	r := &rolloutRun{
		client: w.client,
		others: w.others,
		o:      w.opts,
		clk:    w.opts.Clock,
		opts:   opts,
		kick:   make(chan struct{}, 1),
		fatal:  make(chan error, 1),
		obs:    map[types.UID]int{},
		ns:     map[string]*nsWatch{},
	}
	return r.wait(ctx, objs)
}

// rolloutRun is the state of one Wait.
type rolloutRun struct {
	client kubernetes.Interface
	others Waiter
	o      RolloutOptions
	clk    clock.WithTicker
	opts   Options
	start  time.Time
	res    Result

	deps   []*deployWatch
	other  []*unstructured.Unstructured
	ns     map[string]*nsWatch
	ctx    context.Context // the informers' context
	wg     sync.WaitGroup  // the informers' goroutines
	kick   chan struct{}   // something changed
	fatal  chan error      // an informer cannot watch
	sendTo context.Context // bounds sends on opts.Events

	mu       sync.Mutex
	obs      map[types.UID]int // observations of new pods, by the informers
	warnings []*corev1.Event   // Warning events not reported yet
	failedRS map[types.UID]*corev1.Event
	// failedAt is when the watcher received the latest FailedCreate event
	// of a ReplicaSet (its own clock: no skew with the cluster's).
	failedAt map[types.UID]time.Time
}

// deployWatch follows one Deployment.
type deployWatch struct {
	idx       int
	ref       ObjectRef
	namespace string
	name      string
	object    string // "deployment/chat"

	dep, rs, pods *informer
	uid           types.UID
	podHash       string
	judge         *podJudge

	d        *appsv1.Deployment
	newRS    *appsv1.ReplicaSet
	oldRS    []*appsv1.ReplicaSet
	done     bool
	msg      string
	progress RolloutProgress
	lastSent RolloutProgress // the progress last sent
	sent     bool
	suspect  *podFinding
	warned   map[string]bool
	// released is when the watcher last saw pods of the Deployment going
	// away (a ReplicaSet with more pods than it wants, or terminating
	// ones), which frees their share of a quota; guarded by rolloutRun.mu.
	released time.Time
}

// nsWatch holds a namespace's event informers.
type nsWatch struct {
	podEvents, rsEvents *informer
}

// informer is a running informer.
type informer struct {
	inf    cache.SharedIndexInformer
	reg    cache.ResourceEventHandlerRegistration
	cancel context.CancelFunc
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

// failure is a failure verdict reached on the cluster, before diagnosis.
type failure struct {
	verdict Verdict
	dw      *deployWatch // nil for another object
	finding *podFinding  // a pod's failure
	reason  string       // otherwise: the Deployment's or ReplicaSet's
	message string
	rs      *appsv1.ReplicaSet
	other   int // the Result index of another object that failed
}

type otherResult struct {
	res Result
	err error
}

func (r *rolloutRun) wait(ctx context.Context, objs []*unstructured.Unstructured) (Result, error) {
	r.start = r.clk.Now()
	r.sendTo = ctx
	finish := func(o Outcome, err error) (Result, error) {
		r.res.Outcome = o
		r.res.Elapsed = r.clk.Since(r.start)
		return r.res, err
	}
	if err := r.identify(objs); err != nil {
		return finish(OutcomeError, err)
	}
	if len(r.deps) == 0 && len(r.other) == 0 {
		return finish(OutcomeCurrent, nil)
	}
	if len(r.other) > 0 && r.others == nil {
		return finish(OutcomeError, fmt.Errorf("%s: no waiter for objects other than Deployments", r.res.Objects[r.otherIndex(0)].Object))
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ictx, stopInformers := context.WithCancel(wctx)
	r.ctx = ictx
	defer func() {
		stopInformers()
		r.wg.Wait()
	}()
	for _, dw := range r.deps {
		r.startDeployment(dw)
		if r.ns[dw.namespace] == nil {
			r.ns[dw.namespace] = r.startEvents(dw.namespace)
		}
	}

	// The other objects, by the other waiter, concurrently.
	var otherEvents chan Event
	var otherDone chan otherResult
	othersCurrent := len(r.other) == 0
	if len(r.other) > 0 {
		otherEvents = make(chan Event)
		otherDone = make(chan otherResult, 1)
		octx, stopOthers := context.WithCancel(wctx)
		go func() {
			res, err := r.others.Wait(octx, r.other, Options{Namespace: r.opts.Namespace, Events: otherEvents})
			otherDone <- otherResult{res, err}
		}()
		events := otherEvents
		defer func() {
			stopOthers()
			for range events {
			}
		}()
	}

	var timeout <-chan time.Time
	if r.opts.Timeout > 0 {
		t := r.clk.NewTimer(r.opts.Timeout)
		defer t.Stop()
		timeout = t.C()
	}
	var recheckTimer clock.Timer
	defer func() {
		if recheckTimer != nil {
			recheckTimer.Stop()
		}
	}()

	r.sendTo = wctx
	var fail *failure
	var fatal error
	timedOut := false
loop:
	for {
		f, allDone, recheck := r.evaluate()
		if f != nil {
			fail = f
			break
		}
		if allDone && othersCurrent {
			break
		}
		var recheckC <-chan time.Time
		if recheckTimer != nil {
			recheckTimer.Stop()
			recheckTimer = nil
		}
		if !recheck.IsZero() {
			d := recheck.Sub(r.clk.Now())
			if d <= 0 {
				continue
			}
			recheckTimer = r.clk.NewTimer(d)
			recheckC = recheckTimer.C()
		}
		select {
		case <-wctx.Done():
			break loop
		case <-timeout:
			timedOut = true
			break loop
		case err := <-r.fatal:
			fatal = err
			break loop
		case <-r.kick:
		case <-recheckC:
		case ev, ok := <-otherEvents:
			if !ok {
				otherEvents = nil
				continue
			}
			r.otherEvent(ev)
		case or := <-otherDone:
			otherDone = nil
			for _, s := range or.res.Objects {
				r.setOther(s)
			}
			switch {
			case or.err == nil && or.res.Outcome == OutcomeCurrent:
				othersCurrent = true
			case or.res.Outcome == OutcomeFailed:
				fail = r.otherFailure()
				break loop
			case or.res.Outcome == OutcomeError || (or.err != nil && wctx.Err() == nil):
				fatal = or.err
				if fatal == nil {
					fatal = fmt.Errorf("waiting for the other objects ended with %s", or.res.Outcome)
				}
				break loop
			}
		}
	}
	r.sendTo = ctx

	switch {
	case fatal != nil:
		return finish(OutcomeError, fmt.Errorf("watch rollout: %w", fatal))
	case fail != nil:
		d := r.diagnose(ctx, fail)
		r.res.Diagnosis = d
		idx := fail.other
		if fail.dw != nil {
			idx = fail.dw.idx
			fail.dw.progress.Verdict = fail.verdict
			r.set(fail.dw, StatusFailed, d.Summary(), "")
		} else {
			r.res.Objects[idx].Status, r.res.Objects[idx].Message = StatusFailed, d.Summary()
		}
		res, _ := finish(OutcomeFailed, nil)
		nre := &NotReadyError{Outcome: OutcomeFailed, Objects: failedFirst(res.NotCurrent())}
		return res, &RolloutFailedError{Diagnosis: d, NotReady: nre}
	case !timedOut && ctx.Err() == nil && wctx.Err() == nil:
		for _, dw := range r.deps {
			if dw.progress.Verdict != VerdictRolledOut {
				dw.progress.Verdict = VerdictRolledOut
				r.set(dw, StatusCurrent, dw.msg, "")
			}
		}
		return finish(OutcomeCurrent, nil)
	case !timedOut && errors.Is(ctx.Err(), context.Canceled):
		return finish(OutcomeCanceled, fmt.Errorf("wait canceled: %w", ctx.Err()))
	}
	// The timeout, or ctx's deadline.
	d := r.diagnoseTimeout(ctx)
	r.res.Diagnosis = d
	res, _ := finish(OutcomeTimeout, nil)
	nre := &NotReadyError{Outcome: OutcomeTimeout, Objects: res.NotCurrent()}
	if timedOut {
		nre.Timeout = r.opts.Timeout
	}
	return res, &RolloutFailedError{Diagnosis: d, NotReady: nre}
}

// identify sorts objs into Deployments and others and fills res.Objects in
// order, without duplicates.
func (r *rolloutRun) identify(objs []*unstructured.Unstructured) error {
	seen := map[ObjectRef]bool{}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		ref := ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
		isDeployment := gvk.Group == appsv1.GroupName && gvk.Kind == "Deployment"
		if isDeployment && ref.Namespace == "" {
			if r.opts.Namespace == "" {
				return fmt.Errorf("%s: no namespace, and the wait has no default namespace", ref)
			}
			ref.Namespace = r.opts.Namespace
		}
		key := ref
		key.Version = ""
		if seen[key] {
			continue
		}
		seen[key] = true
		idx := len(r.res.Objects)
		r.res.Objects = append(r.res.Objects, ObjectStatus{Object: ref, Status: StatusUnknown})
		if !isDeployment {
			r.other = append(r.other, obj)
			continue
		}
		r.deps = append(r.deps, &deployWatch{
			idx: idx, ref: ref, namespace: ref.Namespace, name: ref.Name, object: objectName(ref),
			judge: newPodJudge(r.o), warned: map[string]bool{},
			progress: RolloutProgress{Deployment: ref.Name, Verdict: VerdictProgressing},
		})
	}
	return nil
}

// otherIndex returns the Result index of the i-th other object.
func (r *rolloutRun) otherIndex(i int) int {
	n := 0
	for idx, s := range r.res.Objects {
		if s.Object.Group == appsv1.GroupName && s.Object.Kind == "Deployment" {
			continue
		}
		if n == i {
			return idx
		}
		n++
	}
	return -1
}

// findOther returns the Result index of another object's status, matching
// on group, kind and name, and on namespace when ours has one.
func (r *rolloutRun) findOther(ref ObjectRef) int {
	for i, s := range r.res.Objects {
		o := s.Object
		if o.Group == ref.Group && o.Kind == ref.Kind && o.Name == ref.Name && (o.Namespace == "" || o.Namespace == ref.Namespace) {
			if o.Group == appsv1.GroupName && o.Kind == "Deployment" {
				continue
			}
			return i
		}
	}
	return -1
}

func (r *rolloutRun) setOther(s ObjectStatus) int {
	i := r.findOther(s.Object)
	if i >= 0 {
		r.res.Objects[i] = s
	}
	return i
}

// otherEvent records and forwards an event of the other waiter.
func (r *rolloutRun) otherEvent(ev Event) {
	r.setOther(ObjectStatus{Object: ev.Object, Status: ev.Status, Message: ev.Message})
	r.emit(ev)
}

// otherFailure is the failure of the first other object that failed.
func (r *rolloutRun) otherFailure() *failure {
	for i, s := range r.res.Objects {
		if s.Status == StatusFailed {
			return &failure{verdict: VerdictObjectFailed, other: i, reason: reasonObjectFailed, message: s.Message}
		}
	}
	return &failure{verdict: VerdictObjectFailed, other: r.otherIndex(0), reason: reasonObjectFailed}
}

// poke wakes the main loop.
func (r *rolloutRun) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// emit sends ev on opts.Events, stamped, unless the wait is over.
func (r *rolloutRun) emit(ev Event) {
	if r.opts.Events == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = r.clk.Now()
	}
	select {
	case r.opts.Events <- ev:
	case <-r.sendTo.Done():
	}
}

// set records a Deployment's status and sends an event when it, or the
// rollout's progress, changed; warning, when set, is sent in any case.
func (r *rolloutRun) set(dw *deployWatch, st Status, msg, warning string) {
	cur := &r.res.Objects[dw.idx]
	p := dw.progress
	p.OldReplicaSets = append([]string(nil), p.OldReplicaSets...)
	changed := !dw.sent || cur.Status != st || cur.Message != msg || !reflect.DeepEqual(p, dw.lastSent)
	cur.Status, cur.Message = st, msg
	if !changed && warning == "" {
		return
	}
	dw.sent, dw.lastSent = true, p
	p.Warning = warning
	r.emit(Event{Object: dw.ref, Status: st, Message: msg, Rollout: &p})
}

// newInformer starts an informer of the objects lw lists and watches,
// calling h on changes; it ends with the wait or with stop.
func (r *rolloutRun) newInformer(what string, lw *cache.ListWatch, example runtime.Object, h cache.ResourceEventHandler) *informer {
	// The client says whether it supports streaming lists (WatchList); the
	// fake clientset of the tests does not.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, r.client), example, 0, cache.Indexers{})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		// An expired resourceVersion (410 Gone) makes the reflector
		// re-list, a dropped connection re-watch; refusals are final.
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			select {
			case r.fatal <- fmt.Errorf("%s: %w", what, err):
			default:
			}
		}
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

// startDeployment starts the informer of a Deployment.
func (r *rolloutRun) startDeployment(dw *deployWatch) {
	c := r.client.AppsV1().Deployments(dw.namespace)
	name := fields.OneTermEqualSelector("metadata.name", dw.name).String()
	dw.dep = r.newInformer("watch "+dw.ref.String(),
		listWatch(c.List, c.Watch, func(o *metav1.ListOptions) { o.FieldSelector = name }),
		&appsv1.Deployment{}, r.pokeHandler())
}

// startReplicaSets starts the informer of the ReplicaSets a Deployment
// selects.
func (r *rolloutRun) startReplicaSets(dw *deployWatch, sel labels.Selector) {
	c := r.client.AppsV1().ReplicaSets(dw.namespace)
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

// startPods starts the informer of the pods of a Deployment's new
// ReplicaSet: its selector plus the pod-template-hash.
func (r *rolloutRun) startPods(dw *deployWatch, sel labels.Selector, hash string) error {
	req, err := labels.NewRequirement(podTemplateHashLabel, selection.Equals, []string{hash})
	if err != nil {
		return fmt.Errorf("%s: pod-template-hash %q: %w", dw.ref, hash, err)
	}
	s := sel.Add(*req).String()
	c := r.client.CoreV1().Pods(dw.namespace)
	observe := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			r.mu.Lock()
			r.obs[p.UID]++
			r.mu.Unlock()
		}
		r.poke()
	}
	dw.pods = r.newInformer("watch the pods of "+dw.ref.String(),
		listWatch(c.List, c.Watch, func(o *metav1.ListOptions) { o.LabelSelector = s }),
		&corev1.Pod{}, cache.ResourceEventHandlerFuncs{
			AddFunc: observe,
			UpdateFunc: func(old, cur any) {
				o, _ := old.(*corev1.Pod)
				c, _ := cur.(*corev1.Pod)
				if o == nil || c == nil || c.ResourceVersion == "" || o.ResourceVersion != c.ResourceVersion {
					observe(cur)
					return
				}
				r.poke()
			},
			DeleteFunc: func(any) { r.poke() },
		})
	dw.podHash = hash
	dw.judge = newPodJudge(r.o)
	return nil
}

// startEvents starts the informers of the events of pods and of
// ReplicaSets in a namespace.
func (r *rolloutRun) startEvents(namespace string) *nsWatch {
	c := r.client.CoreV1().Events(namespace)
	handler := func(kind string) cache.ResourceEventHandler {
		note := func(e *corev1.Event) {
			if e.InvolvedObject.Kind != kind {
				return
			}
			r.mu.Lock()
			if e.Type == corev1.EventTypeWarning {
				r.warnings = append(r.warnings, e)
			}
			if kind == "ReplicaSet" && e.Reason == reasonFailedCreate {
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
			r.poke()
		}
		return cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				// Events from before the wait are history, not news.
				if e, ok := obj.(*corev1.Event); ok && !initial {
					note(e)
				}
			},
			UpdateFunc: func(old, cur any) {
				o, _ := old.(*corev1.Event)
				e, ok := cur.(*corev1.Event)
				if ok && (o == nil || o.Count != e.Count || o.Message != e.Message || !eventTime(o).Equal(eventTime(e))) {
					note(e)
				}
			},
		}
	}
	kindSelector := func(kind string) func(*metav1.ListOptions) {
		s := fields.OneTermEqualSelector("involvedObject.kind", kind).String()
		return func(o *metav1.ListOptions) { o.FieldSelector = s }
	}
	return &nsWatch{
		podEvents: r.newInformer("watch the pod events in namespace "+namespace,
			listWatch(c.List, c.Watch, kindSelector("Pod")), &corev1.Event{}, handler("Pod")),
		rsEvents: r.newInformer("watch the ReplicaSet events in namespace "+namespace,
			listWatch(c.List, c.Watch, kindSelector("ReplicaSet")), &corev1.Event{}, handler("ReplicaSet")),
	}
}

// evaluate brings every Deployment's state up to date and reports the
// first failure, whether every Deployment rolled out, and when to evaluate
// again without news (zero: no need).
func (r *rolloutRun) evaluate() (fail *failure, allDone bool, recheck time.Time) {
	r.mu.Lock()
	warnings := r.warnings
	r.warnings = nil
	r.mu.Unlock()

	allDone = true
	now := r.clk.Now()
	for _, dw := range r.deps {
		f, again := r.evaluateDeployment(dw, now)
		if f != nil && fail == nil {
			fail = f
		}
		if !dw.done {
			allDone = false
		}
		if !again.IsZero() && (recheck.IsZero() || again.Before(recheck)) {
			recheck = again
		}
	}
	for _, e := range warnings {
		r.reportEvent(e)
	}
	return fail, allDone, recheck
}

// evaluateDeployment brings dw up to date.
func (r *rolloutRun) evaluateDeployment(dw *deployWatch, now time.Time) (*failure, time.Time) {
	if !dw.dep.synced() {
		return nil, time.Time{}
	}
	obj, exists, _ := dw.dep.inf.GetStore().GetByKey(dw.namespace + "/" + dw.name)
	d, _ := obj.(*appsv1.Deployment)
	if !exists || d == nil {
		dw.done = false
		r.set(dw, StatusNotFound, "not found", "")
		return nil, time.Time{}
	}
	if dw.uid != d.UID {
		// A new (or recreated) Deployment: start over.
		dw.uid = d.UID
		for _, i := range []*informer{dw.rs, dw.pods} {
			if i != nil {
				i.cancel()
			}
		}
		dw.rs, dw.pods, dw.podHash, dw.newRS, dw.oldRS = nil, nil, "", nil, nil
	}
	dw.d = d
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return &failure{verdict: VerdictFailedCreate, dw: dw, reason: "InvalidSelector", message: fmt.Sprintf("invalid selector: %v", err)}, time.Time{}
	}
	if dw.rs == nil {
		r.startReplicaSets(dw, sel)
	}

	done, deadline, msg := rolloutStatus(d)
	dw.done, dw.msg = done, msg
	p := &dw.progress
	p.Desired = 1
	if d.Spec.Replicas != nil {
		p.Desired = *d.Spec.Replicas
	}
	p.Updated, p.Ready, p.Available = d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas
	p.Verdict = VerdictProgressing
	if done {
		p.Verdict = VerdictRolledOut
	}

	if dw.rs.synced() {
		var rss []*appsv1.ReplicaSet
		for _, o := range dw.rs.list() {
			if rs, ok := o.(*appsv1.ReplicaSet); ok && rs.Namespace == dw.namespace && sel.Matches(labels.Set(rs.Labels)) {
				rss = append(rss, rs)
			}
		}
		dw.newRS, dw.oldRS = splitReplicaSets(d, rss)
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
	if hash := p.PodTemplateHash; hash != "" && hash != dw.podHash && !done {
		if dw.pods != nil {
			dw.pods.cancel()
		}
		if err := r.startPods(dw, sel, hash); err != nil {
			return &failure{verdict: VerdictFailedCreate, dw: dw, reason: "InvalidSelector", message: err.Error()}, time.Time{}
		}
	}

	status := StatusInProgress
	if done {
		status = StatusCurrent
		r.set(dw, status, msg, "")
		return nil, time.Time{}
	}

	// The pods of the new ReplicaSet.
	var fail *failure
	var recheck time.Time
	var warnings []string
	dw.suspect = nil
	if dw.pods.synced() && dw.newRS != nil && dw.podHash == p.PodTemplateHash {
		pods := r.newPods(dw)
		keep := map[types.UID]bool{}
		r.mu.Lock()
		obs := make([]int, len(pods))
		for i, pod := range pods {
			obs[i] = r.obs[pod.UID]
		}
		r.mu.Unlock()
		var notReady *podFinding
		for i, pod := range pods {
			keep[pod.UID] = true
			f, suspects, again := dw.judge.judge(pod, obs[i], now)
			if f != nil && fail == nil {
				fail = &failure{verdict: f.Verdict, dw: dw, finding: f}
				dw.suspect = f
			}
			for k := range suspects {
				s := suspects[k]
				if dw.suspect == nil {
					dw.suspect = &s
				}
				warnings = append(warnings, r.suspicion(dw, &s))
			}
			if !again.IsZero() && (recheck.IsZero() || again.Before(recheck)) {
				recheck = again
			}
			if notReady == nil && !podReady(pod) {
				notReady = notReadyFinding(pod)
			}
		}
		dw.judge.forget(keep)
		if dw.suspect == nil {
			dw.suspect = notReady
		}
	}
	if fail == nil && deadline {
		status = StatusFailed
		c := deploymentCondition(d, appsv1.DeploymentProgressing)
		fail = &failure{verdict: VerdictProgressDeadlineExceeded, dw: dw, reason: reasonProgressDeadline, message: msg}
		if c != nil && c.Message != "" {
			fail.message = c.Message
		}
	}
	if fail == nil && dw.newRS != nil {
		fail = r.failedCreate(dw, d)
	}
	if fail != nil {
		recheck = time.Time{}
	}
	r.set(dw, status, msg, "")
	for _, w := range warnings {
		if w != "" {
			r.set(dw, status, msg, w)
		}
	}
	return fail, recheck
}

// newPods returns the pods of dw's new ReplicaSet that are not being
// deleted, by name.
func (r *rolloutRun) newPods(dw *deployWatch) []*corev1.Pod {
	var pods []*corev1.Pod
	for _, o := range dw.pods.list() {
		pod, ok := o.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp != nil || pod.Namespace != dw.namespace || pod.Labels[podTemplateHashLabel] != dw.podHash {
			continue
		}
		if ref := metav1.GetControllerOf(pod); ref != nil && dw.newRS != nil && ref.UID != dw.newRS.UID {
			continue
		}
		pods = append(pods, pod)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods
}

// notReadyFinding describes a pod that is not Ready without a container
// problem: the first container not ready.
func notReadyFinding(pod *corev1.Pod) *podFinding {
	f := &podFinding{Verdict: VerdictProgressing, Reason: reasonContainersNotReady, Pod: pod, Message: "pod is not Ready"}
	if c := podCondition(pod, corev1.PodReady); c != nil && c.Message != "" {
		f.Message = c.Message
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if !cs.Ready {
			f.Container, f.RestartCount = cs.Name, cs.RestartCount
			f.ran = cs.State.Running != nil || cs.RestartCount > 0
			if cs.State.Running != nil {
				f.Message = fmt.Sprintf("container %s is running but not ready", cs.Name)
			}
			break
		}
	}
	if pod.Spec.NodeName == "" {
		f.Message = "pod is not scheduled yet"
	}
	return f
}

// suspicion formats a suspicion once; it returns "" when already reported.
func (r *rolloutRun) suspicion(dw *deployWatch, s *podFinding) string {
	// Once per container and restart (or pod, for scheduling).
	key := fmt.Sprintf("%s/%s/%d", s.Pod.Name, s.Container, s.RestartCount)
	if dw.warned[key] {
		return ""
	}
	dw.warned[key] = true
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s", s.Pod.Name)
	if s.Container != "" {
		fmt.Fprintf(&b, " container %s", s.Container)
	}
	fmt.Fprintf(&b, ": %s", s.Reason)
	if s.RestartCount > 0 {
		fmt.Fprintf(&b, " (restarts %d/%d)", s.RestartCount, r.o.MaxRestarts)
	}
	if s.Message != "" {
		fmt.Fprintf(&b, ": %s", s.Message)
	}
	return b.String()
}

// quotaSettle is how long after the last pod of a Deployment went away
// (or after the wait started) a ResourceQuota refusal of its new pods
// counts: the quota's usage is recomputed and the ReplicaSet controller
// retries in that time.
const quotaSettle = 5 * time.Second

// failedCreate reports the new ReplicaSet failing to create pods: its
// ReplicaFailure condition, or a FailedCreate event seen during the wait
// while it still lacks pods.
//
// A ResourceQuota refusal ("exceeded quota") is transient while pods of
// the Deployment are going away (a rollout replacing pods in place,
// maxUnavailable > 0): they release their share of the quota when gone,
// and the ReplicaSet controller retries with a backoff. It counts only
// when none is going away and a FailedCreate event arrives quotaSettle
// after the last one went (or after the wait started): the condition
// alone may be stale, as the controller does not update it on a retry.
func (r *rolloutRun) failedCreate(dw *deployWatch, d *appsv1.Deployment) *failure {
	rs := dw.newRS
	r.mu.Lock()
	e, at := r.failedRS[rs.UID], r.failedAt[rs.UID]
	r.mu.Unlock()
	lacking := rs.Spec.Replicas != nil && rs.Status.Replicas < *rs.Spec.Replicas
	var fail *failure
	for _, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
			fail = &failure{verdict: VerdictFailedCreate, dw: dw, rs: rs, reason: reasonFailedCreate, message: c.Message}
			break
		}
	}
	if fail == nil && e != nil && lacking {
		fail = &failure{verdict: VerdictFailedCreate, dw: dw, rs: rs, reason: reasonFailedCreate, message: e.Message}
	}
	if fail == nil || !strings.Contains(fail.message, "exceeded quota") {
		return fail
	}

	releasing := ptr.Deref(d.Status.TerminatingReplicas, 0) > 0
	for _, o := range dw.rs.list() {
		if other, ok := o.(*appsv1.ReplicaSet); ok && other.Namespace == dw.namespace && releasingPods(other) {
			releasing = true
		}
	}
	r.mu.Lock()
	if releasing {
		dw.released = r.clk.Now()
	}
	settled := dw.released
	r.mu.Unlock()
	if settled.Before(r.start) {
		settled = r.start
	}
	if releasing || !lacking || e == nil || at.Before(settled.Add(quotaSettle)) {
		return nil
	}
	fail.message = e.Message
	return fail
}

// reportEvent reports a Warning event about a pod or ReplicaSet of a
// Deployment: its new or an old ReplicaSet's. Old ReplicaSets' troubles do
// not fail the rollout; they are reported only.
func (r *rolloutRun) reportEvent(e *corev1.Event) {
	for _, dw := range r.deps {
		if dw.d == nil || e.InvolvedObject.Namespace != "" && e.InvolvedObject.Namespace != dw.namespace {
			continue
		}
		var about string
		switch e.InvolvedObject.Kind {
		case "ReplicaSet":
			switch {
			case dw.newRS != nil && e.InvolvedObject.Name == dw.newRS.Name:
				about = "new ReplicaSet " + e.InvolvedObject.Name
			case r.oldRSNamed(dw, e.InvolvedObject.Name) != nil:
				about = "old ReplicaSet " + e.InvolvedObject.Name
			}
		case "Pod":
			name := e.InvolvedObject.Name
			switch {
			case dw.newRS != nil && strings.HasPrefix(name, dw.newRS.Name+"-"):
				about = "pod " + name
			default:
				for _, rs := range dw.oldRS {
					if strings.HasPrefix(name, rs.Name+"-") {
						about = fmt.Sprintf("pod %s (old ReplicaSet %s)", name, rs.Name)
						break
					}
				}
			}
		}
		if about == "" {
			continue
		}
		key := fmt.Sprintf("event/%s/%d/%s", e.UID, e.Count, e.Message)
		if dw.warned[key] {
			return
		}
		dw.warned[key] = true
		cur := r.res.Objects[dw.idx]
		r.set(dw, cur.Status, cur.Message, about+": "+formatEvent(e))
		return
	}
}

func (r *rolloutRun) oldRSNamed(dw *deployWatch, name string) *appsv1.ReplicaSet {
	for _, rs := range dw.oldRS {
		if rs.Name == name {
			return rs
		}
	}
	return nil
}

// podEvents returns the events of pod (from the namespace's informer,
// waiting briefly for it to sync).
func (r *rolloutRun) podEvents(ctx context.Context, namespace string, pod *corev1.Pod) []*corev1.Event {
	nw := r.ns[namespace]
	if nw == nil {
		return nil
	}
	return r.eventsOf(ctx, nw.podEvents, "Pod", pod.Name, pod.UID)
}

func (r *rolloutRun) eventsOf(ctx context.Context, i *informer, kind, name string, uid types.UID) []*corev1.Event {
	i.waitSynced(ctx, 2*time.Second)
	var out []*corev1.Event
	for _, o := range i.list() {
		e, ok := o.(*corev1.Event)
		if !ok || e.InvolvedObject.Kind != kind || e.InvolvedObject.Name != name {
			continue
		}
		if uid != "" && e.InvolvedObject.UID != "" && e.InvolvedObject.UID != uid {
			continue
		}
		out = append(out, e)
	}
	return out
}

// diagnose explains a failure.
func (r *rolloutRun) diagnose(ctx context.Context, f *failure) *Diagnosis {
	g := diagnoser{client: r.client, opts: r.o}
	if f.dw == nil {
		s := r.res.Objects[f.other]
		return &Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: objectName(s.Object), Namespace: s.Object.Namespace, Message: f.message,
			Hints: []string{fmt.Sprintf("kubectl describe %s%s shows its conditions and events", objectName(s.Object), nsFlag(s.Object.Namespace))}}
	}
	dw := f.dw
	if f.finding != nil {
		return g.fromPod(ctx, f.verdict, dw.object, dw.namespace, f.finding, r.podEvents(ctx, dw.namespace, f.finding.Pod))
	}
	if f.rs == nil {
		r.refresh(ctx, dw)
	}
	var d *Diagnosis
	switch {
	case f.rs != nil:
		d = &Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: dw.object, Namespace: dw.namespace, Message: fmt.Sprintf("ReplicaSet %s: %s", f.rs.Name, f.message)}
		if nw := r.ns[dw.namespace]; nw != nil {
			d.Events = formatEvents(r.eventsOf(ctx, nw.rsEvents, "ReplicaSet", f.rs.Name, f.rs.UID), r.o.MaxEvents)
		}
		d.LogNote = "no pod was created: there are no logs"
		d.Hints = hints(d, nil, f.reason)
	case dw.suspect != nil:
		d = g.fromPod(ctx, f.verdict, dw.object, dw.namespace, dw.suspect, r.podEvents(ctx, dw.namespace, dw.suspect.Pod))
		d.Hints = append(hints(d, nil, f.reason), d.Hints...)
		d.Reason = f.reason
		d.Message = joinNonEmpty("; ", f.message, suspectMessage(dw.suspect))
	default:
		d = &Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: dw.object, Namespace: dw.namespace, Message: f.message}
		d.Hints = hints(d, nil, f.reason)
	}
	return d
}

// refresh brings dw's suspect pod up to date before a diagnosis: the
// informer of the pods may have started just before the verdict.
func (r *rolloutRun) refresh(ctx context.Context, dw *deployWatch) {
	dw.pods.waitSynced(ctx, 2*time.Second)
	if dw.dep.synced() {
		_, _ = r.evaluateDeployment(dw, r.clk.Now())
	}
}

// diagnoseTimeout explains a timeout: the first Deployment not rolled out,
// with its most suspect pod, or else the first other object not Current.
func (r *rolloutRun) diagnoseTimeout(ctx context.Context) *Diagnosis {
	g := diagnoser{client: r.client, opts: r.o}
	for _, dw := range r.deps {
		if dw.done {
			continue
		}
		r.refresh(ctx, dw)
		dw.progress.Verdict = VerdictTimeout
		msg := dw.msg
		if msg == "" {
			msg = r.res.Objects[dw.idx].Message
		}
		msg = "waiting for rollout to finish: " + msg
		if dw.suspect == nil {
			d := &Diagnosis{Verdict: VerdictTimeout, Reason: reasonTimeout, Object: dw.object, Namespace: dw.namespace, Message: msg}
			d.Hints = hints(d, nil, reasonTimeout)
			r.set(dw, r.res.Objects[dw.idx].Status, r.res.Objects[dw.idx].Message, "")
			return d
		}
		d := g.fromPod(ctx, VerdictTimeout, dw.object, dw.namespace, dw.suspect, r.podEvents(ctx, dw.namespace, dw.suspect.Pod))
		d.Reason = reasonTimeout
		d.Message = joinNonEmpty("; ", msg, suspectMessage(dw.suspect))
		r.set(dw, r.res.Objects[dw.idx].Status, r.res.Objects[dw.idx].Message, "")
		return d
	}
	for _, s := range r.res.Objects {
		if s.Status == StatusCurrent || (s.Object.Group == appsv1.GroupName && s.Object.Kind == "Deployment") {
			continue
		}
		return &Diagnosis{Verdict: VerdictTimeout, Reason: reasonTimeout, Object: objectName(s.Object), Namespace: s.Object.Namespace,
			Message: fmt.Sprintf("%s: %s", s.Status, s.Message),
			Hints:   []string{fmt.Sprintf("kubectl describe %s%s shows its conditions and events", objectName(s.Object), nsFlag(s.Object.Namespace))}}
	}
	return &Diagnosis{Verdict: VerdictTimeout, Reason: reasonTimeout, Message: "timed out"}
}

// suspectMessage describes a suspicion: "pod chat-x: ErrImagePull: ...".
func suspectMessage(s *podFinding) string {
	m := "pod " + s.Pod.Name
	if s.Container != "" {
		m += " container " + s.Container
	}
	m += ": " + s.Reason
	if s.Message != "" {
		m += ": " + s.Message
	}
	return m
}

func nsFlag(ns string) string {
	if ns == "" {
		return ""
	}
	return " -n " + ns
}
