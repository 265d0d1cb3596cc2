package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/client-go/util/retry"

	"github.com/vllmctl/vllmctl/internal/object"
)

// ManagerMove is what MoveManagers did to one object.
type ManagerMove struct {
	Object object.Ref `json:"object"`
	// Moved are the field managers whose fields moved, as
	// "NAME (Apply)" or "NAME (Update)".
	Moved []string `json:"moved,omitempty"`
	// Missing is set when the object does not exist.
	Missing bool `json:"missing,omitempty"`
}

// MoveManagers gives the fields the field managers `from` own in the live
// copy of obj to manager `to` (vllmctl's for adopt, Helm's for handover),
// as its Apply entry: entries of
// operation Apply (server-side apply, as Helm 4 applies) and Update
// (client-side apply and patches, as Helm 3 applies; what
// k8s.io/client-go/util/csaupgrade upgrades) are merged into it, so that
// `to`'s next apply of the same fields owns them without conflict and
// may drop them. Only the main resource's entries move (not a
// subresource's). The managedFields are written with a JSON patch that
// first tests the resourceVersion read, retried when the object changed.
// With dryRun nothing is written and the move is what would be done.
func (a *Applier) MoveManagers(ctx context.Context, obj *unstructured.Unstructured, namespace string, from []string, to string, dryRun bool) (ManagerMove, error) {
	r := a.resolver()
	mapping, ns, err := r.locate(ctx, obj, namespace)
	if err != nil {
		return ManagerMove{}, err
	}
	ref := object.RefOf(obj)
	ref.Namespace = ns
	move := ManagerMove{Object: ref}
	client := a.resource(mapping, ns)
	// A failed test (the object changed since it was read) is Invalid or
	// Conflict: read it again, as retry.RetryOnConflict would.
	raced := func(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsConflict(err) }
	err = retry.OnError(retry.DefaultRetry, raced, // five attempts, 10ms apart and growing
		func() error {
			live, err := client.Get(ctx, ref.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				move.Missing = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("get %s: %w", ref, err)
			}
			fields, moved, err := movedFields(live, from, to)
			if err != nil {
				return fmt.Errorf("%s: managedFields: %w", ref, err)
			}
			move.Moved = moved
			if len(moved) == 0 || dryRun {
				return nil
			}
			patch, err := json.Marshal([]map[string]any{
				{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
				{"op": "replace", "path": "/metadata/managedFields", "value": fields},
			})
			if err != nil {
				return err
			}
			if _, err := client.Patch(ctx, ref.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("move field managers %v of %s to %s: %w", moved, ref, to, err)
			}
			return nil
		})
	return move, err
}

// movedFields returns the managedFields of live with the entries of the
// managers `from` merged into the Apply entry of `to`, and which moved.
func movedFields(live *unstructured.Unstructured, from []string, to string) ([]metav1.ManagedFieldsEntry, []string, error) {
	entries := live.GetManagedFields()
	names := sets.New(from...)
	names.Delete(to)
	movedSet := sets.New[string]()
	work := make([]metav1.ManagedFieldsEntry, len(entries))
	for i, e := range entries {
		work[i] = *e.DeepCopy()
		if !names.Has(e.Manager) || e.Subresource != "" {
			continue
		}
		movedSet.Insert(fmt.Sprintf("%s (%s)", e.Manager, e.Operation))
		// csaupgrade merges a manager's Update entries: an Apply entry
		// of a manager being moved is merged the same way.
		work[i].Operation = metav1.ManagedFieldsOperationUpdate
	}
	if movedSet.Len() == 0 {
		return entries, nil, nil
	}
	obj := live.DeepCopy()
	obj.SetManagedFields(work)
	if err := csaupgrade.UpgradeManagedFields(obj, names, to); err != nil {
		return nil, nil, err
	}
	moved := sets.List(movedSet)
	sort.Strings(moved)
	return obj.GetManagedFields(), moved, nil
}
