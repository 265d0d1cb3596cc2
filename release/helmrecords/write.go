package helmrecords

import (
	"context"
	"fmt"
	"strconv"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// Key is the name of the Helm record of release name's revision.
func Key(name string, revision int) string {
	return "sh.helm.release.v1." + name + ".v" + strconv.Itoa(revision)
}

// FromRecord is the Helm release of a vllmctl record, as `vllmctl
// handover` gives it back: the same revision, status (handed-over, the
// revision deployed when it was handed over, is deployed), values,
// manifest and hooks (each object marked as the Helm release's, vllmctl's
// keys removed), notes and times. The chart is its metadata with the
// values the templates saw (vllmctl keeps no chart files; Helm's upgrade
// and rollback need no more). When original, the Helm record adopt read
// for the revision, is given, it is kept, with the new status.
func FromRecord(rec *storage.Release, first time.Time, original *rspb.Release) (*rspb.Release, error) {
	status := common.Status(rec.Status)
	if rec.Status == storage.StatusHandedOver {
		status = common.StatusDeployed
	}
	if original != nil {
		out := *original
		info := *original.Info
		info.Status = status
		out.Info = &info
		return &out, nil
	}
	manifest, err := helmManifest(rec.Manifest, rec.Name, rec.Namespace)
	if err != nil {
		return nil, fmt.Errorf("revision %d: manifest: %w", rec.Revision, err)
	}
	values := rec.ComputedValues
	if values == nil {
		values = rec.Values
	}
	rel := &rspb.Release{
		Name: rec.Name, Namespace: rec.Namespace, Version: rec.Revision, Manifest: manifest, Config: rec.Values,
		Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: rec.Chart.Name,
			Version: rec.Chart.Version, AppVersion: rec.Chart.AppVersion}, Values: values},
		Info: &rspb.Info{Status: status, Description: rec.Description, Notes: rec.Notes,
			FirstDeployed: first, LastDeployed: rec.Updated},
		ApplyMethod: string(rspb.ApplyMethodServerSideApply),
	}
	for _, h := range rec.Hooks {
		m, err := helmManifest(h.Manifest, rec.Name, rec.Namespace)
		if err != nil {
			return nil, fmt.Errorf("revision %d: hook %s: %w", rec.Revision, h.Name, err)
		}
		hk := &rspb.Hook{Name: h.Name, Kind: h.Kind, Path: h.Path, Manifest: m, Weight: h.Weight}
		for _, e := range h.Events {
			hk.Events = append(hk.Events, rspb.HookEvent(e))
		}
		for _, p := range h.DeletePolicies {
			hk.DeletePolicies = append(hk.DeletePolicies, rspb.HookDeletePolicy(p))
		}
		rel.Hooks = append(rel.Hooks, hk)
	}
	return rel, nil
}

// helmManifest marks every object of a vllmctl manifest as Helm release
// name's in ns.
func helmManifest(manifest, name, ns string) (string, error) {
	objs, err := cluster.ParseManifest(manifest)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		owner.MarkHelm(o, name, ns)
	}
	return charts.Manifest(objs)
}

// Write writes rel as the Helm record of its revision (a Secret of type
// helm.sh/release.v1, or a ConfigMap): created, or, when one of that name
// exists (adopt's relabelled record), replaced. Its labels are Helm's
// (name, owner=helm, status, version, modifiedAt) and
// vllmctl.io/handed-over=true.
func Write(ctx context.Context, client kubernetes.Interface, driver Driver, ns string, rel *rspb.Release) error {
	data, err := Encode(rel)
	if err != nil {
		return fmt.Errorf("encode Helm record of revision %d: %w", rel.Version, err)
	}
	meta := metav1.ObjectMeta{Name: Key(rel.Name, rel.Version), Namespace: ns, Labels: map[string]string{
		LabelName: rel.Name, LabelOwner: OwnerHelm, "status": string(rel.Info.Status), "version": strconv.Itoa(rel.Version),
		"modifiedAt": strconv.FormatInt(time.Now().Unix(), 10), LabelHandedOver: "true",
	}}
	if driver == DriverConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"release": data}}
		_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		}
	} else {
		s := &corev1.Secret{ObjectMeta: meta, Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte(data)}}
		_, err = client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = client.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("write Helm record %s/%s: %w", ns, meta.Name, err)
	}
	return nil
}
