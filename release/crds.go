package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The CustomResourceDefinitions of a chart's crds/ directory (Helm's
// semantics, and a little more):
//
//   - they are created before any other object of the deploy, under the
//     release's lock, and never updated or deleted: one that exists is
//     left as it is (a changed CRD file changes nothing), on an install and
//     on an upgrade alike (an upgrade creates the CRDs a chart added);
//   - the deploy waits until each CRD it created is Established (a CRD
//     whose names are not accepted fails at once) and until discovery maps
//     its kinds, then applies the objects;
//   - objects of a kind a CRD still to be created defines cannot be
//     dry-run: the dry run, the diff and the up-to-date check count them as
//     to be created, and the diff shows each CRD to create;
//   - the release record lists the CRDs the revision created; uninstall
//     leaves them in place and says so;
//   - DeployOptions.SkipCRDs (--skip-crds) skips all of it; a chart without
//     crds/ never reads a CRD.

// PhaseCRDs is the step of a deploy that creates the chart's
// CustomResourceDefinitions (and the notes about them).
const PhaseCRDs Phase = "crds"

// Why a CRD step failed (Failure.Reason, CRDError.Reason).
const (
	ReasonCRDRefused          = "CRDRefused"
	ReasonCRDNamesNotAccepted = "CRDNamesNotAccepted"
	ReasonCRDNotEstablished   = "CRDNotEstablished"
)

// crdPollInterval is how often a deploy asks discovery again for the kinds
// of a CRD that is Established but not yet in the API server's discovery
// (a short lag at most).
const crdPollInterval = 250 * time.Millisecond

// CRDClient creates and reads CustomResourceDefinitions and refreshes the
// kinds the cluster serves: what a deploy of a chart with crds/ needs
// beyond an ObjectClient. [*Applier] implements it; an ObjectClient that
// does not cannot deploy a chart with crds/ (unless SkipCRDs).
type CRDClient interface {
	// GetCRD reads the CRD named name (a NotFound API error when absent).
	GetCRD(ctx context.Context, name string) (*unstructured.Unstructured, error)
	// CreateCRD creates crd, never updating an existing one (an
	// AlreadyExists API error then); with dryRun the server validates it
	// and nothing is persisted.
	CreateCRD(ctx context.Context, crd *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error)
	// WatchCRD watches the CRD named name from resourceVersion.
	WatchCRD(ctx context.Context, name, resourceVersion string) (watch.Interface, error)
	// MissingKinds refreshes discovery (once) and returns the kinds of
	// gvks the cluster does not serve.
	MissingKinds(ctx context.Context, gvks []schema.GroupVersionKind) ([]schema.GroupVersionKind, error)
}

var _ CRDClient = (*cluster.Applier)(nil)

// crdDef is one CRD of crds/ and what it defines.
type crdDef struct {
	obj        *unstructured.Unstructured
	name       string
	kind       schema.GroupKind
	namespaced bool
	// served are the versions the CRD serves.
	served []string
}

// ref is the CRD's reference.
func (c crdDef) ref() object.Ref {
	return object.Ref{Group: cluster.CRDGroup, Version: cluster.CRDVersion, Kind: cluster.CRDKind, Name: c.name}
}

