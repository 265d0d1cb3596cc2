package release

import (
	"context"
	"fmt"

	rspb "helm.sh/helm/v4/pkg/release/v1"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/helmrecords"
	"github.com/vllmctl/vllmctl/release/storage"
)

// Handoverer gives a release back to Helm, history included (`vllmctl
// handover RELEASE --to helm`).
type Handoverer struct {
	*Engine
	Managers ManagerMover
}

// NewHandoverer returns a Handoverer over e.
func NewHandoverer(e *Engine, m ManagerMover) *Handoverer { return &Handoverer{Engine: e, Managers: m} }

// HandoverOptions are the inputs of Handover.
type HandoverOptions struct {
	Name string
	// Driver is the Helm storage driver the records are written for.
	Driver helmrecords.Driver
	// HelmManager is the field manager Helm applies with (default helm).
	HelmManager string
	DryRun      bool
	// RemoveRecords deletes vllmctl's records instead of marking the
	// deployed one handed-over.
	RemoveRecords  bool
	ForceConflicts bool
}

// HandoverResult is what Handover did (or, with DryRun, would do).
type HandoverResult struct {
	Release   string                `json:"release"`
	Namespace string                `json:"namespace"`
	DryRun    bool                  `json:"dryRun"`
	Current   int                   `json:"current"`
	Revisions []AdoptedRevision     `json:"revisions"`
	Objects   []cluster.ManagerMove `json:"objects"`
	// HelmRecords are the Helm records written.
	HelmRecords []string `json:"helmRecords"`
	// RecordsAction is what became of vllmctl's records: "marked"
	// (the deployed one handed-over) or "removed".
	RecordsAction string `json:"recordsAction"`
}

