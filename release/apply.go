package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Labels and names the applier relies on (contract: "Release records").
const (
	// LabelInstance names the release an applied object belongs to.
	LabelInstance = "app.kubernetes.io/instance"
	// FieldManager is the server-side apply field manager of every object
	// vllmctl applies.
	FieldManager = "vllmctl"
	// HandoverManagerSuffix is appended to the field manager to name the
	// manager that keeps a Deployment's .spec.replicas while ownership of it
	// passes to a HorizontalPodAutoscaler (see [Applier.Apply]).
	HandoverManagerSuffix = "-hpa-handover"
)

// exitCluster is the contract's exit code for "the cluster refused".
const exitCluster = 6

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
	// ForceOnConflict, honoured only with DryRun and without Force, dry-runs
	// an object whose apply conflicts with another field manager again with
	// force and reports the conflict in its result's Conflict: a preview of
	// what --force-conflicts would change, and of what needs it. Without it
	// a conflict is an error.
	ForceOnConflict bool
}

// ApplyResult reports the apply of one object.
type ApplyResult struct {
	Object ObjectRef
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

// NewApplierForConfig builds an Applier from a REST config, with a deferred
// RESTMapper over in-memory cached discovery.
func NewApplierForConfig(cfg *rest.Config) (*Applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build dynamic client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
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

// planned is one object ready to apply.
type planned struct {
	ref     ObjectRef
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
	seen := map[objectKey]bool{}
	for _, obj := range objs {
		p, err := a.prepare(ctx, r, obj, opts.Namespace)
		if err != nil {
			return nil, err
		}
		if seen[p.ref.key()] {
			return nil, fmt.Errorf("%s: appears more than once", p.ref)
		}
		seen[p.ref.key()] = true
		plan = append(plan, p)
	}
	sort.SliceStable(plan, func(i, j int) bool { return isNamespace(plan[i].ref) && !isNamespace(plan[j].ref) })

	var results []ApplyResult
	// missing holds namespaces that a dry run would create: the server
	// cannot dry-run objects into them.
	missing := map[string]bool{}
	if opts.CreateNamespace && opts.Namespace != "" && !seen[objectKey{kind: "Namespace", name: opts.Namespace}] {
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
		res, err := a.applyOne(ctx, p, opts, targets[p.ref.key()])
		if err != nil {
			return results, err
		}
		if opts.DryRun && isNamespace(p.ref) && res.Action == ActionCreated {
			missing[p.ref.Name] = true
		}
		results = append(results, res)
	}
	return results, nil
}

// prepare resolves obj and builds the body to apply: a copy with the
// namespace set (or cleared) and server-owned metadata removed.
func (a *Applier) prepare(ctx context.Context, r *resolver, obj *unstructured.Unstructured, defaultNS string) (planned, error) {
	ref := RefOf(obj)
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

func isNamespace(r ObjectRef) bool { return r.Group == "" && r.Kind == "Namespace" }

func isDeployment(r ObjectRef) bool { return r.Group == "apps" && r.Kind == "Deployment" }

func isHPA(r ObjectRef) bool { return r.Group == "autoscaling" && r.Kind == "HorizontalPodAutoscaler" }

// ensureNamespace creates opts.Namespace when it does not exist. It returns
// a result only when the namespace is (or, in a dry run, would be) created.
func (a *Applier) ensureNamespace(ctx context.Context, opts ApplyOptions) (*ApplyResult, error) {
	ref := ObjectRef{Version: "v1", Kind: "Namespace", Name: opts.Namespace}
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

// hpaTargets returns the Deployments among plan that a
// HorizontalPodAutoscaler targets, from the HPAs being applied and those
// live in the Deployments' namespaces.
func (a *Applier) hpaTargets(ctx context.Context, r *resolver, plan []planned, opts ApplyOptions, missing map[string]bool) (map[objectKey]bool, error) {
	deployments := map[objectKey]bool{}
	namespaces := map[string]bool{}
	applied := map[objectKey]bool{}
	for _, p := range plan {
		if isDeployment(p.ref) {
			deployments[p.ref.key()] = true
			namespaces[p.ref.Namespace] = true
		}
		if isHPA(p.ref) {
			applied[p.ref.key()] = true
		}
	}
	targets := map[objectKey]bool{}
	if len(deployments) == 0 {
		return targets, nil
	}
	mark := func(hpa *unstructured.Unstructured, ns string) {
		if k, ok := hpaTarget(hpa, ns); ok && deployments[k] {
			targets[k] = true
		}
	}
	for _, p := range plan {
		if isHPA(p.ref) {
			mark(p.body, p.ref.Namespace)
		}
	}

	mapping, err := r.mappingIn(ctx, schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, "v2", "v1")
	if meta.IsNoMatchError(err) {
		return targets, nil // the cluster serves no HPAs
	}
	if err != nil {
		return nil, fmt.Errorf("look up HorizontalPodAutoscalers: %w", err)
	}
	nsList := make([]string, 0, len(namespaces))
	for ns := range namespaces {
		nsList = append(nsList, ns)
	}
	sort.Strings(nsList)
	for _, ns := range nsList {
		if missing[ns] {
			continue
		}
		list, err := a.dynamic.Resource(mapping.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list HorizontalPodAutoscalers in namespace %s: %w", ns, err)
		}
		for i := range list.Items {
			hpa := &list.Items[i]
			ref := RefOf(hpa)
			ref.Group = "autoscaling"
			if opts.Release != "" && !applied[ref.key()] && managedBy(hpa, opts.Release) {
				continue // this release's HPA, about to be pruned
			}
			mark(hpa, ns)
		}
	}
	return targets, nil
}

// hpaTarget returns the Deployment an HPA scales, if it scales one.
func hpaTarget(hpa *unstructured.Unstructured, ns string) (objectKey, bool) {
	kind, _, _ := unstructured.NestedString(hpa.Object, "spec", "scaleTargetRef", "kind")
	name, _, _ := unstructured.NestedString(hpa.Object, "spec", "scaleTargetRef", "name")
	apiVersion, _, _ := unstructured.NestedString(hpa.Object, "spec", "scaleTargetRef", "apiVersion")
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind != "Deployment" || gv.Group != "apps" || name == "" {
		return objectKey{}, false
	}
	return objectKey{group: "apps", kind: "Deployment", namespace: ns, name: name}, true
}

// managedBy reports whether obj carries the labels of release's objects.
func managedBy(obj *unstructured.Unstructured, release string) bool {
	l := obj.GetLabels()
	return l[LabelManagedBy] == ManagedByVllmctl && l[LabelInstance] == release
}

// applyOne applies one planned object.
func (a *Applier) applyOne(ctx context.Context, p planned, opts ApplyOptions, hpaTargeted bool) (ApplyResult, error) {
	client := a.resource(p.mapping, p.ref.Namespace)
	live, err := client.Get(ctx, p.ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return ApplyResult{}, fmt.Errorf("get %s: %w", p.ref, err)
	}

	body := p.body
	handover := opts.FieldManager + HandoverManagerSuffix
	if hpaTargeted && isDeployment(p.ref) {
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
		if apierrors.IsNotFound(err) && p.ref.Namespace != "" && live == nil {
			return ApplyResult{}, fmt.Errorf("apply %s (does namespace %s exist? --create-namespace creates it): %w", p.ref, p.ref.Namespace, err)
		}
		return ApplyResult{}, fmt.Errorf("apply %s: %w", p.ref, err)
	}
	return ApplyResult{Object: p.ref, Action: classify(live, applied, opts.DryRun), Live: applied, Conflict: conflict}, nil
}

// handOver applies the live replicas value under the handover manager, so
// that the field survives vllmctl dropping it. A conflict means another
// manager (the autoscaler) already owns the field, which is what we want.
func (a *Applier) handOver(ctx context.Context, client dynamic.ResourceInterface, p planned, replicas int64, manager string) error {
	h := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": p.body.GetAPIVersion(),
		"kind":       p.body.GetKind(),
		"metadata":   map[string]any{"name": p.ref.Name, "namespace": p.ref.Namespace},
		"spec":       map[string]any{"replicas": replicas},
	}}
	_, err := client.Apply(ctx, p.ref.Name, h, metav1.ApplyOptions{FieldManager: manager})
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("hand .spec.replicas of %s over to its HorizontalPodAutoscaler: %w", p.ref, err)
	}
	return nil
}

// ownsField reports whether manager owns the field at path through an
// apply (not a subresource) according to obj's managedFields.
func ownsField(obj *unstructured.Unstructured, manager string, path ...string) bool {
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager != manager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(mf.FieldsV1.Raw, &fields); err != nil {
			continue
		}
		cur := fields
		found := true
		for _, p := range path {
			next, ok := cur["f:"+p]
			if !ok {
				found = false
				break
			}
			cur, _ = next.(map[string]any)
		}
		if found {
			return true
		}
	}
	return false
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

// FieldConflict is one field another field manager owns.
type FieldConflict struct {
	// Manager is the other field manager, e.g. "kubectl-scale".
	Manager string `json:"manager"`
	// Subresource is set when the manager wrote the field through one
	// (e.g. "scale").
	Subresource string `json:"subresource,omitempty"`
	// Field is the field path, e.g. ".spec.replicas".
	Field string `json:"field"`
}

// FieldConflictError reports that server-side apply refused to change
// fields another field manager owns (exit code 6). Re-applying with
// ApplyOptions.Force (--force-conflicts) takes them over.
type FieldConflictError struct {
	Object    ObjectRef
	Conflicts []FieldConflict
	// Err is the API server's error.
	Err error
}

func (e *FieldConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apply %s: field manager conflict: ", e.Object)
	byManager := map[string][]string{}
	var managers []string
	for _, c := range e.Conflicts {
		m := strconv.Quote(c.Manager)
		if c.Subresource != "" {
			m += fmt.Sprintf(" (subresource %s)", c.Subresource)
		}
		if _, ok := byManager[m]; !ok {
			managers = append(managers, m)
		}
		byManager[m] = append(byManager[m], c.Field)
	}
	for i, m := range managers {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s owned by %s", strings.Join(byManager[m], ", "), m)
	}
	b.WriteString(" (changed by another client since vllmctl applied it); re-run with --force-conflicts to take these fields over")
	return b.String()
}

// Unwrap returns the API server's error.
func (e *FieldConflictError) Unwrap() error { return e.Err }

// ExitCode is 6: the cluster refused.
func (e *FieldConflictError) ExitCode() int { return exitCluster }

// Managers returns the other field managers, sorted, without repeats.
func (e *FieldConflictError) Managers() []string {
	set := map[string]bool{}
	for _, c := range e.Conflicts {
		set[c.Manager] = true
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Fields returns the conflicting field paths, in the server's order,
// without repeats.
func (e *FieldConflictError) Fields() []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range e.Conflicts {
		if !seen[c.Field] {
			seen[c.Field] = true
			out = append(out, c.Field)
		}
	}
	return out
}

func (e *FieldConflictError) onlyManager(manager string) bool {
	ms := e.Managers()
	return len(ms) == 1 && ms[0] == manager
}

// conflictMessage matches a FieldManagerConflict cause's message, e.g.
// `conflict with "kubectl-scale" using apps/v1` or
// `conflict with "x" with subresource "scale" using apps/v1 at 2025-...`.
var conflictMessage = regexp.MustCompile(`^conflict with ("(?:[^"\\]|\\.)*")(?: with subresource ("(?:[^"\\]|\\.)*"))?`)

// conflictError turns an apply conflict into a *FieldConflictError, or
// returns nil when err is not a field-manager conflict.
func conflictError(ref ObjectRef, err error) *FieldConflictError {
	if !apierrors.IsConflict(err) {
		return nil
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var conflicts []FieldConflict
	for _, c := range status.Status().Details.Causes {
		if c.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		fc := FieldConflict{Field: c.Field, Manager: c.Message}
		if m := conflictMessage.FindStringSubmatch(c.Message); m != nil {
			if s, err := strconv.Unquote(m[1]); err == nil {
				fc.Manager = s
			}
			if m[2] != "" {
				if s, err := strconv.Unquote(m[2]); err == nil {
					fc.Subresource = s
				}
			}
		}
		conflicts = append(conflicts, fc)
	}
	if len(conflicts) == 0 {
		return nil
	}
	return &FieldConflictError{Object: ref, Conflicts: conflicts, Err: err}
}

// UnknownKindError reports an object whose kind the cluster does not serve,
// even after refreshing discovery (exit code 6: the cluster cannot take the
// object).
type UnknownKindError struct {
	Object ObjectRef
	Err    error
}

func (e *UnknownKindError) Error() string {
	return fmt.Sprintf("%s: the cluster does not serve kind %s in %s (is its CRD installed?): %v",
		e.Object, e.Object.Kind, e.Object.APIVersion(), e.Err)
}

// Unwrap returns the RESTMapper's error.
func (e *UnknownKindError) Unwrap() error { return e.Err }

// ExitCode is 6: the cluster cannot take the object.
func (e *UnknownKindError) ExitCode() int { return exitCluster }