// parseCRD checks one object of crds/ and reads what it defines.
func parseCRD(obj *unstructured.Unstructured) (crdDef, error) {
	gvk := obj.GroupVersionKind()
	name := obj.GetName()
	what := fmt.Sprintf("crds/ object %s %q", gvk.Kind, name)
	if gvk.Group != cluster.CRDGroup || gvk.Kind != cluster.CRDKind {
		return crdDef{}, fmt.Errorf("%s (apiVersion %s): crds/ holds CustomResourceDefinitions only (%s/%s)", what, obj.GetAPIVersion(), cluster.CRDGroup, cluster.CRDVersion)
	}
	if gvk.Version != cluster.CRDVersion {
		return crdDef{}, fmt.Errorf("%s: apiVersion %s is not served by Kubernetes since 1.22: use %s/%s", what, obj.GetAPIVersion(), cluster.CRDGroup, cluster.CRDVersion)
	}
	str := func(path ...string) string {
		s, _, _ := unstructured.NestedString(obj.Object, path...)
		return s
	}
	def := crdDef{obj: obj, name: name, kind: schema.GroupKind{Group: str("spec", "group"), Kind: str("spec", "names", "kind")}}
	plural := str("spec", "names", "plural")
	var missing []string
	for field, v := range map[string]string{"metadata.name": name, "spec.group": def.kind.Group, "spec.names.kind": def.kind.Kind, "spec.names.plural": plural} {
		if v == "" {
			missing = append(missing, field)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return crdDef{}, fmt.Errorf("%s: %s required", what, strings.Join(missing, ", "))
	}
	if want := plural + "." + def.kind.Group; name != want {
		return crdDef{}, fmt.Errorf("%s: its name must be <spec.names.plural>.<spec.group>, %q", what, want)
	}
	switch scope := str("spec", "scope"); scope {
	case "Namespaced":
		def.namespaced = true
	case "Cluster":
	default:
		return crdDef{}, fmt.Errorf("%s: spec.scope %q: want Namespaced or Cluster", what, scope)
	}
	versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if vn, _ := m["name"].(string); vn != "" && m["served"] == true {
			def.served = append(def.served, vn)
		}
	}
	if len(def.served) == 0 {
		return crdDef{}, fmt.Errorf("%s: spec.versions serves no version", what)
	}
	return def, nil
}

// parseCRDs checks the CRDs of crds/ (input errors, before the cluster is
// asked anything) and the versions objs use of the kinds they define; it
// returns them in name order.
func parseCRDs(crds, objs []*unstructured.Unstructured) ([]crdDef, error) {
	var defs []crdDef
	byName := map[string]bool{}
	byKind := map[schema.GroupKind]crdDef{}
	for _, obj := range crds {
		def, err := parseCRD(obj)
		if err != nil {
			return nil, err
		}
		if byName[def.name] {
			return nil, fmt.Errorf("crds/: %s %s appears more than once", cluster.CRDKind, def.name)
		}
		if other, ok := byKind[def.kind]; ok {
			return nil, fmt.Errorf("crds/: %s %s and %s both define kind %s", cluster.CRDKind, other.name, def.name, def.kind)
		}
		byName[def.name], byKind[def.kind] = true, def
		defs = append(defs, def)
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		def, ok := byKind[gvk.GroupKind()]
		if ok && !slices.Contains(def.served, gvk.Version) {
			return nil, fmt.Errorf("%s: %s %s (crds/) serves no version %s (it serves %s)",
				object.RefOf(o), cluster.CRDKind, def.name, gvk.Version, strings.Join(def.served, ", "))
		}
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].name < defs[j].name })
	return defs, nil
}

// crdPlan is what a deploy does with the chart's crds/: the CRDs absent
// from the cluster, to create under the lock, and the kinds they define,
// whose objects cannot be dry-run before then.
type crdPlan struct {
	// create are the absent CRDs, in name order, each with the server's
	// dry run of its creation.
	create []crdCreate
	// pending are the kinds the CRDs of create define.
	pending map[schema.GroupKind]crdDef
}

// crdCreate is one CRD to create.
type crdCreate struct {
	def crdDef
	// dry is the CRD as the server's dry run would store it.
	dry *unstructured.Unstructured
}

// empty reports whether there is nothing to create.
func (p *crdPlan) empty() bool { return p == nil || len(p.create) == 0 }

// defines returns the CRD to create that defines obj's kind.
func (p *crdPlan) defines(obj *unstructured.Unstructured) (crdDef, bool) {
	if p == nil {
		return crdDef{}, false
	}
	def, ok := p.pending[obj.GroupVersionKind().GroupKind()]
	return def, ok
}

