package cluster

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"

	"helm.sh/helm/v4/pkg/engine"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
)

// Discovered is what a render for the cluster reads of its discovery, as
// Helm's action.Configuration.getCapabilities reads it: the server's
// version and its API versions.
type Discovered struct {
	// KubeVersion is the server's GitVersion (e.g. "v1.37.2").
	KubeVersion string
	// APIVersions are the served "group/version" and "group/version/Kind"
	// entries (core as "v1" and "v1/Pod"), sorted; empty when discovery
	// listed nothing (Helm then renders with its default set).
	APIVersions []string
	// Warning is set when some API group could not be discovered (an
	// orphaned APIService): Helm warns and renders with the rest.
	Warning string
}

// Discover reads the server's version and API versions from dc, fresh
// (not from a cache: a CRD created a moment ago counts, as Helm
// invalidates its discovery cache first), under ctx. It is Helm's
// GetVersionSet (pkg/action): its package brings Helm's whole client for
// this one function. A group that fails discovery is left out with a
// warning, as Helm does; any other failure is an error (the cluster's,
// exit 6).
func Discover(ctx context.Context, dc discovery.DiscoveryInterface) (*Discovered, error) {
	dcc := discovery.ToDiscoveryInterfaceWithContext(dc)
	v, err := dcc.ServerVersionWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("server version: %w", err)
	}
	d := &Discovered{KubeVersion: v.GitVersion}
	groups, resources, err := discovery.ServerGroupsAndResourcesWithContext(ctx, dcc)
	if err != nil {
		if !discovery.IsGroupDiscoveryFailedError(err) {
			return nil, fmt.Errorf("discover the cluster's API versions: %w", err)
		}
		d.Warning = fmt.Sprintf("the cluster has an API group that cannot be discovered (rendering without it, as Helm does): %v", err)
	}
	seen := map[string]bool{}
	for _, g := range groups {
		for _, gv := range g.Versions {
			seen[gv.GroupVersion] = true
		}
	}
	for _, r := range resources {
		for _, res := range r.APIResources {
			seen[path.Join(r.GroupVersion, res.Kind)] = true
		}
	}
	for k := range seen {
		d.APIVersions = append(d.APIVersions, k)
	}
	sort.Strings(d.APIVersions)
	return d, nil
}

// Lookup is the client provider of a render's lookup function on the
// Applier's cluster: kinds resolved by its RESTMapper (reset once when a
// kind is not found, for a CRD created since it was filled), objects read
// with its dynamic client. served are the cluster's API versions
// (Discovered.APIVersions): a kind of a served group/version that the
// cluster does not know reads as not found (an empty map), one of a group
// version the cluster does not serve is an error, as with Helm's lookup.
// charts wraps the clients it hands out so that only Get and List reach
// the cluster.
func (a *Applier) Lookup(ctx context.Context, served []string) engine.ClientProvider {
	return &lookupClients{ctx: ctx, a: a, served: served}
}

type lookupClients struct {
	ctx    context.Context
	a      *Applier
	served []string
	reset  bool
}

func (l *lookupClients) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	m, err := l.a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && meta.IsNoMatchError(err) && !l.reset {
		l.reset = true
		l.a.ResetDiscovery(l.ctx)
		m, err = l.a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	switch {
	case err == nil:
		return l.a.dynamic.Resource(m.Resource), m.Scope.Name() == meta.RESTScopeNameNamespace, nil
	case meta.IsNoMatchError(err) && slices.Contains(l.served, gvk.GroupVersion().String()):
		return notFound{gvk: gvk}, true, nil
	case meta.IsNoMatchError(err):
		return nil, false, fmt.Errorf("lookup %s: the cluster does not serve %s: %w", kind, gvk.GroupVersion(), err)
	}
	return nil, false, fmt.Errorf("lookup %s %s: %w", apiVersion, kind, err)
}

// notFound is the client of a kind the cluster does not have in a group
// version it serves: every read is NotFound (lookup's empty map).
type notFound struct {
	dynamic.NamespaceableResourceInterface // nil: only reads exist
	gvk                                    schema.GroupVersionKind
}

func (n notFound) Namespace(string) dynamic.ResourceInterface { return n }

func (n notFound) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: n.gvk.Group, Resource: n.gvk.Kind}, name)
}

func (n notFound) List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: n.gvk.Group, Resource: n.gvk.Kind}, "")
}

func (n notFound) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: n.gvk.Group, Resource: n.gvk.Kind}, "")
}
