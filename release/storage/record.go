package storage

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllm"
)

// Names, labels and the type of release record Secrets (contract: "Release
// records").
const (
	// SecretType is the type of every release record Secret.
	SecretType corev1.SecretType = "vllmctl.io/release.v1"
	// SecretNamePrefix starts the name of every release record Secret.
	SecretNamePrefix = "vllmctl.release.v1."
	// DataKey is the Secret data key holding the gzip-compressed JSON record.
	DataKey = "release"

	LabelManagedBy   = "app.kubernetes.io/managed-by"
	ManagedByVllmctl = "vllmctl"
	LabelRelease     = "vllmctl.io/release"
	LabelRevision    = "vllmctl.io/revision"
	LabelStatus      = "vllmctl.io/status"

	// MaxRecordBytes bounds the compressed record so that the Secret stays
	// well below the API server's 1 MiB object limit.
	MaxRecordBytes = 900 << 10
	// MaxDecodedBytes bounds a record's decompressed JSON. A record within
	// MaxRecordBytes that vllmctl wrote stays far below it; a Secret crafted
	// to decompress to gigabytes fails to decode instead of exhausting memory.
	MaxDecodedBytes = 64 << 20
)

// Status is the state of one release revision.
type Status string

// The statuses of a revision (docs/release-record.md). The pending ones act as the release's lock.
const (
	StatusPendingInstall  Status = "pending-install"
	StatusPendingUpgrade  Status = "pending-upgrade"
	StatusPendingRollback Status = "pending-rollback"
	StatusDeployed        Status = "deployed"
	StatusSuperseded      Status = "superseded"
	StatusFailed          Status = "failed"
	StatusUninstalled     Status = "uninstalled"
	// StatusHandedOver marks the revision that was deployed when the
	// release was given back to Helm (`vllmctl handover`): its objects are
	// Helm's; no operation takes the release's lock after it.
	StatusHandedOver Status = "handed-over"
)

// IsPending reports whether s is one of the pending statuses, which hold the
// release's lock.
func (s Status) IsPending() bool {
	switch s {
	case StatusPendingInstall, StatusPendingUpgrade, StatusPendingRollback:
		return true
	}
	return false
}

// IsValid reports whether s is one of the statuses of a revision.
func (s Status) IsValid() bool {
	switch s {
	case StatusPendingInstall, StatusPendingUpgrade, StatusPendingRollback,
		StatusDeployed, StatusSuperseded, StatusFailed, StatusUninstalled, StatusHandedOver:
		return true
	}
	return false
}

// String returns the status as written in records and labels.
func (s Status) String() string { return string(s) }

