package cluster

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/object"
)

// Get reads the live copy of obj (as a manifest lists it) from the
// cluster. A namespaced object without a namespace is looked up in
// namespace. A missing object is the API server's NotFound error (test with
// apierrors.IsNotFound); a kind the cluster does not serve is an
// *UnknownKindError.
func (a *Applier) Get(ctx context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error) {
	r := a.resolver()
	mapping, ns, err := r.locate(ctx, obj, namespace)
	if err != nil {
		return nil, err
	}
	ref := object.RefOf(obj)
	ref.Namespace = ns
	live, err := a.resource(mapping, ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", ref, err)
	}
	return live, nil
}
