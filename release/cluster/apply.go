package cluster

import (
	"context"
	"fmt"
	"sort"
	"sync"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"

	"github.com/vllmctl/vllmctl/internal/object"
)

// Labels and names the applier relies on (contract: "Release records").
const (
	// FieldManager is the server-side apply field manager of every object
	// vllmctl applies.
	FieldManager = "vllmctl"
	// HandoverManagerSuffix is appended to the field manager to name the
	// manager that keeps a Deployment's .spec.replicas while ownership of it
	// passes to a HorizontalPodAutoscaler (see [Applier.Apply]).
	HandoverManagerSuffix = "-hpa-handover"
)

// Action says what an apply did to one object.
type Action string

// The actions an apply reports.
const (
	ActionCreated    Action = "created"
	ActionConfigured Action = "configured"
	ActionUnchanged  Action = "unchanged"
)

// ApplyOptions tune [Applier.Apply].
type ApplyOptions struct {
	// Namespace is the release namespace, given to namespaced objects
	// that have none. Required when any object is namespaced and has none.
	Namespace string
	// Release is the release name. When set, live HorizontalPodAutoscalers
	// that carry this release's labels but are not among the applied
	// objects are ignored by the HPA rule: they are about to be pruned.
	Release string
	// FieldManager defaults to [FieldManager].
	FieldManager string
	// Force takes over fields owned by other managers (--force-conflicts).
	Force bool
	// DryRun applies with dryRun=All: the server validates and defaults
	// everything, nothing is persisted.
	DryRun bool
	// CreateNamespace creates Namespace when it does not exist.
	CreateNamespace bool
	// NoCreateNamespaceFlag says the operation has no --create-namespace
	// flag (a rollback): the error of an object whose namespace does not
	// exist does not suggest it.
	NoCreateNamespaceFlag bool
	// ForceOnConflict, honoured only with DryRun and without Force, dry-runs
	// an object whose apply conflicts with another field manager again with
	// force and reports the conflict in its result's Conflict: a preview of
	// what --force-conflicts would change, and of what needs it. Without it
	// a conflict is an error.
	ForceOnConflict bool
	// Known are live copies of the objects read earlier in the same
	// operation (a nil value: known absent), by object.Ref.String(): the
	// apply does not read them again. Deployments an HPA targets are
	// always read (the replicas hand-over needs their current owners).
	Known map[string]*unstructured.Unstructured
	// LiveHPAs, when set, keeps the live HorizontalPodAutoscalers listed
	// by the first apply of an operation for the next ones (a deploy's
	// dry run, then its apply): one list per namespace and operation.
	LiveHPAs *LiveHPAs
}

// LiveHPAs caches the live HorizontalPodAutoscalers of namespaces for one
// operation. The zero value is ready to use; it is safe for concurrent use.
type LiveHPAs struct {
	mu   sync.Mutex
	byNS map[string][]unstructured.Unstructured
}

// Seed records hpas as the live HPAs of namespace (listed by another part
// of the operation, e.g. the capacity preflight), converted for the apply.
func (c *LiveHPAs) Seed(namespace string, hpas []autoscalingv2.HorizontalPodAutoscaler) {
	items := make([]unstructured.Unstructured, 0, len(hpas))
	for i := range hpas {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&hpas[i])
		if err != nil {
			return // not seeded: the apply lists them
		}
		u := unstructured.Unstructured{Object: m}
		u.SetAPIVersion("autoscaling/v2")
		u.SetKind("HorizontalPodAutoscaler")
		items = append(items, u)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byNS == nil {
		c.byNS = map[string][]unstructured.Unstructured{}
	}
	c.byNS[namespace] = items
}

// Listed returns the HPAs of namespace when they were listed (or seeded)
// already, for the capacity preflight.
func (c *LiveHPAs) Listed(namespace string) ([]autoscalingv2.HorizontalPodAutoscaler, bool) {
	c.mu.Lock()
	items, ok := c.byNS[namespace]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	out := make([]autoscalingv2.HorizontalPodAutoscaler, 0, len(items))
	for i := range items {
		var h autoscalingv2.HorizontalPodAutoscaler
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(items[i].Object, &h); err != nil {
			return nil, false // the preflight lists them itself
		}
		out = append(out, h)
	}
	return out, true
}

