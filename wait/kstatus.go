// KstatusWaiter: the Waiter built on the kstatus status watcher of
// sigs.k8s.io/cli-utils.

package wait

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/cli-utils/pkg/kstatus/polling/aggregator"
	"sigs.k8s.io/cli-utils/pkg/kstatus/polling/collector"
	"sigs.k8s.io/cli-utils/pkg/kstatus/polling/event"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/cli-utils/pkg/kstatus/watcher"
	clobject "sigs.k8s.io/cli-utils/pkg/object"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
)

// KstatusWaiter waits with the kstatus status watcher of cli-utils: shared
// informers watch the objects' kinds, and every change is turned into a
// kstatus status (Deployments are Current when rolled out and available,
// Services when they have their endpoints' prerequisites, and so on). The
// first Failed status ends the wait.
type KstatusWaiter struct {
	watcher watcher.StatusWatcher
	mapper  meta.RESTMapper
	now     func() time.Time
}

var _ Waiter = (*KstatusWaiter)(nil)

// NewKstatusWaiter returns a KstatusWaiter using cli-utils'
// DefaultStatusWatcher over dyn and mapper.
func NewKstatusWaiter(dyn dynamic.Interface, mapper meta.RESTMapper) *KstatusWaiter {
	return NewKstatusWaiterWithWatcher(watcher.NewDefaultStatusWatcher(dyn, mapper), mapper)
}

// NewKstatusWaiterWithWatcher returns a KstatusWaiter using w; mapper
// resolves the scope of objects without a namespace.
func NewKstatusWaiterWithWatcher(w watcher.StatusWatcher, mapper meta.RESTMapper) *KstatusWaiter {
	return &KstatusWaiter{watcher: w, mapper: mapper, now: time.Now}
}

// Wait watches objs until every one is Current, one is Failed, opts.Timeout
// passes or ctx ends. See [Waiter].
//
// The watcher's events go through a cli-utils ResourceStatusCollector, as
// in Helm's status waiter: it keeps the latest status of every object and
// the watcher's fatal error, and its observer (kstatusRun.observe) turns
// each change into our statuses and events and ends the wait on the
// aggregate status (aggregator.AggregateStatus): at the first Failed
// object, or once all are Current.
func (w *KstatusWaiter) Wait(ctx context.Context, objs []*unstructured.Unstructured, opts Options) (Result, error) {
	start := w.now()
	if opts.Events != nil {
		defer close(opts.Events)
	}
	res := Result{}
	ids, index, err := w.identify(ctx, objs, opts.Namespace, &res)
	if err != nil {
		return w.finish(res, start, OutcomeError, err)
	}
	if len(ids) == 0 {
		return w.finish(res, start, OutcomeCurrent, nil)
	}

	wctx, cancel := withOptionalTimeout(ctx, opts.Timeout)
	defer cancel()
	run := &kstatusRun{done: wctx.Done(), cancel: cancel, res: &res, index: index, events: opts.Events, now: w.now}
	// The status watcher closes its channel once wctx is done; after the
	// outcome is known the rest is drained.
	// Namespace scope: one informer per kind and namespace (cluster-scoped
	// kinds at cluster scope), never a cluster-wide watch of namespaced
	// kinds, which would need cluster-wide list permissions.
	evs := w.watcher.Watch(wctx, ids, watcher.Options{RESTScopeStrategy: watcher.RESTScopeNamespace})
	statuses := collector.NewResourceStatusCollector(ids)
	// The collector reports the watcher's errors here (the observer stops
	// the wait at the first); run is read once the collector is done.
	var fatal error
	for r := range statuses.ListenWithObserver(evs, collector.ObserverFunc(run.observe)) {
		if fatal == nil {
			fatal = r.Err
		}
	}
	return w.verdict(ctx, wctx, res, start, run.outcome, fatal, opts.Timeout)
}

// withOptionalTimeout bounds ctx by timeout when it is positive.
func withOptionalTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return context.WithCancel(ctx)
}

// finish completes res with outcome o and the time elapsed since start.
func (w *KstatusWaiter) finish(res Result, start time.Time, o Outcome, err error) (Result, error) {
	res.Outcome = o
	res.Elapsed = w.now().Sub(start)
	return res, err
}

// verdict is the result of a wait that ended with outcome (none when the
// watch ended first) or the watcher's fatal error; ctx is the caller's
// context, wctx the one bounded by timeout.
func (w *KstatusWaiter) verdict(ctx, wctx context.Context, res Result, start time.Time, outcome Outcome, fatal error, timeout time.Duration) (Result, error) {
	switch {
	case outcome == OutcomeCurrent:
		return w.finish(res, start, OutcomeCurrent, nil)
	case outcome == OutcomeFailed:
		r, _ := w.finish(res, start, OutcomeFailed, nil)
		return r, &NotReadyError{Outcome: OutcomeFailed, Objects: failedFirst(r.NotCurrent())}
	case fatal != nil:
		return w.finish(res, start, OutcomeError, fmt.Errorf("watch object status: %w", fatal))
	case errors.Is(ctx.Err(), context.Canceled):
		return w.finish(res, start, OutcomeCanceled, fmt.Errorf("wait canceled: %w", ctx.Err()))
	case ctx.Err() != nil:
		r, _ := w.finish(res, start, OutcomeTimeout, nil)
		return r, &NotReadyError{Outcome: OutcomeTimeout, Objects: r.NotCurrent()}
	case wctx.Err() != nil:
		r, _ := w.finish(res, start, OutcomeTimeout, nil)
		return r, &NotReadyError{Outcome: OutcomeTimeout, Timeout: timeout, Objects: r.NotCurrent()}
	}
	return w.finish(res, start, OutcomeError, errors.New("the status watcher stopped unexpectedly"))
}