// Chart identifies the chart a revision was rendered from. Its JSON form
// matches charts.ChartInfo.
type Chart struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion,omitempty"`
	// Source is where the chart was pulled from (the .tgz's URL in its
	// repository) and Digest the "sha256:<hex>" of that .tgz; both empty
	// for a chart directory, a local .tgz or a built-in chart.
	Source string `json:"source,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Signer and SignedDigest are set when the chart's provenance was
	// verified (--verify): the identities of the key that signed it
	// ("Name (comment) <email>", comma-separated) and the "sha256:<hex>"
	// of the .tgz the provenance signs (a local .tgz included).
	Signer       string `json:"signer,omitempty"`
	SignedDigest string `json:"signedDigest,omitempty"`
	// Builtin is set when the chart is one of vllmctl's built-in charts
	// (the serve check is on by default for them).
	Builtin bool `json:"builtin,omitempty"`
	// ValuesMap is the values mapping the chart declares in its Chart.yaml
	// annotations (vllm.ValuesAnnotationPrefix): where its values set what
	// the failure hints name. Kept so that a rollback's and diagnose's
	// hints name the same values paths without the chart's files.
	ValuesMap vllm.ValuesMap `json:"valuesMap,omitempty"`
}

// String returns name-version, as the history and list tables show it.
func (c Chart) String() string {
	switch {
	case c.Name == "":
		return ""
	case c.Version == "":
		return c.Name
	}
	return c.Name + "-" + c.Version
}

// ReplicaSetRef names a ReplicaSet a revision's Deployment rolled out.
type ReplicaSetRef struct {
	Deployment      string `json:"deployment"`
	Name            string `json:"name"`
	PodTemplateHash string `json:"podTemplateHash"`
	// Revision is the Deployment revision (deployment.kubernetes.io/revision).
	Revision int64 `json:"revision"`
}

// ControllerRevisionRef names the ControllerRevision a revision's
// StatefulSet rolled out: the StatefulSet controller's record of a pod
// template, as a ReplicaSet is the Deployment controller's.
type ControllerRevisionRef struct {
	StatefulSet string `json:"statefulSet"`
	Name        string `json:"name"`
	// Hash is the revision's controller-revision-hash (the pods' label).
	Hash string `json:"hash"`
	// Revision is the ControllerRevision's revision number.
	Revision int64 `json:"revision"`
}

// Release is one revision of a release: what the data key of its record
// Secret holds, gzip-compressed. Chart files are never stored.
//
// Before a record is written, every string in it passes through the
// operation's Redactor (diff.RedactCopy), except in the fields tagged
// `redact:"keep"`: what the release is (names, chart, values, manifests),
// stored as given. A field added without the tag is redacted.
type Release struct {
	Name      string `json:"name" redact:"keep"`
	Namespace string `json:"namespace" redact:"keep"`
	Revision  int    `json:"revision"`
	Status    Status `json:"status" redact:"keep"`
	// Description says what happened, e.g. "Upgrade complete".
	Description string `json:"description,omitempty"`
	// Holder identifies who wrote the revision (user@host pid N); while the
	// revision is pending it names the lock holder.
	Holder string `json:"holder,omitempty" redact:"keep"`
	// Lease and Renew are the lock's terms while the revision is pending,
	// written by its holder: it rewrites the record every Renew, and
	// another operation takes the lock over only once it has watched the
	// record go unrenewed for Lease (never by comparing clocks).
	Lease time.Duration `json:"lease,omitempty"`
	Renew time.Duration `json:"renew,omitempty"`
	Chart Chart         `json:"chart" redact:"keep"`
	// Values are the user-supplied values (files then --set), not the
	// chart defaults.
	Values map[string]any `json:"values,omitempty" redact:"keep"`
	// ComputedValues are the values the templates saw: the chart's
	// defaults (subcharts' included) coalesced with Values, what Helm's
	// `get values --all` prints and what deploy --reuse-values starts from.
	// Absent in records written before vllmctl kept them.
	ComputedValues map[string]any `json:"computedValues,omitempty" redact:"keep"`
	// Notes is the chart's rendered NOTES.txt, if it has one.
	Notes string `json:"notes,omitempty"`
	// Manifest is the rendered manifest, one YAML stream.
	Manifest string `json:"manifest,omitempty" redact:"keep"`
	// Hooks are the revision's hooks (objects annotated helm.sh/hook):
	// not part of Manifest, run at their events (deploy, rollback,
	// uninstall) and by `vllmctl test`.
	Hooks []Hook `json:"hooks,omitempty" redact:"keep"`
	// PostRenderer is the post-renderer the manifest and hooks went
	// through (--post-renderer, --post-renderer-args): its path and
	// arguments as given, never the executable itself. A rollback
	// restores the recorded manifest and keeps the field of the revision
	// it restores.
	PostRenderer *charts.PostRenderer `json:"postRenderer,omitempty" redact:"keep"`
	// RollbackOf is the revision whose manifest a rollback restored.
	RollbackOf int `json:"rollbackOf,omitempty"`
	// AdoptedFrom is the Helm revision `vllmctl adopt` made this record
	// from (its description says so too). Records adopted before the
	// field existed have only the description: see HelmRevision.
	AdoptedFrom int `json:"adoptedFrom,omitempty"`
	// ReplicaSets are the ReplicaSets this revision produced.
	ReplicaSets []ReplicaSetRef `json:"replicaSets,omitempty" redact:"keep"`
	// ControllerRevisions are the ControllerRevisions this revision's
	// StatefulSets rolled out (grouped releases).
	ControllerRevisions []ControllerRevisionRef `json:"controllerRevisions,omitempty" redact:"keep"`
	// CRDs are the CustomResourceDefinitions (crds/ of the chart) this
	// revision created, by name; vllmctl never updates or deletes them.
	CRDs []string `json:"crds,omitempty" redact:"keep"`
	// CRDManifest holds the CustomResourceDefinitions of the chart's crds/
	// the revision was deployed with (one YAML stream; none with
	// --skip-crds), so that a rollback to it creates the ones deleted
	// since, as the deploy did (crds_rollback.go).
	CRDManifest string `json:"crdManifest,omitempty" redact:"keep"`
	// Failure is the diagnosis when the revision failed.
	Failure *rollout.Diagnosis `json:"failure,omitempty"`
	// Canary is what the revision's canary phase did (deploy --canary).
	Canary *CanaryReport `json:"canary,omitempty"`
	// Analysis is what the revision's canary analysis measured (deploy
	// --analysis, or the built-in chart's analysis values).
	Analysis *AnalysisReport `json:"analysis,omitempty"`
	// ServeCheck is the revision's last serve check (its pods listed the
	// model and completed a request, or not); nil when none ran.
	ServeCheck *rollout.ServeReport `json:"serveCheck,omitempty"`
	// Created is when the revision was first written (its pending record).
	Created time.Time `json:"created"`
	// Updated is when the revision was last written by its own operation
	// (or marked failed by a lock takeover); being superseded does not
	// change it. The age of a pending record (its lock) is measured from it.
	Updated time.Time `json:"updated"`

	// version is the store's optimistic-concurrency token (a Secret's
	// resourceVersion) of the record this value was read from or written
	// as; Update refuses to overwrite a record that changed since.
	version string
}

// SecretName returns the name of the record Secret of a revision.
func SecretName(name string, revision int) string {
	return SecretNamePrefix + name + ".v" + strconv.Itoa(revision)
}

// Labels returns the labels of the record Secret of r.
func Labels(r *Release) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByVllmctl,
		LabelRelease:   r.Name,
		LabelRevision:  strconv.Itoa(r.Revision),
		LabelStatus:    string(r.Status),
	}
}

// ValidateName checks that name can name a release (it is used in label
// values and in Secret and object names) by the one rule for release names,
// Helm's, which charts.ValidateReleaseName applies too: a DNS-1123 label of
// at most 53 characters. A name that breaks it is an *InvalidNameError
// (exit code 2) naming it and the rule.
func ValidateName(name string) error {
	if problem := charts.ReleaseNameProblem(name); problem != "" {
		return &InvalidNameError{Name: name, Reasons: []string{problem}}
	}
	return nil
}

// validate checks what a store needs before writing r.
func (r *Release) validate() error {
	if err := ValidateName(r.Name); err != nil {
		return err
	}
	if r.Revision < 1 {
		return fmt.Errorf("release %s: invalid revision %d (must be >= 1)", r.Name, r.Revision)
	}
	if !r.Status.IsValid() {
		return fmt.Errorf("release %s revision %d: invalid status %q", r.Name, r.Revision, r.Status)
	}
	return nil
}

// Encode returns the gzip-compressed JSON form of r.
func Encode(r *Release) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if err := json.NewEncoder(zw).Encode(r); err != nil {
		return nil, fmt.Errorf("encode release %s revision %d: %w", r.Name, r.Revision, err)
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if buf.Len() > MaxRecordBytes {
		return nil, fmt.Errorf("release %s revision %d: record is %d bytes compressed, more than the %d allowed",
			r.Name, r.Revision, buf.Len(), MaxRecordBytes)
	}
	return buf.Bytes(), nil
}

// Decode parses what Encode produced: the reader of the record format
// (contract.md, release records) for tools that read records themselves.
func Decode(data []byte) (*Release, error) {
	return new(decoder).decode(data)
}

// AdoptedDescription is the description of a record adopted from Helm
// revision rev (followed by ": " and Helm's own description, if any).
func AdoptedDescription(rev int) string {
	return fmt.Sprintf("Adopted from Helm revision %d", rev)
}

// HelmRevision is the Helm revision r was adopted from, 0 when it was
// not: AdoptedFrom, or for records adopted before that field existed,
// the revision its description names.
func (r *Release) HelmRevision() int {
	if r.AdoptedFrom > 0 {
		return r.AdoptedFrom
	}
	if d := AdoptedDescription(r.Revision); r.Description == d || strings.HasPrefix(r.Description, d+": ") {
		return r.Revision
	}
	return 0
}

// decoder decodes records with one decompressor and one buffer, reused from
// record to record: listing a namespace's releases then allocates gzip's
// window and tables once, not once per record. It is safe for concurrent use.
type decoder struct {
	mu  sync.Mutex
	zr  *gzip.Reader
	buf bytes.Buffer
}

func (d *decoder) decode(data []byte) (*Release, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var err error
	if d.zr == nil {
		d.zr, err = gzip.NewReader(bytes.NewReader(data))
	} else {
		err = d.zr.Reset(bytes.NewReader(data))
	}
	if err != nil {
		return nil, fmt.Errorf("decompress release record: %w", err)
	}
	d.buf.Reset()
	n, err := d.buf.ReadFrom(io.LimitReader(d.zr, MaxDecodedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("decompress release record: %w", err)
	}
	if n > MaxDecodedBytes {
		return nil, fmt.Errorf("decompress release record: it decompresses to more than %d bytes", MaxDecodedBytes)
	}
	r := &Release{}
	if err := json.Unmarshal(d.buf.Bytes(), r); err != nil {
		return nil, fmt.Errorf("parse release record: %w", err)
	}
	return r, nil
}

// ToSecret returns the record Secret of r, in r's namespace.
func ToSecret(r *Release) (*corev1.Secret, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	data, err := Encode(r)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            SecretName(r.Name, r.Revision),
			Namespace:       r.Namespace,
			Labels:          Labels(r),
			ResourceVersion: r.version,
		},
		Type: SecretType,
		Data: map[string][]byte{DataKey: data},
	}, nil
}

// FromSecret decodes the record a Secret holds. The namespace, name, revision
// and status of the result come from the Secret's metadata, which is what
// selectors see.
func FromSecret(s *corev1.Secret) (*Release, error) {
	e, err := entryFromSecret(s, new(decoder))
	if err != nil {
		return nil, err
	}
	return e.Release()
}

// entryFromSecret reads a record Secret's identity from its metadata,
// leaving its body to decode on demand, by d (which the entries of one list
// share).
func entryFromSecret(s *corev1.Secret, d *decoder) (Entry, error) {
	obj := s.Namespace + "/" + s.Name
	if s.Type != SecretType {
		return Entry{}, fmt.Errorf("Secret %s: type %q is not %q", obj, s.Type, SecretType)
	}
	name := s.Labels[LabelRelease]
	rev, err := strconv.Atoi(s.Labels[LabelRevision])
	if err != nil || name == "" || rev < 1 || !strings.HasPrefix(s.Name, SecretNamePrefix) {
		return Entry{}, fmt.Errorf("Secret %s: not a release record (labels %s=%q, %s=%q)",
			obj, LabelRelease, name, LabelRevision, s.Labels[LabelRevision])
	}
	status := Status(s.Labels[LabelStatus])
	data := s.Data[DataKey]
	version := s.ResourceVersion
	ns := s.Namespace
	return Entry{
		Namespace: ns,
		Name:      name,
		Revision:  rev,
		Status:    status,
		decode: func() (*Release, error) {
			r, err := d.decode(data)
			if err != nil {
				return nil, fmt.Errorf("Secret %s: %w", obj, err)
			}
			r.Namespace, r.Name, r.Revision, r.Status = ns, name, rev, status
			r.version = version
			return r, nil
		},
	}, nil
}
