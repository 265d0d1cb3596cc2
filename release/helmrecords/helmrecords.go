package helmrecords

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	rspb "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// Driver is the Helm storage driver whose records are read.
type Driver string

// The drivers.
const (
	DriverSecret    Driver = "secret"
	DriverConfigMap Driver = "configmap"
)

// ParseDriver checks a --helm-driver value (Helm's HELM_DRIVER names:
// secret, secrets, configmap, configmaps).
func ParseDriver(s string) (Driver, error) {
	switch s {
	case "", "secret", "secrets":
		return DriverSecret, nil
	case "configmap", "configmaps":
		return DriverConfigMap, nil
	}
	return "", fmt.Errorf("--helm-driver %q: want secret or configmap", s)
}

// Labels of Helm's records.
const (
	LabelOwner   = "owner"
	LabelName    = "name"
	OwnerHelm    = "helm"
	OwnerAdopted = "vllmctl-adopted"
	// LabelAdopted ("true") marks a record adopt labelled.
	LabelAdopted = "vllmctl.io/adopted"
	// LabelHandedOver ("true") marks a record handover wrote: a handover
	// run again after it was interrupted may write it again.
	LabelHandedOver = "vllmctl.io/handed-over"
)

// maxRecordBytes bounds the decompressed size of one Helm record.
const maxRecordBytes = 64 << 20

// Record is one Helm revision: the object that holds it and the release.
type Record struct {
	// Kind is Secret or ConfigMap, Key the object's name.
	Kind, Key string
	Release   *rspb.Release
	// HandedOver is set when `vllmctl handover` wrote the record.
	HandedOver bool
}

// Read returns the Helm records of release name in namespace ns, lowest
// revision first. No record is a *NotFoundError; one that does not decode
// an *UnreadableError naming it.
func Read(ctx context.Context, client kubernetes.Interface, driver Driver, ns, name string) ([]Record, error) {
	return read(ctx, client, driver, ns, name, OwnerHelm)
}

// ReadAdopted returns the records Read would have returned before adopt
// labelled them.
func ReadAdopted(ctx context.Context, client kubernetes.Interface, driver Driver, ns, name string) ([]Record, error) {
	return read(ctx, client, driver, ns, name, OwnerAdopted)
}

func read(ctx context.Context, client kubernetes.Interface, driver Driver, ns, name, owner string) ([]Record, error) {
	sel := labels.Set{LabelOwner: owner, LabelName: name}.AsSelector().String()
	type raw struct {
		key, data  string
		handedOver bool
	}
	var items []raw
	kind := "Secret"
	switch driver {
	case DriverConfigMap:
		kind = "ConfigMap"
		list, err := client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("list Helm records (ConfigMaps %s) in namespace %s: %w", sel, ns, err)
		}
		for _, c := range list.Items {
			items = append(items, raw{c.Name, c.Data["release"], c.Labels[LabelHandedOver] == "true"})
		}
	default:
		list, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("list Helm records (Secrets %s) in namespace %s: %w", sel, ns, err)
		}
		for _, s := range list.Items {
			if s.Type != "helm.sh/release.v1" {
				continue
			}
			items = append(items, raw{s.Name, string(s.Data["release"]), s.Labels[LabelHandedOver] == "true"})
		}
	}
	if len(items) == 0 {
		return nil, &NotFoundError{Namespace: ns, Name: name, Driver: driver}
	}
	out := make([]Record, 0, len(items))
	for _, it := range items {
		rel, err := Decode(it.data)
		if err == nil && (rel.Name != name || rel.Info == nil) {
			err = fmt.Errorf("holds release %q revision %d, not a revision of %q", rel.Name, rel.Version, name)
		}
		if err != nil {
			return nil, &UnreadableError{Kind: kind, Namespace: ns, Key: it.key, Err: err}
		}
		out = append(out, Record{Kind: kind, Key: it.key, Release: rel, HandedOver: it.handedOver})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Release.Version < out[j].Release.Version })
	return out, nil
}

