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
	"sigs.k8s.io/cli-utils/pkg/kstatus/polling/event"
	"sigs.k8s.io/cli-utils/pkg/kstatus/watcher"
	clobject "sigs.k8s.io/cli-utils/pkg/object"

	"github.com/vllmctl/vllmctl/internal/object"
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
func (w *KstatusWaiter) Wait(ctx context.Context, objs []*unstructured.Unstructured, opts Options) (Result, error) {
	start := w.now()
	if opts.Events != nil {
		defer close(opts.Events)
	}
	res := Result{}
	finish := func(o Outcome, err error) (Result, error) {
		res.Outcome = o
		res.Elapsed = w.now().Sub(start)
		return res, err
	}

	ids, index, err := w.identify(ctx, objs, opts.Namespace, &res)
	if err != nil {
		return finish(OutcomeError, err)
	}
	if len(ids) == 0 {
		return finish(OutcomeCurrent, nil)
	}

	var wctx context.Context
	var cancel context.CancelFunc
	if opts.Timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, opts.Timeout)
	} else {
		wctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()

	emit := func(i int) {
		if opts.Events == nil {
			return
		}
		s := res.Objects[i]
		select {
		case opts.Events <- Event{Time: w.now(), Object: s.Object, Status: s.Status, Message: s.Message}:
		case <-wctx.Done():
		}
	}
	set := func(i int, st Status, msg string) {
		cur := &res.Objects[i]
		if cur.Status == st && cur.Message == msg {
			return
		}
		cur.Status, cur.Message = st, msg
		emit(i)
	}

	var outcome Outcome
	var fatal error
	// The status watcher closes its channel once wctx is done; after the
	// outcome is known the rest is drained.
	// Namespace scope: one informer per kind and namespace (cluster-scoped
	// kinds at cluster scope), never a cluster-wide watch of namespaced
	// kinds, which would need cluster-wide list permissions.
	for ev := range w.watcher.Watch(wctx, ids, watcher.Options{RESTScopeStrategy: watcher.RESTScopeNamespace}) {
		if outcome != "" || fatal != nil {
			continue
		}
		switch ev.Type {
		case event.ErrorEvent:
			fatal = ev.Error
			cancel()
			continue
		case event.SyncEvent:
			// Informers are synced: objects not reported do not exist.
			for i := range res.Objects {
				if res.Objects[i].Status == StatusUnknown {
					set(i, StatusNotFound, "not found")
				}
			}
		case event.ResourceUpdateEvent:
			rs := ev.Resource
			if rs == nil {
				continue
			}
			i, ok := index[rs.Identifier]
			if !ok {
				continue
			}
			st, msg := Status(rs.Status), rs.Message
			if rs.Error != nil {
				st, msg = StatusUnknown, rs.Error.Error()
			}
			// The message quotes the object's conditions: untrusted.
			msg = SanitizeLine(msg)
			set(i, st, msg)
			if st == StatusFailed {
				outcome = OutcomeFailed
				cancel()
				continue
			}
		}
		if allCurrent(res.Objects) {
			outcome = OutcomeCurrent
			cancel()
		}
	}

	switch {
	case outcome == OutcomeCurrent:
		return finish(OutcomeCurrent, nil)
	case outcome == OutcomeFailed:
		r, _ := finish(OutcomeFailed, nil)
		return r, &NotReadyError{Outcome: OutcomeFailed, Objects: failedFirst(r.NotCurrent())}
	case fatal != nil:
		return finish(OutcomeError, fmt.Errorf("watch object status: %w", fatal))
	case errors.Is(ctx.Err(), context.Canceled):
		return finish(OutcomeCanceled, fmt.Errorf("wait canceled: %w", ctx.Err()))
	case ctx.Err() != nil:
		r, _ := finish(OutcomeTimeout, nil)
		return r, &NotReadyError{Outcome: OutcomeTimeout, Objects: r.NotCurrent()}
	case wctx.Err() != nil:
		r, _ := finish(OutcomeTimeout, nil)
		return r, &NotReadyError{Outcome: OutcomeTimeout, Timeout: opts.Timeout, Objects: r.NotCurrent()}
	}
	return finish(OutcomeError, errors.New("the status watcher stopped unexpectedly"))
}

// identify returns the watcher's identifiers of objs, with the namespace
// defaulted, and fills res.Objects (status Unknown) in order, without
// duplicates.
func (w *KstatusWaiter) identify(ctx context.Context, objs []*unstructured.Unstructured, namespace string, res *Result) (clobject.ObjMetadataSet, map[clobject.ObjMetadata]int, error) {
	var ids clobject.ObjMetadataSet
	index := map[clobject.ObjMetadata]int{}
	reset := false
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		ref := object.Ref{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
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
		id := clobject.ObjMetadata{Namespace: ref.Namespace, Name: ref.Name, GroupKind: gvk.GroupKind()}
		if _, dup := index[id]; dup {
			continue
		}
		index[id] = len(res.Objects)
		ids = append(ids, id)
		res.Objects = append(res.Objects, ObjectStatus{Object: ref, Status: StatusUnknown})
	}
	return ids, index, nil
}

func allCurrent(objs []ObjectStatus) bool {
	for _, s := range objs {
		if s.Status != StatusCurrent {
			return false
		}
	}
	return true
}

// failedFirst orders failed objects before the others, keeping the order
// within each group.
func failedFirst(objs []ObjectStatus) []ObjectStatus {
	out := make([]ObjectStatus, 0, len(objs))
	for _, s := range objs {
		if s.Status == StatusFailed {
			out = append(out, s)
		}
	}
	for _, s := range objs {
		if s.Status != StatusFailed {
			out = append(out, s)
		}
	}
	return out
}
