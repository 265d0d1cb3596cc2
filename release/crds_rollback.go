package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// CustomResourceDefinitions on a rollback (see crds.go for the deploy):
//
//   - a deploy records the CRDs of the chart's crds/ it was deployed with
//     (Release.CRDManifest: their definitions, not only the names of the
//     ones it created, Release.CRDs), and a rollback's record carries its
//     target's on;
//   - a rollback to revision N (`vllmctl rollback`, deploy's automatic
//     rollback, `wait --rollback-on-failure`) creates, as the deploy of N
//     did, the CRDs of N's record that are absent from the cluster:
//     dry-run before the lock, then created under it before any other
//     object, create-only, waited Established and served;
//   - any other kind N's objects need that the cluster does not serve (a
//     CRD deleted that N's record holds no definition of: a record written
//     before they were kept, --skip-crds, a CRD of another chart) is
//     refused before the lock, naming the kinds, their objects and the CRD
//     when the record names it: nothing applied, no record changed
//     (*MissingKindsError, exit code 6), where the apply would have failed
//     under the lock with the API server's bare NotFound.

// crdRecord returns the CRDs of the deploy's crds/ to keep in its record
// (Release.CRDManifest): none with --skip-crds, and none, said in one
// progress line, when they would make the record too large to store.
func (e *Engine) crdRecord(p *deployPlan) string {
	manifest, err := p.crdManifest()
	if err != nil {
		e.emit(p.opts.Name, p.plan.Revision, PhaseCRDs, "", "not recorded", fmt.Sprintf(
			"the record keeps no definition of the chart's CRDs (%v): a rollback to this revision cannot create one deleted since", err))
		return ""
	}
	return manifest
}

// crdManifest returns the CRDs of the deploy's crds/ its record keeps
// (see crdRecord), with the error that keeps them out of it.
func (p *deployPlan) crdManifest() (string, error) {
	if p.opts.SkipCRDs || len(p.crdObjs) == 0 {
		return "", nil
	}
	manifest, err := charts.Manifest(p.crdObjs)
	if err == nil && len(p.manifest)+len(manifest) > storage.MaxRecordBytes {
		// Large enough that it may not fit once compressed: try.
		_, err = storage.Encode(&storage.Release{Name: p.opts.Name, Revision: max(p.plan.Revision, 1), Status: storage.StatusPendingUpgrade,
			Chart: p.chart, Values: p.values, ComputedValues: p.computed, Notes: p.notes, Manifest: p.manifest, CRDManifest: manifest})
	}
	if err != nil {
		return "", err
	}
	return manifest, nil
}

// planRollbackCRDs decides, before the lock, what the rollback to target
// (whose objects are objs) does about CRDs: the plan of the CRDs of
// target's record to create (nil: none; see planCRDs for its errors), and
// a *MissingKindsError when objs need a kind the cluster does not serve
// that none of them defines.
func (e *Engine) planRollbackCRDs(ctx context.Context, target *storage.Release, objs []*unstructured.Unstructured) (*crdPlan, error) {
	var crds []*unstructured.Unstructured
	if strings.TrimSpace(target.CRDManifest) != "" {
		parsed, err := cluster.ParseManifest(target.CRDManifest)
		if err != nil {
			return nil, &InvalidManifestError{Name: target.Name, Err: fmt.Errorf("revision %d: its CRDs: %w", target.Revision, err)}
		}
		crds = parsed
	}
	plan, err := e.planCRDs(ctx, target.Name, 0, crds, objs)
	if err != nil {
		return nil, err
	}
	if err := e.checkKinds(ctx, target, plan, objs); err != nil {
		return nil, err
	}
	return plan, nil
}

// checkKinds refuses the rollback to target when objs need a kind the
// cluster does not serve and plan does not create. Kinds of Kubernetes'
// own API groups are served; the others are asked of discovery afresh
// (a cached discovery, kubectl's on disk, still maps the kinds of a CRD
// deleted since, and the apply would then fail under the lock).
func (e *Engine) checkKinds(ctx context.Context, target *storage.Release, plan *crdPlan, objs []*unstructured.Unstructured) error {
	var gvks []schema.GroupVersionKind
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if _, ok := plan.defines(o); !ok && !cluster.KubeGroup(gvk.Group) && !slices.Contains(gvks, gvk) {
			gvks = append(gvks, gvk)
		}
	}
	if len(gvks) == 0 && plan.empty() {
		return nil
	}
	client, ok := e.Objects.(CRDClient)
	if !ok {
		return nil // it cannot tell: the apply reports an unknown kind
	}
	if d, ok := client.(discoveryResetter); ok {
		// Fresh discovery, also for waiting until the CRDs to create
		// are served.
		d.ResetDiscovery(ctx)
	}
	if len(gvks) == 0 {
		return nil
	}
	missing, err := client.MissingKinds(ctx, gvks)
	if err != nil {
		return fmt.Errorf("release %s: discover the kinds of revision %d's objects: %w", target.Name, target.Revision, err)
	}
	if len(missing) == 0 {
		return nil
	}
	kerr := &MissingKindsError{Release: target.Name, Revision: target.Revision, Recorded: strings.TrimSpace(target.CRDManifest) != ""}
	for _, gvk := range missing {
		k := MissingKind{Kind: gvk, CRD: recordedCRD(target.CRDs, gvk.GroupKind())}
		for _, o := range objs {
			if o.GroupVersionKind() == gvk {
				k.Objects = append(k.Objects, charts.RefIn(o, e.Namespace()))
			}
		}
		kerr.Kinds = append(kerr.Kinds, k)
	}
	return kerr
}