// Handover writes one Helm record per vllmctl revision (the records adopt
// read are given back as they were, with their new status), moves the
// fields vllmctl owns in the deployed revision's objects to Helm's field
// manager and gives them Helm's ownership keys (a server-side apply of the
// revision's manifest by Helm's manager: no pod template changes), then
// marks vllmctl's deployed record handed-over (or removes the records):
// helm history, upgrade and rollback then work on the release, and vllmctl
// refuses to act on it until it is adopted again.
//
// A release without a deployed revision, or handed over already, is exit
// 2; one with an operation in progress exit 5; Helm records of the name
// that adopt did not write (owner=helm) exit 2.
func (h *Handoverer) Handover(ctx context.Context, opts HandoverOptions) (*HandoverResult, error) {
	if err := h.check(needStore, needObjects, needClient); err != nil {
		return nil, err
	}
	if err := storage.ValidateName(opts.Name); err != nil {
		return nil, err
	}
	if opts.HelmManager == "" {
		opts.HelmManager = "helm"
	}
	ns := h.Namespace()
	revs, err := storage.History(ctx, h.Store, opts.Name)
	if err != nil {
		return nil, err
	}
	current := 0
	for _, r := range revs {
		switch {
		case r.Status.IsPending():
			return nil, &storage.LockedError{Namespace: ns, Name: opts.Name, Revision: r.Revision, Status: r.Status, Holder: r.Holder, Description: r.Description}
		case r.Status == storage.StatusHandedOver:
			return nil, &storage.HandedOverError{Namespace: ns, Name: opts.Name, Revision: r.Revision}
		case r.Status == storage.StatusDeployed:
			current = r.Revision
		}
	}
	if current == 0 {
		return nil, &HandoverError{Namespace: ns, Name: opts.Name, Reason: "has no deployed revision to give to Helm"}
	}
	// Helm records a handover wrote before it was interrupted are written
	// again; any other one is Helm's own.
	if recs, err := helmrecords.Read(ctx, h.Client, opts.Driver, ns, opts.Name); err == nil {
		for _, r := range recs {
			if !r.HandedOver {
				return nil, &HandoverError{Namespace: ns, Name: opts.Name, Reason: fmt.Sprintf("already has Helm records (%s, owner=helm) that adopt did not write", r.Key)}
			}
		}
	}
	originals := map[int]*rspb.Release{}
	if recs, err := helmrecords.ReadAdopted(ctx, h.Client, opts.Driver, ns, opts.Name); err == nil {
		for _, r := range recs {
			originals[r.Release.Version] = r.Release
		}
	}

	res := &HandoverResult{Release: opts.Name, Namespace: ns, DryRun: opts.DryRun, Current: current, RecordsAction: "marked"}
	if opts.RemoveRecords {
		res.RecordsAction = "removed"
	}
	var helmRels []*rspb.Release
	var deployed *storage.Release
	for _, r := range revs {
		if r.Revision == current {
			deployed = r
		}
		var original *rspb.Release
		if r.HelmRevision() == r.Revision {
			original = originals[r.Revision]
		}
		rel, err := helmrecords.FromRecord(r, revs[0].Created, original)
		if err != nil {
			return nil, fmt.Errorf("release %s: %w", opts.Name, err)
		}
		if r.Revision == current {
			rel.Info.Status = "deployed"
		}
		helmRels = append(helmRels, rel)
		res.HelmRecords = append(res.HelmRecords, helmrecords.Key(opts.Name, r.Revision))
		res.Revisions = append(res.Revisions, AdoptedRevision{Revision: r.Revision, Status: storage.Status(rel.Info.Status),
			Chart: r.Chart.String(), AppVersion: r.Chart.AppVersion, Description: rel.Info.Description})
	}

	objs, err := cluster.ParseManifest(deployed.Manifest)
	if err != nil {
		return nil, &InvalidManifestError{Name: opts.Name, Err: fmt.Errorf("revision %d: %w", current, err)}
	}
	from := []string{cluster.FieldManager, cluster.FieldManager + cluster.HandoverManagerSuffix}
	if res.Objects, err = moveManagers(ctx, h.Managers, objs, ns, from, opts.HelmManager, opts.DryRun); err != nil {
		return res, fmt.Errorf("release %s: %w", opts.Name, err)
	}
	if opts.DryRun {
		return res, nil
	}
	helmObjs := present(objs, res.Objects)
	for i, o := range helmObjs {
		helmObjs[i] = o.DeepCopy()
		owner.MarkHelm(helmObjs[i], opts.Name, ns)
	}
	applied, err := h.Objects.Apply(ctx, helmObjs, cluster.ApplyOptions{Namespace: ns, Release: opts.Name, FieldManager: opts.HelmManager,
		Force: opts.ForceConflicts, NoCreateNamespaceFlag: true})
	for _, ap := range applied {
		h.emit(opts.Name, current, PhaseApply, ap.Object.String(), string(ap.Action), "handed over to Helm")
	}
	if err != nil {
		return res, fmt.Errorf("release %s: apply revision %d as Helm's: %w", opts.Name, current, err)
	}
	for _, rel := range helmRels {
		if err := helmrecords.Write(ctx, h.Client, opts.Driver, ns, rel); err != nil {
			return res, fmt.Errorf("release %s: %w", opts.Name, err)
		}
		h.emit(opts.Name, rel.Version, PhaseHistory, "", string(rel.Info.Status), "Helm record "+helmrecords.Key(opts.Name, rel.Version))
	}
	if opts.RemoveRecords {
		for _, r := range revs {
			if err := h.Store.Delete(ctx, opts.Name, r.Revision); err != nil {
				return res, fmt.Errorf("release %s: delete vllmctl revision %d: %w", opts.Name, r.Revision, err)
			}
		}
	} else {
		deployed.Status = storage.StatusHandedOver
		deployed.Description = "Handed over to Helm (was: " + deployed.Description + ")"
		deployed.Updated = storage.Stamp(h.clock())
		if err := h.Store.Update(ctx, deployed); err != nil {
			return res, fmt.Errorf("release %s: mark revision %d handed-over: %w", opts.Name, current, err)
		}
	}
	h.emit(opts.Name, current, PhaseDone, "", string(storage.StatusHandedOver), fmt.Sprintf("%d revisions handed over to Helm", len(helmRels)))
	return res, nil
}

// HandoverError: the release cannot be handed over as it is (exit 2).
type HandoverError struct {
	Namespace, Name, Reason string
}

func (e *HandoverError) Error() string {
	return fmt.Sprintf("release %s in namespace %s %s: nothing handed over", e.Name, e.Namespace, e.Reason)
}

// ExitCode is 2: invalid input.
func (e *HandoverError) ExitCode() int { return exitcode.Invalid }
