package release

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	deploymentutil "k8s.io/kubectl/pkg/util/deployment"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/helmrecords"
	"github.com/vllmctl/vllmctl/release/storage"
)

// ManagerMover moves field managers' fields to vllmctl's; see
// [cluster.Applier.MoveManagers].
type ManagerMover interface {
	MoveManagers(ctx context.Context, obj *unstructured.Unstructured, namespace string, from []string, to string, dryRun bool) (cluster.ManagerMove, error)
}

var _ ManagerMover = (*cluster.Applier)(nil)

// Adopter moves a Helm release to vllmctl with its history (`vllmctl
// adopt`).
type Adopter struct {
	*Engine
	// Managers moves the Helm field manager's fields to vllmctl.
	Managers ManagerMover
}

// NewAdopter returns an Adopter over e.
func NewAdopter(e *Engine, m ManagerMover) *Adopter { return &Adopter{Engine: e, Managers: m} }

// AdoptOptions are the inputs of Adopt.
type AdoptOptions struct {
	Name string
	// Driver is Helm's storage driver (default: Secrets).
	Driver helmrecords.Driver
	// HelmManagers are the field managers whose fields move to vllmctl
	// (default: helm).
	HelmManagers []string
	// DryRun plans and changes nothing.
	DryRun bool
	// Force replaces the release's vllmctl records, if it has any.
	Force bool
	// RemoveHelmRecords deletes Helm's records instead of labelling them.
	RemoveHelmRecords bool
	// ForceConflicts takes over fields other field managers own when the
	// deployed revision is applied.
	ForceConflicts bool
}

// AdoptedRevision is one revision adopt writes.
type AdoptedRevision struct {
	Revision    int                     `json:"revision"`
	Status      storage.Status          `json:"status"`
	Chart       string                  `json:"chart"`
	AppVersion  string                  `json:"appVersion,omitempty"`
	Description string                  `json:"description"`
	ReplicaSets []storage.ReplicaSetRef `json:"replicaSets,omitempty"`
}

// AdoptResult is what Adopt did (or, with DryRun, would do).
type AdoptResult struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	DryRun    bool   `json:"dryRun"`
	// Current is the deployed revision (0: none).
	Current   int               `json:"current"`
	Revisions []AdoptedRevision `json:"revisions"`
	// Objects are the deployed revision's objects and the field managers
	// moved from each.
	Objects []cluster.ManagerMove `json:"objects"`
	// HelmRecords are Helm's records, and HelmRecordsAction what became of
	// them: "labelled" (owner=vllmctl-adopted) or "removed".
	HelmRecords       []string `json:"helmRecords"`
	HelmRecordsAction string   `json:"helmRecordsAction"`
	// Replaced are the vllmctl revisions --force replaced.
	Replaced []int `json:"replaced,omitempty"`
	// HistoryNote, set when more revisions were adopted than
	// DefaultHistoryMax, says that the next deploy or rollback with the
	// default --history-max deletes the older adopted records.
	HistoryNote string `json:"historyNote,omitempty"`
}

// DefaultHistoryMax is --history-max's default: the records an operation
// keeps (0: all).
const DefaultHistoryMax = 10

// historyNote is AdoptResult.HistoryNote for n adopted revisions.
func historyNote(n int) string {
	if n <= DefaultHistoryMax {
		return ""
	}
	return fmt.Sprintf("%d revisions adopted: the next deploy or rollback with the default --history-max %d keeps the newest %d records "+
		"and deletes the %d older ones (give --history-max 0 to keep them all)", n, DefaultHistoryMax, DefaultHistoryMax, n-DefaultHistoryMax)
}

