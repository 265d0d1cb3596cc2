package charts

import (
	"context"
	"fmt"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Render is RenderContext without a context.
func Render(ch *chart.Chart, opts RenderOptions) (*Rendered, error) {
	return RenderContext(context.Background(), ch, opts)
}

// SetDefaultNamespace sets namespace on every object in objs that has none
// and whose kind is namespaced according to namespaced (IsNamespacedKind
// when nil), as kubectl apply -n does. Render leaves namespaces as the
// templates wrote them; the release engine's applier does the same with the cluster's RESTMapper.
func SetDefaultNamespace(objs []*unstructured.Unstructured, namespace string, namespaced func(schema.GroupVersionKind) (bool, error)) error {
	if namespaced == nil {
		namespaced = func(gvk schema.GroupVersionKind) (bool, error) { return IsNamespacedKind(gvk), nil }
	}
	for _, o := range objs {
		if o.GetNamespace() != "" {
			continue
		}
		ok, err := namespaced(o.GroupVersionKind())
		if err != nil {
			return fmt.Errorf("scope of %s: %w", ObjectRef(o), err)
		}
		if ok {
			o.SetNamespace(namespace)
		}
	}
	return nil
}

// parseObjects splits the rendered templates into objects, in file-name
// order then document order, dropping empty documents. A document that is
// not valid YAML or not a Kubernetes object, and a duplicate object, are
// *InputErrors naming the template.
func parseObjects(files map[string]string) ([]*unstructured.Unstructured, error) {
	objs, _, err := parseRendered(files)
	return objs, err
}