// restoreCRDsFailed finishes a rollback whose CRD step failed under the
// lock, before any other object was applied: the revision rec is marked
// failed and err (a *CRDError: exit code 6) returned, as for an apply the
// cluster refused.
func (e *Engine) restoreCRDsFailed(ctx context.Context, rec *storage.Release, res *Result, start time.Time, desc string, err error) (*Result, error) {
	if lost := lockLost(err); lost != nil {
		return res, lost
	}
	f := &rollout.Diagnosis{Reason: ReasonCRDRefused, Message: err.Error()}
	var ce *CRDError
	if errors.As(err, &ce) {
		f.Reason, f.Object = ce.Reason, objectName(cluster.CRDKind, ce.CRD)
	}
	d := desc + " failed: " + f.Reason
	if f.Object != "" {
		d += " (" + f.Object + ")"
	}
	if merr := e.markFailed(ctx, rec, d, f); merr != nil {
		err = errors.Join(err, merr)
	}
	res.sync(rec, start, e.clock())
	return res, err
}

// discoveryResetter is an object client whose kinds come from a discovery
// cache it can forget ([*Applier]).
type discoveryResetter interface {
	ResetDiscovery(ctx context.Context)
}

// recordedCRD returns the CRD of names (a record's Release.CRDs) that
// defines kind gk, as far as its name tells (<plural>.<group>): "" when
// none or several could.
func recordedCRD(names []string, gk schema.GroupKind) string {
	var in []string
	for _, n := range names {
		if _, group, ok := strings.Cut(n, "."); ok && group == gk.Group {
			in = append(in, n)
		}
	}
	for _, n := range in {
		if strings.HasPrefix(n, strings.ToLower(gk.Kind)) {
			return n
		}
	}
	if len(in) == 1 {
		return in[0]
	}
	return ""
}

// MissingKind is a kind a rollback's revision needs that the cluster does
// not serve.
type MissingKind struct {
	Kind schema.GroupVersionKind
	// CRD is the CustomResourceDefinition the revision's record names
	// for it ("": none).
	CRD string
	// Objects are the revision's objects of the kind.
	Objects []object.Ref
}

// MissingKindsError reports a rollback refused before the lock: the
// revision's objects need kinds the cluster does not serve (their CRD was
// deleted) and its record holds no definition to create them from.
// Nothing was applied, no record changed. Exit code 6 (the cluster cannot
// take the objects, as for a deploy's unknown kind).
type MissingKindsError struct {
	Release  string
	Revision int
	Kinds    []MissingKind
	// Recorded tells whether the record holds the definitions of the CRDs
	// of the chart's crds/ (those of the missing kinds are not among them).
	Recorded bool
}

func (e *MissingKindsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "release %s: cannot roll back to revision %d: ", e.Release, e.Revision)
	for i, k := range e.Kinds {
		if i > 0 {
			b.WriteString("; ")
		}
		objs := make([]string, len(k.Objects))
		for j, o := range k.Objects {
			objs[j] = o.String()
		}
		fmt.Fprintf(&b, "the cluster does not serve kind %s in %s, which its objects need (%s): ",
			k.Kind.Kind, k.Kind.GroupVersion(), strings.Join(objs, ", "))
		if k.CRD != "" {
			fmt.Fprintf(&b, "%s %s, which revision %d created, no longer exists", cluster.CRDKind, k.CRD, e.Revision)
		} else {
			fmt.Fprintf(&b, "its %s is not in the cluster", cluster.CRDKind)
		}
	}
	fmt.Fprintf(&b, "; revision %d's record holds no definition to create it from", e.Revision)
	if !e.Recorded {
		b.WriteString(" (written before vllmctl kept those of the chart's crds/)")
	}
	fmt.Fprintf(&b, ": create it (deploying the chart again does: vllmctl deploy %s CHART), then roll back; nothing was applied, no record changed", e.Release)
	return b.String()
}

// ExitCode is 6: the cluster cannot take the revision's objects.
func (e *MissingKindsError) ExitCode() int { return exitcode.Cluster }