// Adopt reads the Helm release's records and writes one vllmctl record per
// Helm revision (same numbers, statuses, chart, values, manifests, hooks,
// times), the deployed one current. The deployed revision's objects get
// vllmctl's field manager in place of Helm's and vllmctl's ownership keys
// (a server-side apply of Helm's own manifest: no pod template changes, no
// pod restarts); Deployment ReplicaSets still there are tied to the
// revisions whose pod template they carry. Helm's records are then
// labelled as adopted (helm no longer finds them) or removed.
//
// A Helm release with an operation in progress is a
// *helmrecords.PendingError (exit 5), an unreadable record a
// *helmrecords.UnreadableError (exit 6), a release that already has
// vllmctl records an *AdoptExistsError (exit 2) unless Force.
func (a *Adopter) Adopt(ctx context.Context, opts AdoptOptions) (*AdoptResult, error) {
	if err := a.check(needStore, needObjects, needClient); err != nil {
		return nil, err
	}
	if err := storage.ValidateName(opts.Name); err != nil {
		return nil, err
	}
	if len(opts.HelmManagers) == 0 {
		opts.HelmManagers = []string{"helm"}
	}
	ns := a.Namespace()
	recs, err := helmrecords.Read(ctx, a.Client, opts.Driver, ns, opts.Name)
	if err != nil {
		return nil, err
	}
	if err := helmrecords.CheckSettled(recs); err != nil {
		return nil, err
	}
	existing, err := a.Store.List(ctx, opts.Name)
	if err != nil {
		return nil, fmt.Errorf("release %s: list vllmctl records: %w", opts.Name, err)
	}
	res := &AdoptResult{Release: opts.Name, Namespace: ns, DryRun: opts.DryRun, HelmRecordsAction: "labelled"}
	if opts.RemoveHelmRecords {
		res.HelmRecordsAction = "removed"
	}
	for _, e := range existing {
		res.Replaced = append(res.Replaced, e.Revision)
	}
	// A release handed over to Helm is taken back without --force: its
	// vllmctl records are the history Helm now holds.
	if len(existing) > 0 && !opts.Force && !handedOver(existing) && !adoptWrote(existing) {
		return nil, &AdoptExistsError{Namespace: ns, Name: opts.Name, Revisions: res.Replaced}
	}
	records, current, err := adoptedRecords(recs, ns)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		res.HelmRecords = append(res.HelmRecords, r.Key)
	}
	res.Current = current

	var deployed []*unstructured.Unstructured
	if current > 0 {
		for _, r := range records {
			if r.Revision == current {
				if deployed, err = cluster.ParseManifest(r.Manifest); err != nil {
					return nil, &InvalidManifestError{Name: opts.Name, Err: fmt.Errorf("Helm revision %d: %w", current, err)}
				}
			}
		}
	}
	if res.Objects, err = moveManagers(ctx, a.Managers, deployed, ns, opts.HelmManagers, cluster.FieldManager, opts.DryRun); err != nil {
		return res, fmt.Errorf("release %s: %w", opts.Name, err)
	}
	if !opts.DryRun && len(deployed) > 0 {
		applied, err := a.Objects.Apply(ctx, present(deployed, res.Objects), cluster.ApplyOptions{Namespace: ns, Release: opts.Name,
			Force: opts.ForceConflicts, NoCreateNamespaceFlag: true})
		for _, ap := range applied {
			a.emit(opts.Name, current, PhaseApply, ap.Object.String(), string(ap.Action), "adopted")
		}
		if err != nil {
			return res, fmt.Errorf("release %s: apply Helm revision %d as vllmctl's: %w", opts.Name, current, err)
		}
	}
	rsLists := map[string][]appsv1.ReplicaSet{}
	for _, r := range records {
		if r.ReplicaSets, err = a.replicaSetsOf(ctx, r, rsLists); err != nil {
			return res, err
		}
		res.Revisions = append(res.Revisions, AdoptedRevision{Revision: r.Revision, Status: r.Status, Chart: r.Chart.String(),
			AppVersion: r.Chart.AppVersion, Description: r.Description, ReplicaSets: r.ReplicaSets})
	}
	res.HistoryNote = historyNote(len(res.Revisions))
	if opts.DryRun {
		return res, nil
	}
	for _, rev := range res.Replaced {
		var nf *storage.NotFoundError
		if err := a.Store.Delete(ctx, opts.Name, rev); err != nil && !errors.As(err, &nf) {
			return res, fmt.Errorf("release %s: replace vllmctl revision %d: %w", opts.Name, rev, err)
		}
	}
	for _, r := range records {
		if err := a.Store.Create(ctx, r); err != nil {
			return res, fmt.Errorf("release %s: write revision %d: %w", opts.Name, r.Revision, err)
		}
		a.emit(opts.Name, r.Revision, PhaseHistory, "", string(r.Status), r.Description)
	}
	if opts.RemoveHelmRecords {
		err = helmrecords.Remove(ctx, a.Client, ns, recs)
	} else {
		err = helmrecords.MarkAdopted(ctx, a.Client, ns, recs)
	}
	if err != nil {
		return res, fmt.Errorf("release %s: %w", opts.Name, err)
	}
	a.emit(opts.Name, current, PhaseDone, "", string(storage.StatusDeployed), fmt.Sprintf("adopted %d Helm revisions", len(records)))
	return res, nil
}

// handedOver reports whether one of entries is handed-over.
func handedOver(entries []storage.Entry) bool {
	for _, e := range entries {
		if e.Status == storage.StatusHandedOver {
			return true
		}
	}
	return false
}

// adoptWrote reports whether adopt wrote every one of entries: an adopt
// interrupted before it relabelled Helm's records (which still say
// owner=helm) is run again without --force. An entry that does not decode
// is not adopt's.
func adoptWrote(entries []storage.Entry) bool {
	for _, e := range entries {
		r, err := e.Release()
		if err != nil || r.Holder != helmrecords.Holder || e.Status.IsPending() {
			return false
		}
	}
	return true
}