// kstatusRun is the state of one KstatusWaiter.Wait, kept by the
// collector's observer: it runs on the collector's goroutine, and Wait
// reads it once the collector is done.
type kstatusRun struct {
	done    <-chan struct{} // the wait's end: bounds sends on events
	cancel  context.CancelFunc
	res     *Result
	index   map[object.ID]int
	events  chan<- rollout.Event
	now     func() time.Time
	outcome Outcome
	stopped bool // an outcome or a fatal error ended the wait
}

// observe is the collector's observer: it applies ev, which c has
// recorded, to the run's statuses and ends the wait once its outcome is
// known or the watcher failed.
func (r *kstatusRun) observe(c *collector.ResourceStatusCollector, ev event.Event) {
	if r.stopped {
		return
	}
	switch ev.Type {
	case event.ErrorEvent:
		r.stop("")
		return
	case event.SyncEvent:
		// Informers are synced: objects not reported do not exist.
		for i := range r.res.Objects {
			if r.res.Objects[i].Status == rollout.StatusUnknown {
				r.set(i, rollout.StatusNotFound, "not found")
			}
		}
	case event.ResourceUpdateEvent:
		if !r.update(ev.Resource) {
			return
		}
	}
	// Only the waited objects count, should the watcher report others.
	var rss []*event.ResourceStatus
	for _, rs := range c.LatestObservation().ResourceStatuses {
		if _, ok := r.index[rs.Identifier]; ok {
			rss = append(rss, rs)
		}
	}
	switch aggregator.AggregateStatus(rss, status.CurrentStatus) {
	case status.FailedStatus:
		r.stop(OutcomeFailed)
	case status.CurrentStatus:
		r.stop(OutcomeCurrent)
	}
}

// update applies the status rs reports; false when rs is none of the
// waited objects.
func (r *kstatusRun) update(rs *event.ResourceStatus) bool {
	if rs == nil {
		return false
	}
	i, ok := r.index[rs.Identifier]
	if !ok {
		return false
	}
	st, msg := rollout.Status(rs.Status), rs.Message
	if rs.Error != nil {
		st, msg = rollout.StatusUnknown, rs.Error.Error()
	}
	// The message quotes the object's conditions: untrusted.
	r.set(i, st, termout.SanitizeLine(msg))
	return true
}

// stop ends the wait with outcome ("" for a fatal error of the watcher).
func (r *kstatusRun) stop(outcome Outcome) {
	r.outcome, r.stopped = outcome, true
	r.cancel()
}

// set records object i's status and message, sending an Event when
// either changed.
func (r *kstatusRun) set(i int, st rollout.Status, msg string) {
	cur := &r.res.Objects[i]
	if cur.Status == st && cur.Message == msg {
		return
	}
	cur.Status, cur.Message = st, msg
	if r.events == nil {
		return
	}
	select {
	case r.events <- rollout.Event{Time: r.now(), Object: cur.Object, Status: st, Message: msg}:
	case <-r.done:
	}
}

// identify returns the watcher's identifiers of objs, with the namespace
// defaulted, and fills res.Objects (status Unknown) in order, without
// duplicates.
func (w *KstatusWaiter) identify(ctx context.Context, objs []*unstructured.Unstructured, namespace string, res *Result) (clobject.ObjMetadataSet, map[object.ID]int, error) {
	var ids clobject.ObjMetadataSet
	index := map[object.ID]int{}
	reset := false
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		ref := object.RefOf(obj)
		if ref.Namespace == "" && namespace != "" {
			m := meta.ToRESTMapperWithContext(w.mapper)
			mapping, err := m.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
			if meta.IsNoMatchError(err) && !reset {
				reset = true
				if rm, ok := w.mapper.(meta.ResettableRESTMapper); ok {
					rm.Reset()
				}
				mapping, err = m.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", ref, err)
			}
			if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
				ref.Namespace = namespace
			}
		}
		id := ref.ID()
		if _, dup := index[id]; dup {
			continue
		}
		index[id] = len(res.Objects)
		ids = append(ids, id)
		res.Objects = append(res.Objects, rollout.ObjectStatus{Object: ref, Status: rollout.StatusUnknown})
	}
	return ids, index, nil
}

// failedFirst orders failed objects before the others, keeping the order
// within each group.
func failedFirst(objs []rollout.ObjectStatus) []rollout.ObjectStatus {
	out := make([]rollout.ObjectStatus, 0, len(objs))
	for _, s := range objs {
		if s.Status == rollout.StatusFailed {
			out = append(out, s)
		}
	}
	for _, s := range objs {
		if s.Status != rollout.StatusFailed {
			out = append(out, s)
		}
	}
	return out
}
