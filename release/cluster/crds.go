package cluster

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
)

// The API of CustomResourceDefinitions.
const (
	CRDGroup   = "apiextensions.k8s.io"
	CRDVersion = "v1"
	CRDKind    = "CustomResourceDefinition"
)

// crdResource is the resource of CustomResourceDefinitions.
func crdResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: CRDGroup, Version: CRDVersion, Resource: "customresourcedefinitions"}
}

// GetCRD reads the CustomResourceDefinition named name.
func (a *Applier) GetCRD(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	live, err := a.dynamic.Resource(crdResource()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", CRDKind, name, err)
	}
	return live, nil
}

// CreateCRD creates crd (field manager vllmctl); it never updates one.
func (a *Applier) CreateCRD(ctx context.Context, crd *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	opts := metav1.CreateOptions{FieldManager: FieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	created, err := a.dynamic.Resource(crdResource()).Create(ctx, crdBody(crd), opts)
	if err != nil {
		return nil, fmt.Errorf("create %s %s: %w", CRDKind, crd.GetName(), err)
	}
	return created, nil
}

// WatchCRD watches the CustomResourceDefinition named name.
func (a *Applier) WatchCRD(ctx context.Context, name, resourceVersion string) (watch.Interface, error) {
	w, err := a.dynamic.Resource(crdResource()).Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: resourceVersion,
	})
	if err != nil {
		return nil, fmt.Errorf("watch %s %s: %w", CRDKind, name, err)
	}
	return w, nil
}

// MissingKinds returns the kinds of gvks the RESTMapper cannot map, after
// resetting it once when one is unknown (discovery is cached).
func (a *Applier) MissingKinds(ctx context.Context, gvks []schema.GroupVersionKind) ([]schema.GroupVersionKind, error) {
	r := a.resolver()
	var missing []schema.GroupVersionKind
	for _, gvk := range gvks {
		_, err := r.mapping(ctx, gvk)
		switch {
		case err == nil:
		case meta.IsNoMatchError(err):
			missing = append(missing, gvk)
		default:
			return nil, fmt.Errorf("map kind %s: %w", gvk, err)
		}
	}
	return missing, nil
}

// crdBody is crd as it is sent: a copy without server-owned fields.
func crdBody(crd *unstructured.Unstructured) *unstructured.Unstructured {
	body := crd.DeepCopy()
	for _, f := range []string{"resourceVersion", "uid", "managedFields", "creationTimestamp", "generation", "selfLink", "deletionTimestamp", "namespace"} {
		unstructured.RemoveNestedField(body.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(body.Object, "status")
	return body
}

// ResetDiscovery forgets what the Applier's RESTMapper learnt from
// discovery (kubectl's disk cache included, which may be hours old): the
// next mapping asks the API server.
func (a *Applier) ResetDiscovery(ctx context.Context) {
	switch rm := a.mapper.(type) {
	case meta.ResettableRESTMapperWithContext:
		rm.ResetWithContext(ctx)
	case meta.ResettableRESTMapper:
		rm.Reset()
	}
}

// KubeGroup reports whether group is one of Kubernetes' own API groups,
// which no CRD defines.
func KubeGroup(group string) bool {
	switch group {
	case CRDGroup, "apiregistration.k8s.io":
		return true
	}
	return scheme.Scheme.IsGroupRegistered(group)
}