// pendingKinds returns the kinds (with the versions objs use) of the
// objects of objs the CRDs to create define, each once, in order.
func (p *crdPlan) pendingKinds(objs []*unstructured.Unstructured) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, o := range objs {
		if _, ok := p.defines(o); ok && !slices.Contains(out, o.GroupVersionKind()) {
			out = append(out, o.GroupVersionKind())
		}
	}
	return out
}

// crdClient returns the object client's CRDClient.
func (e *Engine) crdClient() (CRDClient, error) {
	c, ok := e.Objects.(CRDClient)
	if !ok {
		return nil, fmt.Errorf("release engine: its object client (%T) cannot create CustomResourceDefinitions (crds/ of the chart)", e.Objects)
	}
	return c, nil
}

// planCRDs decides what the deploy of revision (0: not known yet) of
// release name does with crds, the CRDs of the chart's crds/, and objs,
// its other objects: nil when there are none (no request is made). The
// CRDs are checked first (an *InvalidManifestError, exit code 2); then
// each is read: one that exists is left as it is (one progress note), one
// that is absent is dry-run created (a refusal is a *DryRunError: exit 2
// when invalid) and is to be created under the lock.
func (e *Engine) planCRDs(ctx context.Context, name string, revision int, crds, objs []*unstructured.Unstructured) (*crdPlan, error) {
	if len(crds) == 0 {
		return nil, nil
	}
	defs, err := parseCRDs(crds, objs)
	if err != nil {
		return nil, &InvalidManifestError{Name: name, Err: err}
	}
	client, err := e.crdClient()
	if err != nil {
		return nil, err
	}
	plan := &crdPlan{pending: map[schema.GroupKind]crdDef{}}
	var existing []string
	for _, def := range defs {
		_, err := client.GetCRD(ctx, def.name)
		switch {
		case err == nil:
			existing = append(existing, def.name)
			continue
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("release %s: %w", name, err)
		}
		dry, err := client.CreateCRD(ctx, def.obj, true)
		switch {
		case apierrors.IsAlreadyExists(err):
			existing = append(existing, def.name)
			continue
		case err != nil:
			return nil, &DryRunError{Name: name, Err: err}
		}
		plan.create = append(plan.create, crdCreate{def: def, dry: dry})
		plan.pending[def.kind] = def
	}
	if len(existing) > 0 {
		e.emit(name, revision, PhaseCRDs, "", "exists",
			"left as it is (vllmctl never updates or deletes a CustomResourceDefinition): "+strings.Join(existing, ", "))
	}
	var waiting []string
	for _, o := range objs {
		if _, ok := plan.defines(o); ok {
			waiting = append(waiting, charts.RefIn(o, e.Namespace()).String())
		}
	}
	if len(waiting) > 0 {
		e.emit(name, revision, PhaseCRDs, "", "not dry-run", fmt.Sprintf(
			"%s: their kinds' CRDs are not in the cluster yet, so they count as to be created; the CRDs are created under the lock, before any other object",
			strings.Join(waiting, ", ")))
	}
	return plan, nil
}

// withCRDs returns the engine whose dry runs know plan: objects of the
// kinds its CRDs define are not dry-run but reported as to be created, and
// so is each CRD to create. Without anything to create it is e.
func (e *Engine) withCRDs(plan *crdPlan) *Engine {
	if plan.empty() {
		return e
	}
	c := *e
	c.Objects = &crdObjects{ObjectClient: e.Objects, plan: plan, namespace: e.Namespace()}
	return &c
}

// crdObjects is an ObjectClient whose dry runs know a crdPlan.
type crdObjects struct {
	ObjectClient
	plan      *crdPlan
	namespace string
}

