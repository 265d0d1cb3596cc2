package charts

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/engine"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Cluster is what a render for a cluster reads from it, as `helm upgrade`
// and `helm install` (and `helm template --dry-run=server`) read it:
// .Capabilities.APIVersions from the cluster's discovery and a lookup
// function answered by the cluster. A render without one (RenderOptions.
// Cluster nil) is `helm template`'s: Helm's default API versions (plus
// RenderOptions.APIVersions) and a lookup that returns an empty map.
type Cluster struct {
	// APIVersions are the cluster's "group/version" and
	// "group/version/Kind" entries (see DiscoveredAPIVersions); empty
	// means Helm's default version set, as Helm does when discovery
	// returns nothing.
	APIVersions []string
	// WithChartCRDs counts the chart's own crds/ (their served versions
	// and kinds) among APIVersions, as `helm install` does, which creates
	// them before it reads the capabilities; vllmctl creates them on an
	// upgrade too. False for a render whose CRDs will not be created
	// (--skip-crds).
	WithChartCRDs bool
	// Lookup answers the templates' lookup function (nil: an empty map,
	// as `helm template`). It is only ever asked for Get and List, read
	// under the render's context; see lookupProvider.
	Lookup engine.ClientProvider
}

// LookupError is a template's lookup that the cluster refused or could
// not answer (Forbidden, unreachable): the render fails as under Helm,
// and the error carries the API error (exit code 6, the cluster's), with
// the template's location in its message.
type LookupError struct {
	// Template is the render's error, naming the template and line.
	Template error
	// Err is the cluster's error.
	Err error
}

func (e *LookupError) Error() string {
	return fmt.Sprintf("%v (the cluster answered the lookup: %v)", e.Template, e.Err)
}

// Unwrap returns the cluster's error.
func (e *LookupError) Unwrap() error { return e.Err }

// clusterCapabilities returns caps with the cluster's API versions (and
// the chart's CRDs' when c says so), or caps itself without a cluster.
func clusterCapabilities(caps *common.Capabilities, c *Cluster, crds []*unstructured.Unstructured) *common.Capabilities {
	if c == nil || len(c.APIVersions) == 0 && !c.WithChartCRDs {
		return caps
	}
	out := *caps
	versions := slices.Clone(c.APIVersions)
	if len(versions) == 0 {
		versions = slices.Clone(common.DefaultVersionSet)
	}
	if c.WithChartCRDs {
		versions = append(versions, CRDAPIVersions(crds)...)
	}
	slices.Sort(versions)
	out.APIVersions = common.VersionSet(slices.Compact(versions))
	return &out
}

// CRDAPIVersions are the "group/version" and "group/version/Kind" entries
// the CustomResourceDefinitions crds add to a cluster's discovery: one
// pair per served version.
func CRDAPIVersions(crds []*unstructured.Unstructured) []string {
	var out []string
	for _, crd := range crds {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			m, _ := v.(map[string]any)
			name, _ := m["name"].(string)
			if served, ok := m["served"].(bool); name == "" || group == "" || ok && !served {
				continue
			}
			gv := schema.GroupVersion{Group: group, Version: name}.String()
			out = append(out, gv)
			if kind != "" {
				out = append(out, path.Join(gv, kind))
			}
		}
	}
	return out
}

// lookupProvider wraps the caller's ClientProvider: every client it hands
// out reads under ctx (the engine's lookup gets no context of ours), can
// only Get and List, and keeps the first error the cluster answered
// (other than NotFound, which lookup turns into an empty map), so that a
// render that fails on it can say it was the cluster's.
type lookupProvider struct {
	ctx   context.Context
	inner engine.ClientProvider
	mu    sync.Mutex
	err   error
}

func (p *lookupProvider) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	c, namespaced, err := p.inner.GetClientFor(apiVersion, kind)
	if err != nil {
		p.record(err)
		return nil, false, err
	}
	return &readOnlyResource{p: p, nri: c, ri: c}, namespaced, nil
}

func (p *lookupProvider) record(err error) {
	if err == nil || apierrors.IsNotFound(err) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// failure is the first error the cluster answered, if any.
func (p *lookupProvider) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// readOnlyResource is the client a lookup gets: Get and List, under the
// render's context. It has no other method of its own: Helm's lookup
// calls none (the embedded interface is nil, so a write would panic
// rather than reach the cluster).
type readOnlyResource struct {
	dynamic.ResourceInterface // nil: only the methods below exist
	p                         *lookupProvider
	nri                       dynamic.NamespaceableResourceInterface
	ri                        dynamic.ResourceInterface
}

func (r *readOnlyResource) Namespace(ns string) dynamic.ResourceInterface {
	return &readOnlyResource{p: r.p, ri: r.nri.Namespace(ns)}
}

func (r *readOnlyResource) Get(_ context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	o, err := r.ri.Get(r.p.ctx, name, opts, sub...)
	r.p.record(err)
	return o, err
}

func (r *readOnlyResource) List(_ context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	l, err := r.ri.List(r.p.ctx, opts)
	r.p.record(err)
	return l, err
}

// lookupFailed returns the render error err as a *LookupError when the
// cluster refused a lookup during the render, else nil.
func lookupFailed(p *lookupProvider, err error) error {
	if p == nil {
		return nil
	}
	if apiErr := p.failure(); apiErr != nil && !errors.Is(err, context.Canceled) {
		return &LookupError{Template: err, Err: apiErr}
	}
	return nil
}
