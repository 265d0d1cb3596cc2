// Waiting for the CRDs a revision created until they are Established and
// discovery serves their kinds, before any object of those kinds is applied.

package release

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// waitKinds waits until discovery maps the kinds of the objects the new
// CRDs define (the API server serves a CRD shortly after it is
// Established).
func waitKinds(ctx context.Context, client CRDClient, name string, plan *crdPlan, objs []*unstructured.Unstructured) error {
	gvks := plan.pendingKinds(objs)
	if len(gvks) == 0 {
		return nil
	}
	for {
		missing, err := client.MissingKinds(ctx, gvks)
		if err == nil && len(missing) == 0 {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("release %s: discover the kinds of the new CRDs: %w", name, err)
		}
		t := time.NewTimer(crdPollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			gvk := gvks[0]
			if len(missing) > 0 {
				gvk = missing[0]
			}
			def := plan.pending[gvk.GroupKind()]
			return &CRDError{Release: name, CRD: def.name, Reason: ReasonCRDNotEstablished,
				Err: fmt.Errorf("Established, but the API server did not serve kind %s in %s within the deploy's --timeout: %w",
					gvk.Kind, gvk.GroupVersion(), context.Cause(ctx))}
		case <-t.C:
		}
	}
}

// waitEstablished waits, watching it, until crd is Established; a CRD
// whose names are not accepted fails at once.
func waitEstablished(ctx context.Context, client CRDClient, crd *unstructured.Unstructured) error {
	name := crd.GetName()
	for {
		ok, err := established(crd)
		if ok || err != nil {
			return err
		}
		w, err := client.WatchCRD(ctx, name, crd.GetResourceVersion())
		if err != nil {
			if ctx.Err() != nil {
				return notEstablished(ctx, crd)
			}
			return &CRDError{CRD: name, Reason: ReasonCRDNotEstablished, Err: err}
		}
		crd, err = followCRD(ctx, w, crd)
		w.Stop()
		switch {
		case ctx.Err() != nil:
			return notEstablished(ctx, crd)
		case err != nil:
			return err
		}
		if ok, _ := established(crd); ok {
			return nil
		}
		// The watch ended (closed, or an error such as an expired
		// resourceVersion): read it again and watch on.
		if crd, err = client.GetCRD(ctx, name); err != nil {
			if ctx.Err() != nil {
				return notEstablished(ctx, &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name}}})
			}
			return &CRDError{CRD: name, Reason: ReasonCRDNotEstablished, Err: err}
		}
	}
}

// followCRD follows crd through the watch w until it is Established (or
// its names are refused), it is deleted, ctx ends, or the watch ends; it
// returns the last state seen.
func followCRD(ctx context.Context, w watch.Interface, crd *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	name := crd.GetName()
	for {
		next, err := nextCRD(ctx, w, name)
		switch {
		case ctx.Err() != nil:
			return crd, nil
		case err != nil:
			return crd, &CRDError{CRD: name, Reason: ReasonCRDNotEstablished, Err: err}
		case next == nil:
			return crd, nil // the watch ended
		}
		crd = next
		if ok, err := established(crd); ok || err != nil {
			return crd, err
		}
	}
}

// nextCRD returns the next state of the CRD named name that w reports;
// nil when the watch ends.
func nextCRD(ctx context.Context, w watch.Interface, name string) (*unstructured.Unstructured, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil
			}
			obj, isObj := ev.Object.(*unstructured.Unstructured)
			switch {
			case ev.Type == watch.Error:
				return nil, nil
			case !isObj || obj.GetName() != name:
			case ev.Type == watch.Deleted:
				return nil, errors.New("deleted while the deploy waited for it to be Established")
			case ev.Type == watch.Added, ev.Type == watch.Modified:
				return obj, nil
			}
		}
	}
}

// established reports whether crd is Established; a NamesAccepted=False
// condition is a *CRDError.
func established(crd *unstructured.Unstructured) (bool, error) {
	if c := crdCondition(crd, "NamesAccepted"); c != nil && c["status"] == "False" {
		return false, &CRDError{CRD: crd.GetName(), Reason: ReasonCRDNamesNotAccepted,
			Err: fmt.Errorf("the API server did not accept its names (NamesAccepted=False: %s: %s)", c["reason"], c["message"])}
	}
	c := crdCondition(crd, "Established")
	return c != nil && c["status"] == "True", nil
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