// Apply dry-runs the objects the cluster can take (a real apply goes
// through), then reports each CRD to create and each object of their kinds
// as created, read as absent.
func (c *crdObjects) Apply(ctx context.Context, objs []*unstructured.Unstructured, opts cluster.ApplyOptions) ([]cluster.ApplyResult, error) {
	if !opts.DryRun {
		return c.ObjectClient.Apply(ctx, objs, opts)
	}
	var served, pending []*unstructured.Unstructured
	for _, o := range objs {
		if _, ok := c.plan.defines(o); ok {
			pending = append(pending, o)
		} else {
			served = append(served, o)
		}
	}
	results, err := c.ObjectClient.Apply(ctx, served, opts)
	if err != nil {
		return results, err
	}
	ns := opts.Namespace
	if ns == "" {
		ns = c.namespace
	}
	out := make([]cluster.ApplyResult, 0, len(results)+len(c.plan.create)+len(pending))
	for _, r := range results {
		if r.Object.IsNamespace() {
			out = append(out, r)
		}
	}
	for _, cr := range c.plan.create {
		out = append(out, cluster.ApplyResult{Object: cr.def.ref(), Action: cluster.ActionCreated, Live: cr.dry, BeforeRead: true})
	}
	for _, r := range results {
		if !r.Object.IsNamespace() {
			out = append(out, r)
		}
	}
	for _, o := range pending {
		def, _ := c.plan.defines(o)
		body := o.DeepCopy()
		switch {
		case !def.namespaced:
			body.SetNamespace("")
		case body.GetNamespace() == "":
			body.SetNamespace(ns)
		}
		out = append(out, cluster.ApplyResult{Object: object.RefOf(body), Action: cluster.ActionCreated, Live: body, BeforeRead: true})
	}
	return out, nil
}

// Get reports objects of the kinds the CRDs to create define as absent.
func (c *crdObjects) Get(ctx context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error) {
	if def, ok := c.plan.defines(obj); ok {
		plural, _, _ := unstructured.NestedString(def.obj.Object, "spec", "names", "plural")
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: def.kind.Group, Resource: plural}, obj.GetName())
	}
	return c.ObjectClient.Get(ctx, obj, namespace)
}

// planDeployCRDs plans what the deploy does with its CRDs (none with
// SkipCRDs).
func (e *Engine) planDeployCRDs(ctx context.Context, p *deployPlan) error {
	if p.opts.SkipCRDs {
		return nil
	}
	plan, err := e.planCRDs(ctx, p.opts.Name, p.plan.Revision, p.crdObjs, p.objs)
	if err != nil {
		return err
	}
	p.crds = plan
	return nil
}

// CRDError reports a CustomResourceDefinition of the chart's crds/ that
// the cluster refused to create, whose names it did not accept, or that
// did not become Established in time: nothing else was applied. Exit code
// 6 (130 when interrupted).
type CRDError struct {
	Release string
	// CRD is the CustomResourceDefinition's name.
	CRD string
	// Reason is ReasonCRDRefused, ReasonCRDNamesNotAccepted or
	// ReasonCRDNotEstablished.
	Reason string
	Err    error
}

func (e *CRDError) Error() string {
	return fmt.Sprintf("release %s: %s %s (crds/ of the chart): %v; nothing else was applied", e.Release, cluster.CRDKind, e.CRD, e.Err)
}

// Unwrap returns the underlying error.
func (e *CRDError) Unwrap() error { return e.Err }

// ExitCode is 6 (the cluster refused, or did not serve the CRD in time),
// or 130 when the deploy was interrupted.
func (e *CRDError) ExitCode() int {
	if errors.Is(e.Err, context.Canceled) {
		return exitcode.Interrupted
	}
	return exitcode.Cluster
}