// list returns the HPAs of namespace, listing them with fn the first time.
func (c *LiveHPAs) list(namespace string, fn func() ([]unstructured.Unstructured, error)) ([]unstructured.Unstructured, error) {
	if c == nil {
		return fn()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if items, ok := c.byNS[namespace]; ok {
		return items, nil
	}
	items, err := fn()
	if err != nil {
		return nil, err
	}
	if c.byNS == nil {
		c.byNS = map[string][]unstructured.Unstructured{}
	}
	c.byNS[namespace] = items
	return items, nil
}

// ApplyResult reports the apply of one object.
type ApplyResult struct {
	Object object.Ref
	Action Action
	// Live is the object as the server returned it (for a dry run: as it
	// would be). For an Unvalidated result it is the object that would be
	// sent.
	Live *unstructured.Unstructured
	// Unvalidated is set in a dry run for objects of a namespace that does
	// not exist yet (it would be created): the server cannot dry-run them.
	Unvalidated bool
	// Conflict is set in a dry run with ForceOnConflict when the apply
	// conflicts with other field managers: Live is then the outcome of a
	// forced apply (--force-conflicts).
	Conflict *FieldConflictError
	// Before is the live object the apply read before applying (nil when
	// absent), when BeforeRead.
	Before     *unstructured.Unstructured
	BeforeRead bool
}

// Applier applies objects with server-side apply, through a dynamic client
// and a discovery-backed RESTMapper.
type Applier struct {
	dynamic dynamic.Interface
	mapper  meta.RESTMapper
}

// NewApplier builds an Applier from kubectl-style flags (cli-runtime): their
// REST config and their deferred, cached discovery RESTMapper.
func NewApplier(getter genericclioptions.RESTClientGetter) (*Applier, error) {
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load client configuration: %w", err)
	}
	mapper, err := getter.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("build REST mapper: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build dynamic client: %w", err)
	}
	return NewApplierFromClients(dyn, mapper), nil
}

// NewApplierFromClients builds an Applier from a dynamic client and a
// RESTMapper. A mapper implementing meta.ResettableRESTMapper is reset once
// per operation when a kind is not found, then asked again.
func NewApplierFromClients(dyn dynamic.Interface, mapper meta.RESTMapper) *Applier {
	return &Applier{dynamic: dyn, mapper: mapper}
}

// DynamicClient returns the Applier's dynamic client (to share with a
// waiter).
func (a *Applier) DynamicClient() dynamic.Interface { return a.dynamic }

// RESTMapper returns the Applier's RESTMapper (to share with a waiter).
func (a *Applier) RESTMapper() meta.RESTMapper { return a.mapper }

// planned is one object ready to apply.
type planned struct {
	ref     object.Ref
	mapping *meta.RESTMapping
	body    *unstructured.Unstructured
}

// Apply applies objs with server-side apply (field manager vllmctl), one at
// a time in the given order except that Namespaces go first. Every kind is
// resolved before anything is written, so an unknown kind applies nothing.
//
// HPA rule: when a HorizontalPodAutoscaler targets a Deployment being
// applied (an HPA among objs, or one live in the Deployment's namespace),
// .spec.replicas is left out of that Deployment's apply so vllmctl and the
// autoscaler never fight over it. If vllmctl owned the field until then, its
// current value is first applied by the handover manager
// (FieldManager+HandoverManagerSuffix), so that dropping the field does not
// reset it to the default of 1; a later apply that sets replicas again takes
// the field back from the handover manager without a conflict.
//
// Results come in apply order, preceded by the Namespace when
// CreateNamespace created it. On error the results of the objects applied
// so far are returned with it. A field-manager conflict is a
// *FieldConflictError; other API errors are wrapped, naming the object.
func (a *Applier) Apply(ctx context.Context, objs []*unstructured.Unstructured, opts ApplyOptions) ([]ApplyResult, error) {
	if opts.FieldManager == "" {
		opts.FieldManager = FieldManager
	}
	r := a.resolver()
	plan := make([]planned, 0, len(objs))
	seen := map[object.ID]bool{}
	for _, obj := range objs {
		p, err := a.prepare(ctx, r, obj, opts.Namespace)
		if err != nil {
			return nil, err
		}
		if seen[p.ref.ID()] {
			return nil, fmt.Errorf("%s: appears more than once", p.ref)
		}
		seen[p.ref.ID()] = true
		plan = append(plan, p)
	}
	sort.SliceStable(plan, func(i, j int) bool { return plan[i].ref.IsNamespace() && !plan[j].ref.IsNamespace() })

	var results []ApplyResult
	// missing holds namespaces that a dry run would create: the server
	// cannot dry-run objects into them.
	missing := map[string]bool{}
	if opts.CreateNamespace && opts.Namespace != "" && !seen[object.Ref{Kind: "Namespace", Name: opts.Namespace}.ID()] {
		res, err := a.ensureNamespace(ctx, opts)
		if err != nil {
			return nil, err
		}
		if res != nil {
			results = append(results, *res)
			if res.Unvalidated {
				missing[opts.Namespace] = true
			}
		}
	}

	targets, err := a.hpaTargets(ctx, r, plan, opts, missing)
	if err != nil {
		return nil, err
	}

	for _, p := range plan {
		if missing[p.ref.Namespace] {
			results = append(results, ApplyResult{Object: p.ref, Action: ActionCreated, Live: p.body, Unvalidated: true})
			continue
		}
		res, err := a.applyOne(ctx, p, opts, targets[p.ref.ID()])
		if err != nil {
			return results, err
		}
		if opts.DryRun && p.ref.IsNamespace() && res.Action == ActionCreated {
			missing[p.ref.Name] = true
		}
		results = append(results, res)
	}
	return results, nil
}

