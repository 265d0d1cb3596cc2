package releasetest

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/wait"
)

// Waiter is a scripted wait.Waiter. By default every object is Current at
// once (one event each). Script, when set, decides instead.
type Waiter struct {
	// Script returns the outcome of a wait given the objects (namespaces
	// defaulted) and the wait's options; nil: every object Current.
	Script func(ctx context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error)
	// Now stamps events (default: time.Now).
	Now func() time.Time

	mu    sync.Mutex
	calls int
}

var _ wait.Waiter = (*Waiter)(nil)

// Calls returns how many waits ran.
func (w *Waiter) Calls() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls
}

// Wait reports the objects per Script, sending one event per object.
func (w *Waiter) Wait(ctx context.Context, objs []*unstructured.Unstructured, opts wait.Options) (wait.Result, error) {
	if opts.Events != nil {
		defer close(opts.Events)
	}
	w.mu.Lock()
	w.calls++
	w.mu.Unlock()
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	statuses := make([]rollout.ObjectStatus, 0, len(objs))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		ns := o.GetNamespace()
		if ns == "" && charts.IsNamespacedKind(gvk) {
			ns = opts.Namespace
		}
		if !charts.IsNamespacedKind(gvk) {
			ns = ""
		}
		statuses = append(statuses, rollout.ObjectStatus{
			Object: object.Ref{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: ns, Name: o.GetName()},
			Status: rollout.StatusCurrent,
		})
	}
	res := wait.Result{Outcome: wait.OutcomeCurrent, Objects: statuses}
	var err error
	if w.Script != nil {
		res, err = w.Script(ctx, statuses, opts)
	}
	if opts.Events != nil {
		for _, s := range res.Objects {
			select {
			case opts.Events <- rollout.Event{Time: now(), Object: s.Object, Status: s.Status, Message: s.Message}:
			case <-ctx.Done():
			}
		}
	}
	return res, err
}

// FailKind returns a Script under which the objects of kind end with
// status (Failed, or InProgress for a timeout) and message, and the wait
// fails with outcome (wait.OutcomeFailed or wait.OutcomeTimeout).
func FailKind(kind string, outcome wait.Outcome, message string) func(context.Context, []rollout.ObjectStatus, wait.Options) (wait.Result, error) {
	return func(_ context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
		st := rollout.StatusFailed
		if outcome == wait.OutcomeTimeout {
			st = rollout.StatusInProgress
		}
		res := wait.Result{Outcome: outcome}
		var bad []rollout.ObjectStatus
		for _, o := range objs {
			if o.Object.Kind == kind {
				o.Status, o.Message = st, message
				bad = append(bad, o)
			}
			res.Objects = append(res.Objects, o)
		}
		return res, &wait.NotReadyError{Outcome: outcome, Timeout: opts.Timeout, Objects: bad}
	}
}