// createCRDs creates the CRDs of plan under the lock of rec (a deploy's,
// or a rollback's: crds_rollback.go), before any other object of objs:
// one created meanwhile by someone else is left as it is. The record (and
// res) list the CRDs the revision created. It then waits, until deadline
// (the operation's Timeout), until every CRD is Established and discovery
// maps the kinds objs use.
func (e *Engine) createCRDs(ctx context.Context, plan *crdPlan, objs []*unstructured.Unstructured, rec *storage.Release, res *Result, deadline time.Time) error {
	if plan.empty() {
		return nil
	}
	client, err := e.crdClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, max(deadline.Sub(storage.Stamp(e.clock())), time.Millisecond))
	defer cancel()

	var created []string
	var wait []*unstructured.Unstructured
	record := func() error {
		if len(created) == 0 {
			return nil
		}
		rec.CRDs, res.CRDs = slices.Clone(created), slices.Clone(created)
		rec.Updated = storage.Stamp(e.clock())
		if err := e.Store.Update(ctx, rec); err != nil {
			return fmt.Errorf("release %s revision %d: record the CRDs it created: %w", rec.Name, rec.Revision, err)
		}
		return nil
	}
	// fail records the CRDs created before err.
	fail := func(err error) error {
		if rerr := record(); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	for _, cr := range plan.create {
		ref := cr.def.ref().String()
		live, err := client.CreateCRD(ctx, cr.def.obj, false)
		switch {
		case apierrors.IsAlreadyExists(err):
			e.emit(rec.Name, rec.Revision, PhaseCRDs, ref, "exists", "created meanwhile by another client: left as it is")
			if live, err = client.GetCRD(ctx, cr.def.name); err != nil {
				return fail(&CRDError{Release: rec.Name, CRD: cr.def.name, Reason: ReasonCRDNotEstablished, Err: err})
			}
		case err != nil:
			return fail(&CRDError{Release: rec.Name, CRD: cr.def.name, Reason: ReasonCRDRefused, Err: err})
		default:
			created = append(created, cr.def.name)
			e.emit(rec.Name, rec.Revision, PhaseCRDs, ref, string(cluster.ActionCreated), "")
		}
		wait = append(wait, live)
	}
	if err := record(); err != nil {
		return err
	}
	for _, crd := range wait {
		if err := waitEstablished(ctx, client, crd); err != nil {
			var ce *CRDError
			if errors.As(err, &ce) {
				ce.Release = rec.Name
			}
			return err
		}
		e.emit(rec.Name, rec.Revision, PhaseCRDs, object.RefOf(crd).String(), "Established", "")
	}
	return waitKinds(ctx, client, rec.Name, plan, objs)
}

// crdsFailed finishes a deploy whose CRD step failed, as an apply the
// cluster refused before anything was applied: the revision is marked
// failed (nothing to roll back: no other object was applied, and CRDs are
// never deleted).
func (e *Engine) crdsFailed(ctx context.Context, p *deployPlan, rec *storage.Release, res *Result, start time.Time, install bool, err error) (*Result, error) {
	if lost := lockLost(err); lost != nil {
		return res, lost
	}
	f := &rollout.Diagnosis{Reason: ReasonCRDRefused, Message: err.Error()}
	var ce *CRDError
	if errors.As(err, &ce) {
		f.Reason, f.Object = ce.Reason, objectName(cluster.CRDKind, ce.CRD)
	}
	return e.finishFailed(ctx, rec, res, start, p.opts.withNote(p.opts.verb(install)+" failed: "+f.Reason), f, err)
}

// keptCRDs returns the CRDs the release's revisions (entries) created,
// which an uninstall leaves in place, and says so in one progress line.
func (e *Engine) keptCRDs(rec *storage.Release, entries []storage.Entry) []string {
	var names []string
	for _, en := range entries {
		r, err := en.Release()
		if err != nil {
			continue // unreadable: it names no CRD we can tell
		}
		for _, c := range r.CRDs {
			if !slices.Contains(names, c) {
				names = append(names, c)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	e.emit(rec.Name, rec.Revision, PhaseDelete, "", "kept", fmt.Sprintf(
		"CustomResourceDefinitions are left in place, vllmctl never deletes one (deleting it deletes every object of its kinds in every namespace): %s",
		strings.Join(names, ", ")))
	return names
}
