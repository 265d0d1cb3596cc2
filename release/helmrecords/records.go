package helmrecords

import (
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/vllm"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// Holder names adopt in the records it writes.
const Holder = "vllmctl adopt"

// CheckSettled refuses records whose latest revision has a Helm operation
// in progress (pending-install, pending-upgrade, pending-rollback,
// uninstalling): a *PendingError.
func CheckSettled(recs []Record) error {
	for _, r := range recs {
		switch s := r.Release.Info.Status; s {
		case common.StatusPendingInstall, common.StatusPendingUpgrade, common.StatusPendingRollback, common.StatusUninstalling:
			return &PendingError{Namespace: r.Release.Namespace, Name: r.Release.Name, Revision: r.Release.Version, Status: string(s)}
		}
	}
	return nil
}

// ToRecord is the vllmctl record of one Helm revision, in release
// namespace ns: the same revision number, status, chart, user values
// (and the values the templates saw), notes, manifest and hooks (each
// object marked as the release's, as vllmctl's render marks its own), and
// timestamps; its description says which Helm revision it was. A status
// vllmctl has no name for (unknown) is failed.
func ToRecord(r Record, ns string) (*storage.Release, error) {
	rel := r.Release
	status := storage.Status(rel.Info.Status)
	switch rel.Info.Status {
	case common.StatusDeployed, common.StatusSuperseded, common.StatusFailed, common.StatusUninstalled:
	default:
		status = storage.StatusFailed
	}
	rec := &storage.Release{
		Name: rel.Name, Namespace: ns, Revision: rel.Version, Status: status,
		Description: storage.AdoptedDescription(rel.Version),
		AdoptedFrom: rel.Version,
		Holder:      Holder,
		Values:      rel.Config,
		Notes:       rel.Info.Notes,
		Created:     stamp(rel.Info.LastDeployed, rel.Info.FirstDeployed),
	}
	if d := rel.Info.Description; d != "" {
		rec.Description += ": " + d
	}
	rec.Updated = rec.Created
	if ch := rel.Chart; ch != nil && ch.Metadata != nil {
		rec.Chart = storage.Chart{Name: ch.Metadata.Name, Version: ch.Metadata.Version, AppVersion: ch.Metadata.AppVersion}
		// The values mapping the chart declares, for the failure hints
		// (best effort: a malformed one only costs the values paths).
		rec.Chart.ValuesMap, _ = vllm.ParseValuesMap(ch.Metadata.Annotations)
		if computed, err := util.CoalesceValues(ch, rel.Config); err == nil {
			rec.ComputedValues = computed
		}
	}
	var err error
	if rec.Manifest, err = markManifest(rel.Manifest, rel.Name, ns); err != nil {
		return nil, fmt.Errorf("Helm revision %d (%s %s): manifest: %w", rel.Version, r.Kind, r.Key, err)
	}
	for _, h := range rel.Hooks {
		hk, err := toHook(h, rel.Name, ns)
		if err != nil {
			return nil, fmt.Errorf("Helm revision %d (%s %s): hook %s: %w", rel.Version, r.Kind, r.Key, h.Name, err)
		}
		rec.Hooks = append(rec.Hooks, hk)
	}
	return rec, nil
}

// stamp is the first non-zero time, in UTC to the second as vllmctl stamps
// records.
func stamp(ts ...time.Time) time.Time {
	for _, t := range ts {
		if !t.IsZero() {
			return t.UTC().Truncate(time.Second)
		}
	}
	return time.Time{}
}

// markManifest marks every object of a Helm manifest as release name's in
// ns.
func markManifest(manifest, name, ns string) (string, error) {
	objs, err := cluster.ParseManifest(manifest)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		owner.Mark(o, name, ns)
	}
	return charts.Manifest(objs)
}

func toHook(h *rspb.Hook, name, ns string) (storage.Hook, error) {
	objs, err := cluster.ParseManifest(h.Manifest)
	if err != nil {
		return storage.Hook{}, err
	}
	if len(objs) != 1 {
		return storage.Hook{}, fmt.Errorf("holds %d objects, not one", len(objs))
	}
	owner.Mark(objs[0], name, ns)
	manifest, err := charts.Manifest(objs)
	if err != nil {
		return storage.Hook{}, err
	}
	hk := storage.Hook{Name: h.Name, Kind: h.Kind, Path: h.Path, Manifest: manifest, Weight: h.Weight}
	for _, e := range h.Events {
		hk.Events = append(hk.Events, charts.HookEvent(e))
	}
	for _, p := range h.DeletePolicies {
		hk.DeletePolicies = append(hk.DeletePolicies, charts.HookDeletePolicy(p))
	}
	return hk, nil
}
