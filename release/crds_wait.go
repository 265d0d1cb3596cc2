// Waiting for the CRDs a revision created until they are Established and
// discovery serves their kinds, before any object of those kinds is applied.

package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// waitKinds waits until discovery maps the kinds of the objects the new
// CRDs define (the API server serves a CRD shortly after it is
// Established).
func waitKinds(ctx context.Context, client CRDClient, name string, plan *crdPlan, objs []*unstructured.Unstructured) error {
	gvks := plan.pendingKinds(objs)
	if len(gvks) == 0 {
		return nil
	}
	var missing []schema.GroupVersionKind
	err := kwait.PollUntilContextCancel(ctx, crdPollInterval, true, func(ctx context.Context) (bool, error) {
		var err error
		missing, err = client.MissingKinds(ctx, gvks)
		if err != nil && ctx.Err() == nil {
			return false, fmt.Errorf("release %s: discover the kinds of the new CRDs: %w", name, err)
		}
		return err == nil && len(missing) == 0, nil
	})
	if err == nil || ctx.Err() == nil {
		return err
	}
	gvk := gvks[0]
	if len(missing) > 0 {
		gvk = missing[0]
	}
	def := plan.pending[gvk.GroupKind()]
	return &CRDError{Release: name, CRD: def.name, Reason: ReasonCRDNotEstablished,
		Err: fmt.Errorf("Established, but the API server did not serve kind %s in %s within the deploy's --timeout: %w",
			gvk.Kind, gvk.GroupVersion(), context.Cause(ctx))}
}

// waitEstablished waits, watching it, until crd is Established; a CRD
// whose names are not accepted, or that is deleted, fails at once. A watch
// that ends (closed, or an error such as an expired resourceVersion) is
// resumed after reading the CRD again.
func waitEstablished(ctx context.Context, client CRDClient, crd *unstructured.Unstructured) error {
	name := crd.GetName()
	for {
		if ok, err := established(crd); ok || err != nil {
			return err
		}
		w, err := client.WatchCRD(ctx, name, crd.GetResourceVersion())
		if err != nil {
			if ctx.Err() != nil {
				return notEstablished(ctx, crd)
			}
			return &CRDError{CRD: name, Reason: ReasonCRDNotEstablished, Err: err}
		}
		last, err := followCRD(ctx, w, crd)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return notEstablished(ctx, last)
		case !errors.Is(err, watchtools.ErrWatchClosed) && !errors.Is(err, errWatchError):
			return err
		}
		// A watch that ends at once again and again is not a reason to
		// ask the API server in a tight loop.
		if pause(ctx, crdPollInterval) != nil {
			return notEstablished(ctx, last)
		}
		if crd, err = client.GetCRD(ctx, name); err != nil {
			if ctx.Err() != nil {
				return notEstablished(ctx, last)
			}
			return &CRDError{CRD: name, Reason: ReasonCRDNotEstablished, Err: err}
		}
	}
}

// errWatchError is a watch that reported an error event: it is resumed
// like a closed one.
var errWatchError = errors.New("the watch reported an error")

// followCRD follows crd through the watch w (stopping it) until it is
// Established: nil. Otherwise it returns the last state seen and the *CRDError
// of a CRD deleted or whose names are refused, watchtools.ErrWatchClosed or
// errWatchError when the watch ends, or the error of ctx's end.
func followCRD(ctx context.Context, w watch.Interface, crd *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	name := crd.GetName()
	last := crd
	_, err := watchtools.UntilWithoutRetry(ctx, w, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Error {
			return false, errWatchError
		}
		obj, ok := ev.Object.(*unstructured.Unstructured)
		switch {
		case !ok || obj.GetName() != name:
			return false, nil
		case ev.Type == watch.Deleted:
			return false, &CRDError{CRD: name, Reason: ReasonCRDNotEstablished,
				Err: errors.New("deleted while the deploy waited for it to be Established")}
		case ev.Type == watch.Added, ev.Type == watch.Modified:
			last = obj
			return established(obj)
		}
		return false, nil
	})
	return last, err
}

// established reports whether crd is Established, as kstatus computes it
// (Current once its Established condition is True); names refused
// (NamesAccepted=False, which kstatus reports as Failed) are a *CRDError.
// A status kstatus cannot read (never one the API server writes) is a
// *CRDError too.
func established(crd *unstructured.Unstructured) (bool, error) {
	res, err := kstatus.Compute(crd)
	if err != nil {
		return false, &CRDError{CRD: crd.GetName(), Reason: ReasonCRDNotEstablished, Err: fmt.Errorf("read its status: %w", err)}
	}
	if res.Status == kstatus.FailedStatus {
		if c := crdCondition(crd, "NamesAccepted"); c != nil && c["status"] == "False" {
			return false, &CRDError{CRD: crd.GetName(), Reason: ReasonCRDNamesNotAccepted,
				Err: fmt.Errorf("the API server did not accept its names (NamesAccepted=False: %s: %s)", c["reason"], c["message"])}
		}
	}
	return res.Status == kstatus.CurrentStatus, nil
}

// notEstablished is the error of a CRD that was not Established when ctx
// ended.
func notEstablished(ctx context.Context, crd *unstructured.Unstructured) error {
	state := "no Established condition yet"
	if c := crdCondition(crd, "Established"); c != nil {
		state = fmt.Sprintf("Established=%v", c["status"])
		if r, _ := c["reason"].(string); r != "" {
			state += ": " + r
		}
		if m, _ := c["message"].(string); m != "" {
			state += ": " + m
		}
	}
	what := "not Established within the deploy's --timeout"
	if errors.Is(ctx.Err(), context.Canceled) {
		what = "the deploy was interrupted before it was Established"
	}
	return &CRDError{CRD: crd.GetName(), Reason: ReasonCRDNotEstablished, Err: fmt.Errorf("%s (%s): %w", what, state, context.Cause(ctx))}
}

// crdCondition returns the condition of type typ of crd's status, nil when
// it has none.
func crdCondition(crd *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// pause waits d, or until ctx ends (its error then).
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
