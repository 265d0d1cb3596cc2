package cluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vllmctl/vllmctl/internal/object"
)

// Delete deletes obj as Prune would (only while it is still opts.Release's,
// foreground propagation; helm.sh/resource-policy is not read: Delete is
// for hooks, which Helm deletes whatever it says) and, unless opts.DryRun, waits until it is gone,
// watching it: what running a hook again needs (its object is created
// anew). An object that is not there is PruneGone; one that is not the
// release's is PruneKept.
func (a *Applier) Delete(ctx context.Context, obj *unstructured.Unstructured, opts PruneOptions) (PruneResult, error) {
	r := a.resolver()
	ref := a.identity(ctx, r, obj, opts.Namespace)
	opts.hook = true
	res, err := a.pruneOne(ctx, r, obj, ref, opts)
	if err != nil || res.Action != PruneDeleted || opts.DryRun {
		return res, err
	}
	return res, a.waitGone(ctx, r, obj, ref)
}

// waitGone watches the object ref until it is deleted.
func (a *Applier) waitGone(ctx context.Context, r *resolver, obj *unstructured.Unstructured, ref object.Ref) error {
	mapping, err := r.mapping(ctx, obj.GroupVersionKind())
	if err != nil {
		return fmt.Errorf("wait for %s to be deleted: %w", ref, err)
	}
	client := a.resource(mapping, ref.Namespace)
	for {
		live, err := client.Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("wait for %s to be deleted: %w", ref, err)
		}
		w, err := client.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", ref.Name).String(),
			ResourceVersion: live.GetResourceVersion(),
		})
		if err != nil {
			return fmt.Errorf("wait for %s to be deleted: %w", ref, err)
		}
		gone := deletedIn(ctx, w)
		w.Stop()
		if gone {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("wait for %s to be deleted: %w", ref, ctx.Err())
		}
	}
}

// deletedIn reads w until a Deleted event (true) or until it ends.
func deletedIn(ctx context.Context, w watch.Interface) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false
			}
			if ev.Type == watch.Deleted {
				return true
			}
		}
	}
}
