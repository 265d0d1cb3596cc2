package release

import (
	"context"

	"github.com/vllmctl/vllmctl/release/helmrecords"
	"github.com/vllmctl/vllmctl/release/storage"
)

// helmStillOwns returns, for a revision adopted from Helm, the keys of
// Helm's records of the release that are still Helm's own (neither
// relabelled as adopted nor written back by handover): adopt writes
// vllmctl's records first and relabels Helm's last, so an adopt killed in
// between leaves both tools owning the release. It asks only when the
// revision is an adopted one (at most two LISTs, Secrets and ConfigMaps,
// Helm's two drivers); what cannot be read is not reported.
func (e *Engine) helmStillOwns(ctx context.Context, rec *storage.Release) []string {
	if rec.HelmRevision() == 0 || rec.Status == storage.StatusHandedOver || e.Client == nil {
		return nil
	}
	var keys []string
	for _, d := range []helmrecords.Driver{helmrecords.DriverSecret, helmrecords.DriverConfigMap} {
		recs, err := helmrecords.Read(ctx, e.Client, d, rec.Namespace, rec.Name)
		if err != nil {
			continue
		}
		for _, r := range recs {
			if !r.HandedOver {
				keys = append(keys, r.Kind+" "+r.Key)
			}
		}
	}
	return keys
}