// prepare resolves obj and builds the body to apply: a copy with the
// namespace set (or cleared) and server-owned metadata removed.
func (a *Applier) prepare(ctx context.Context, r *resolver, obj *unstructured.Unstructured, defaultNS string) (planned, error) {
	ref := object.RefOf(obj)
	if ref.Kind == "" || ref.Version == "" {
		return planned{}, fmt.Errorf("object %q: apiVersion and kind are required", ref.Name)
	}
	if ref.Name == "" {
		return planned{}, fmt.Errorf("%s: metadata.name is required", ref)
	}
	mapping, ns, err := r.locate(ctx, obj, defaultNS)
	if err != nil {
		return planned{}, err
	}
	body := obj.DeepCopy()
	body.SetNamespace(ns)
	for _, f := range []string{"resourceVersion", "uid", "managedFields", "creationTimestamp", "generation", "selfLink", "deletionTimestamp"} {
		unstructured.RemoveNestedField(body.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(body.Object, "status")
	ref.Namespace = ns
	return planned{ref: ref, mapping: mapping, body: body}, nil
}

// ensureNamespace creates opts.Namespace when it does not exist. It returns
// a result only when the namespace is (or, in a dry run, would be) created.
func (a *Applier) ensureNamespace(ctx context.Context, opts ApplyOptions) (*ApplyResult, error) {
	ref := object.Ref{Version: "v1", Kind: "Namespace", Name: opts.Namespace}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	client := a.dynamic.Resource(gvr)
	_, err := client.Get(ctx, opts.Namespace, metav1.GetOptions{})
	switch {
	case err == nil:
		return nil, nil
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		// Forbidden: the user may not read namespaces; try to create it.
	default:
		return nil, fmt.Errorf("get %s: %w", ref, err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": opts.Namespace},
	}}
	co := metav1.CreateOptions{FieldManager: opts.FieldManager}
	if opts.DryRun {
		co.DryRun = []string{metav1.DryRunAll}
	}
	live, cerr := client.Create(ctx, ns, co)
	switch {
	case cerr == nil:
		return &ApplyResult{Object: ref, Action: ActionCreated, Live: live, Unvalidated: opts.DryRun}, nil
	case apierrors.IsAlreadyExists(cerr):
		return nil, nil
	}
	return nil, fmt.Errorf("create %s: %w", ref, cerr)
}

// applyOne applies one planned object.
func (a *Applier) applyOne(ctx context.Context, p planned, opts ApplyOptions, hpaTargeted bool) (ApplyResult, error) {
	client := a.resource(p.mapping, p.ref.Namespace)
	live, known := opts.Known[p.ref.String()]
	if !known || (hpaTargeted && p.ref.IsDeployment()) {
		var err error
		live, err = client.Get(ctx, p.ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			live = nil
		case err != nil:
			return ApplyResult{}, fmt.Errorf("get %s: %w", p.ref, err)
		}
	}

	body := p.body
	handover := opts.FieldManager + HandoverManagerSuffix
	if hpaTargeted && p.ref.IsDeployment() {
		body = body.DeepCopy()
		unstructured.RemoveNestedField(body.Object, "spec", "replicas")
		if live != nil && ownsField(live, opts.FieldManager, "spec", "replicas") {
			replicas, found, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
			switch {
			case !found:
			case opts.DryRun:
				// Predict the outcome of the handover without writing it.
				_ = unstructured.SetNestedField(body.Object, replicas, "spec", "replicas")
			default:
				if err := a.handOver(ctx, client, p, replicas, handover); err != nil {
					return ApplyResult{}, err
				}
			}
		}
	}

	ao := metav1.ApplyOptions{FieldManager: opts.FieldManager, Force: opts.Force}
	if opts.DryRun {
		ao.DryRun = []string{metav1.DryRunAll}
	}
	applied, err := client.Apply(ctx, p.ref.Name, body, ao)
	if err != nil {
		if ce := conflictError(p.ref, err); ce != nil && !opts.Force && ce.onlyManager(handover) {
			// The handover manager is ours: take replicas back.
			ao.Force = true
			applied, err = client.Apply(ctx, p.ref.Name, body, ao)
		}
	}
	var conflict *FieldConflictError
	if err != nil && opts.DryRun && opts.ForceOnConflict && !opts.Force {
		if conflict = conflictError(p.ref, err); conflict != nil {
			// Preview what --force-conflicts would do.
			ao.Force = true
			applied, err = client.Apply(ctx, p.ref.Name, body, ao)
		}
	}
	if err != nil {
		if ce := conflictError(p.ref, err); ce != nil {
			return ApplyResult{}, ce
		}
		if apierrors.IsNotFound(err) && live == nil {
			return ApplyResult{}, applyNotFound(p.ref, opts, err)
		}
		return ApplyResult{}, fmt.Errorf("apply %s: %w", p.ref, err)
	}
	return ApplyResult{Object: p.ref, Action: classify(live, applied, opts.DryRun), Live: applied, Conflict: conflict,
		Before: live, BeforeRead: true}, nil
}

// applyNotFound is the error of an apply of ref the server answered
// NotFound (server-side apply creates an absent object): a bare 404 (no
// Status) is a kind the cluster no longer serves (its CRD was deleted
// while a cached discovery still mapped it), else the object's namespace
// does not exist (--create-namespace creates the release namespace, when
// the operation has that flag).
func applyNotFound(ref object.Ref, opts ApplyOptions, err error) error {
	switch {
	case apierrors.IsUnexpectedServerError(err):
		return &UnknownKindError{Object: ref, Err: err}
	case ref.Namespace == "":
		return fmt.Errorf("apply %s: %w", ref, err)
	case !opts.NoCreateNamespaceFlag && ref.Namespace == opts.Namespace:
		return fmt.Errorf("apply %s (does namespace %s exist? --create-namespace creates it): %w", ref, ref.Namespace, err)
	}
	return fmt.Errorf("apply %s (does namespace %s exist?): %w", ref, ref.Namespace, err)
}

// classify tells created, configured and unchanged apart. An apply that
// changes nothing leaves the resourceVersion as it was. A different one may
// come from a controller writing status between our read and our apply, so
// the content is compared then, as it is in a dry run (which never changes
// the resourceVersion).
func classify(before, after *unstructured.Unstructured, dryRun bool) Action {
	if before == nil {
		return ActionCreated
	}
	if !dryRun && before.GetResourceVersion() == after.GetResourceVersion() {
		return ActionUnchanged
	}
	if apiequality.Semantic.DeepEqual(comparable(before), comparable(after)) {
		return ActionUnchanged
	}
	return ActionConfigured
}

// comparable strips what changes without the object's desired state or
// ownership changing: status, resourceVersion, generation, and in
// managedFields the timestamps and the status writers.
func comparable(obj *unstructured.Unstructured) map[string]any {
	c := obj.DeepCopy()
	var mfs []metav1.ManagedFieldsEntry
	for _, mf := range c.GetManagedFields() {
		if mf.Subresource == "status" {
			continue
		}
		mf.Time = nil
		mfs = append(mfs, mf)
	}
	c.SetManagedFields(mfs)
	for _, f := range []string{"resourceVersion", "generation"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	return c.Object
}
