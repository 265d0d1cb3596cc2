package cluster

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/vllmctl/vllmctl/internal/object"
)

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
	ref := object.RefOf(obj)
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