// adoptedRecords converts the Helm records and returns the current
// (deployed) revision: the highest deployed one; an older revision Helm
// left deployed too is superseded.
func adoptedRecords(recs []helmrecords.Record, ns string) ([]*storage.Release, int, error) {
	out := make([]*storage.Release, 0, len(recs))
	current := 0
	for _, r := range recs {
		rec, err := helmrecords.ToRecord(r, ns)
		if err != nil {
			return nil, 0, err
		}
		if rec.Status == storage.StatusDeployed {
			current = rec.Revision
		}
		out = append(out, rec)
	}
	for _, r := range out {
		if r.Status == storage.StatusDeployed && r.Revision != current {
			r.Status = storage.StatusSuperseded
		}
	}
	return out, current, nil
}

// moveManagers moves the fields of the managers `from` to `to` in each of
// objs (see cluster.Applier.MoveManagers), in order.
func moveManagers(ctx context.Context, m ManagerMover, objs []*unstructured.Unstructured, ns string, from []string, to string, dryRun bool) ([]cluster.ManagerMove, error) {
	moves := make([]cluster.ManagerMove, 0, len(objs))
	for _, o := range objs {
		move, err := m.MoveManagers(ctx, o, ns, from, to, dryRun)
		if err != nil {
			return moves, err
		}
		moves = append(moves, move)
	}
	return moves, nil
}

// present are the objects of objs that exist (the moves say which do not).
func present(objs []*unstructured.Unstructured, moves []cluster.ManagerMove) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for i, o := range objs {
		if i < len(moves) && moves[i].Missing {
			continue
		}
		out = append(out, o)
	}
	return out
}

// replicaSetsOf finds, for each Deployment of rec's manifest, the
// ReplicaSet that carries the pod template rec ran, if the Deployment
// controller still keeps it: a server-side dry-run apply of rec's
// Deployment gives its template as the API server defaults it, and the
// ReplicaSet whose template equals it (pod-template-hash aside) is the
// one, by the controller's own rule. The ReplicaSets of each Deployment
// are listed once for every revision (rsLists, by namespace and selector).
func (a *Adopter) replicaSetsOf(ctx context.Context, rec *storage.Release, rsLists map[string][]appsv1.ReplicaSet) ([]storage.ReplicaSetRef, error) {
	objs, err := cluster.ParseManifest(rec.Manifest)
	if err != nil {
		return nil, &InvalidManifestError{Name: rec.Name, Err: fmt.Errorf("revision %d: %w", rec.Revision, err)}
	}
	var deps []*unstructured.Unstructured
	for _, o := range objs {
		if object.RefOf(o).IsDeployment() {
			deps = append(deps, o)
		}
	}
	if len(deps) == 0 {
		return nil, nil
	}
	dry, err := a.Objects.Apply(ctx, deps, cluster.ApplyOptions{Namespace: a.Namespace(), Release: rec.Name, DryRun: true, Force: true, NoCreateNamespaceFlag: true})
	if err != nil {
		return nil, fmt.Errorf("release %s revision %d: dry-run apply of its Deployments: %w", rec.Name, rec.Revision, err)
	}
	var refs []storage.ReplicaSetRef
	for _, d := range dry {
		if d.Live == nil {
			continue
		}
		dep := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Live.Object, dep); err != nil || dep.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
		if err != nil {
			continue
		}
		key := dep.Namespace + "/" + sel.String()
		items, ok := rsLists[key]
		if !ok {
			list, err := a.Client.AppsV1().ReplicaSets(dep.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
			if err != nil {
				return nil, fmt.Errorf("list ReplicaSets of Deployment %s/%s: %w", dep.Namespace, dep.Name, err)
			}
			items = list.Items
			rsLists[key] = items
		}
		rs := cluster.NewReplicaSet(dep, items)
		if rs == nil {
			continue
		}
		rev, _ := deploymentutil.Revision(rs)
		refs = append(refs, storage.ReplicaSetRef{Deployment: dep.Name, Name: rs.Name,
			PodTemplateHash: rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey], Revision: rev})
	}
	return refs, nil
}

// AdoptExistsError: the release already has vllmctl records (exit code 2;
// --force replaces them).
type AdoptExistsError struct {
	Namespace, Name string
	Revisions       []int
}

func (e *AdoptExistsError) Error() string {
	return fmt.Sprintf("release %s in namespace %s already has vllmctl records (revisions %v): nothing adopted (--force replaces them with Helm's history)",
		e.Name, e.Namespace, e.Revisions)
}

// ExitCode is 2: invalid input.
func (e *AdoptExistsError) ExitCode() int { return exitcode.Invalid }