// Decode decodes a Helm record's "release" data: base64 of the release's
// JSON, gzipped (Helm's storage driver format).
func Decode(data string) (*rspb.Release, error) {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b, 0x08}) {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("not gzip: %w", err)
		}
		b, err = io.ReadAll(io.LimitReader(zr, maxRecordBytes+1))
		if err != nil {
			return nil, fmt.Errorf("gunzip: %w", err)
		}
		if len(b) > maxRecordBytes {
			return nil, fmt.Errorf("larger than %d MiB once decompressed", maxRecordBytes>>20)
		}
	}
	var rel rspb.Release
	if err := json.Unmarshal(b, &rel); err != nil {
		return nil, fmt.Errorf("not a Helm release: %w", err)
	}
	return &rel, nil
}

// Encode is Decode's inverse, as Helm's storage driver encodes.
func Encode(rel *rspb.Release) (string, error) {
	b, err := json.Marshal(rel)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	if _, err := zw.Write(b); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// MarkAdopted relabels the records: owner=vllmctl-adopted (Helm lists only
// owner=helm, so helm history, upgrade and rollback no longer find the
// release) and vllmctl.io/adopted=true.
func MarkAdopted(ctx context.Context, client kubernetes.Interface, ns string, recs []Record) error {
	return relabel(ctx, client, ns, recs, OwnerAdopted, "true")
}

func relabel(ctx context.Context, client kubernetes.Interface, ns string, recs []Record, owner, adopted string) error {
	var adoptedValue any = adopted
	if adopted == "" {
		adoptedValue = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{LabelOwner: owner, LabelAdopted: adoptedValue}}})
	if err != nil {
		return err
	}
	for _, r := range recs {
		switch r.Kind {
		case "ConfigMap":
			_, err = client.CoreV1().ConfigMaps(ns).Patch(ctx, r.Key, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "vllmctl"})
		default:
			_, err = client.CoreV1().Secrets(ns).Patch(ctx, r.Key, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "vllmctl"})
		}
		if err != nil {
			return fmt.Errorf("label Helm record %s %s/%s owner=%s: %w", r.Kind, ns, r.Key, owner, err)
		}
	}
	return nil
}

// Remove deletes the records.
func Remove(ctx context.Context, client kubernetes.Interface, ns string, recs []Record) error {
	for _, r := range recs {
		var err error
		switch r.Kind {
		case "ConfigMap":
			err = client.CoreV1().ConfigMaps(ns).Delete(ctx, r.Key, metav1.DeleteOptions{})
		default:
			err = client.CoreV1().Secrets(ns).Delete(ctx, r.Key, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Helm record %s %s/%s: %w", r.Kind, ns, r.Key, err)
		}
	}
	return nil
}

// NotFoundError: the namespace holds no Helm record of the release (exit
// code 2).
type NotFoundError struct {
	Namespace, Name string
	Driver          Driver
}

func (e *NotFoundError) Error() string {
	what := "Secrets of type helm.sh/release.v1"
	if e.Driver == DriverConfigMap {
		what = "ConfigMaps"
	}
	return fmt.Sprintf("no Helm release %s in namespace %s (no %s labelled owner=helm,name=%s)", e.Name, e.Namespace, what, e.Name)
}

// ExitCode is 2: invalid input.
func (e *NotFoundError) ExitCode() int { return exitcode.Invalid }

// UnreadableError: a Helm record does not decode (exit code 6).
type UnreadableError struct {
	Kind, Namespace, Key string
	Err                  error
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("Helm record %s %s/%s is unreadable: %v", e.Kind, e.Namespace, e.Key, e.Err)
}

func (e *UnreadableError) Unwrap() error { return e.Err }

// ExitCode is 6: the cluster holds what cannot be used.
func (e *UnreadableError) ExitCode() int { return exitcode.Cluster }

// PendingError: the Helm release has an operation in progress (exit code
// 5): adopting it would race Helm.
type PendingError struct {
	Namespace, Name string
	Revision        int
	Status          string
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("Helm release %s/%s revision %d is %s: a Helm operation is in progress (or was interrupted; `helm rollback` or `helm history` settles it)",
		e.Namespace, e.Name, e.Revision, e.Status)
}

// ExitCode is 5: another operation on the release is in progress.
func (e *PendingError) ExitCode() int { return exitcode.InProgress }
