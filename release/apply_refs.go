package release

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ObjectRef identifies a Kubernetes object. Its identity for pruning and
// comparison is group, kind, namespace and name; Version is informative.
type ObjectRef struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// RefOf returns the reference of obj as it stands (its namespace is not
// defaulted).
func RefOf(obj *unstructured.Unstructured) ObjectRef {
	gvk := obj.GroupVersionKind()
	return ObjectRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// APIVersion returns group/version, or the version alone for the core group.
func (r ObjectRef) APIVersion() string {
	return schema.GroupVersion{Group: r.Group, Version: r.Version}.String()
}

// GroupKind returns the object's group and kind.
func (r ObjectRef) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.Group, Kind: r.Kind}
}

// String formats the reference as "apps/v1 Deployment ns/name" (or
// "v1 Namespace name" for a cluster-scoped object).
func (r ObjectRef) String() string {
	name := r.Name
	if r.Namespace != "" {
		name = r.Namespace + "/" + r.Name
	}
	return r.APIVersion() + " " + r.Kind + " " + name
}

// objectKey is an object's identity: group, kind, namespace and name.
type objectKey struct {
	group, kind, namespace, name string
}

func (r ObjectRef) key() objectKey {
	return objectKey{group: r.Group, kind: r.Kind, namespace: r.Namespace, name: r.Name}
}

// resolver maps kinds to resources for one operation, resetting the mapper
// at most once when a kind is unknown (discovery may be stale, e.g. a CRD
// was just installed).
type resolver struct {
	mapper   meta.RESTMapper
	didReset bool
}

func (a *Applier) resolver() *resolver { return &resolver{mapper: a.mapper} }

func (r *resolver) mapping(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	var versions []string
	if gvk.Version != "" {
		versions = []string{gvk.Version}
	}
	return r.mappingIn(ctx, gvk.GroupKind(), versions...)
}

// mappingIn maps gk in the first of versions the cluster serves (any
// version when none is given).
func (r *resolver) mappingIn(ctx context.Context, gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m := meta.ToRESTMapperWithContext(r.mapper)
	mapping, err := m.RESTMappingWithContext(ctx, gk, versions...)
	if err != nil && meta.IsNoMatchError(err) && !r.didReset {
		r.didReset = true
		switch rm := r.mapper.(type) {
		case meta.ResettableRESTMapperWithContext:
			rm.ResetWithContext(ctx)
		case meta.ResettableRESTMapper:
			rm.Reset()
		default:
			return nil, err
		}
		mapping, err = m.RESTMappingWithContext(ctx, gk, versions...)
	}
	return mapping, err
}

// locate returns obj's mapping and namespace: namespaced objects without a
// namespace get defaultNS, cluster-scoped ones none.
func (r *resolver) locate(ctx context.Context, obj *unstructured.Unstructured, defaultNS string) (*meta.RESTMapping, string, error) {
	ref := RefOf(obj)
	mapping, err := r.mapping(ctx, obj.GroupVersionKind())
	if err != nil {
		if ctxErr := ctx.Err(); errors.Is(ctxErr, context.Canceled) {
			// Discovery cut short by an interrupt says nothing about the
			// kind (and its error need not wrap the cancellation).
			if !errors.Is(err, ctxErr) {
				err = fmt.Errorf("%w: %w", err, ctxErr)
			}
			return nil, "", fmt.Errorf("%s: map kind %s in %s: %w", ref, ref.Kind, ref.APIVersion(), err)
		}
		return nil, "", &UnknownKindError{Object: ref, Err: err}
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return mapping, "", nil
	}
	ns := obj.GetNamespace()
	if ns == "" {
		ns = defaultNS
	}
	if ns == "" {
		return nil, "", fmt.Errorf("%s: namespaced object without a namespace, and no release namespace given", ref)
	}
	return mapping, ns, nil
}

func (a *Applier) resource(mapping *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dynamic.Resource(mapping.Resource).Namespace(namespace)
	}
	return a.dynamic.Resource(mapping.Resource)
}

func isNamespace(r ObjectRef) bool { return r.Group == "" && r.Kind == "Namespace" }

func isDeployment(r ObjectRef) bool { return r.Group == "apps" && r.Kind == "Deployment" }

func isHPA(r ObjectRef) bool { return r.Group == "autoscaling" && r.Kind == "HorizontalPodAutoscaler" }
