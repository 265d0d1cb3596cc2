package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/release/storage"
)

// PruneOptions tune [Applier.Prune].
type PruneOptions struct {
	// Release is the release whose objects may be pruned: only live objects
	// that are the release's (owner.Owns with Namespace) are deleted.
	// Required.
	Release string
	// Namespace is the release namespace, the namespace of namespaced
	// objects that name none.
	Namespace string
	// DryRun deletes with dryRun=All.
	DryRun bool

	// hook is set by Delete: a hook's object is deleted whatever its
	// helm.sh/resource-policy, as Helm deletes hooks.
	hook bool
}

// PruneAction says what pruning did with one object.
type PruneAction string

// The actions of a prune.
const (
	// PruneDeleted: the object was deleted (foreground propagation).
	PruneDeleted PruneAction = "deleted"
	// PruneGone: the object (or its kind) no longer exists; nothing to do.
	PruneGone PruneAction = "gone"
	// PruneKept: the object was left alone; Reason says why.
	PruneKept PruneAction = "kept"
)

// PruneResult reports what pruning did with one object of the previous
// revision that the new one no longer has.
type PruneResult struct {
	Object object.Ref  `json:"object"`
	Action PruneAction `json:"action"`
	Reason string      `json:"reason,omitempty"`
}

// Prune deletes the objects of the previous revision's manifest (previous)
// that the new one (current) no longer has, comparing group, kind,
// namespace and name. It deletes in the reverse of the apply order (see
// charts.SortObjectsForDelete), whatever the order of previous, with
// foreground propagation (background for CRDs: see propagation), and only objects whose live copy still carries
// the labels of opts.Release: an object another owner took over is kept.
// Namespaces are never pruned (the release's records live in one).
//
// It returns one result per object considered, in deletion order; the
// pruned ones have Action PruneDeleted. On error the results so far are
// returned with it.
func (a *Applier) Prune(ctx context.Context, previous, current []*unstructured.Unstructured, opts PruneOptions) ([]PruneResult, error) {
	if err := storage.ValidateName(opts.Release); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	r := a.resolver()
	keep := map[object.ID]bool{}
	for _, obj := range current {
		keep[a.identity(ctx, r, obj, opts.Namespace).ID()] = true
	}

	// previous may hold several revisions' manifests, oldest first: the
	// newest copy of an object is the one pruned, and an object listed
	// twice is pruned once.
	var doomed []*unstructured.Unstructured
	refs := map[*unstructured.Unstructured]object.Ref{}
	for i := len(previous) - 1; i >= 0; i-- {
		obj := previous[i]
		ref := a.identity(ctx, r, obj, opts.Namespace)
		if keep[ref.ID()] {
			continue
		}
		keep[ref.ID()] = true
		doomed = append(doomed, obj)
		refs[obj] = ref
	}
	charts.SortObjectsForDelete(doomed)

	var results []PruneResult
	for _, obj := range doomed {
		res, err := a.pruneOne(ctx, r, obj, refs[obj], opts)
		if err != nil {
			return results, err
		}
		results = append(results, res)
	}
	return results, nil
}

// identity returns obj's reference with its namespace resolved. A kind the
// cluster does not serve is assumed namespaced.
func (a *Applier) identity(ctx context.Context, r *resolver, obj *unstructured.Unstructured, defaultNS string) object.Ref {
	ref := object.RefOf(obj)
	_, ns, err := r.locate(ctx, obj, defaultNS)
	if err != nil {
		if ref.Namespace == "" {
			ref.Namespace = defaultNS
		}
		return ref
	}
	ref.Namespace = ns
	return ref
}

func (a *Applier) pruneOne(ctx context.Context, r *resolver, obj *unstructured.Unstructured, ref object.Ref, opts PruneOptions) (PruneResult, error) {
	if ref.IsNamespace() {
		return PruneResult{Object: ref, Action: PruneKept, Reason: "namespaces are never pruned"}, nil
	}
	mapping, err := r.mapping(ctx, obj.GroupVersionKind())
	if meta.IsNoMatchError(err) {
		return PruneResult{Object: ref, Action: PruneGone, Reason: "the cluster no longer serves this kind"}, nil
	}
	if err != nil {
		return PruneResult{}, fmt.Errorf("prune %s: %w", ref, err)
	}
	client := a.resource(mapping, ref.Namespace)
	live, err := client.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return PruneResult{Object: ref, Action: PruneGone, Reason: "not found"}, nil
	}
	if err != nil {
		return PruneResult{}, fmt.Errorf("prune %s: %w", ref, err)
	}
	if !owner.Owns(live, opts.Release, opts.Namespace) {
		return PruneResult{Object: ref, Action: PruneKept, Reason: fmt.Sprintf(
			"not managed by release %s (%s)", opts.Release, owner.Describe(live))}, nil
	}
	if !opts.hook && charts.KeepsResource(live) {
		return PruneResult{Object: ref, Action: PruneKept, Reason: charts.AnnotationResourcePolicy + ": " + charts.ResourcePolicyKeep}, nil
	}
	uid := live.GetUID()
	do := metav1.DeleteOptions{
		PropagationPolicy: ptr.To(propagation(ref)),
		// The object checked is the object deleted, not a replacement.
		Preconditions: &metav1.Preconditions{UID: &uid},
	}
	if opts.DryRun {
		do.DryRun = []string{metav1.DryRunAll}
	}
	err = client.Delete(ctx, ref.Name, do)
	if apierrors.IsNotFound(err) {
		return PruneResult{Object: ref, Action: PruneGone, Reason: "not found"}, nil
	}
	if err != nil {
		return PruneResult{}, fmt.Errorf("prune %s: %w", ref, err)
	}
	return PruneResult{Object: ref, Action: PruneDeleted}, nil
}

// propagation is how the deletion of ref reaches its dependents:
// foreground (the object goes once its dependents, a Deployment's pods,
// are gone), except for a CustomResourceDefinition, which no object names
// as its owner: the API server's CRD finalizer deletes its custom
// resources, and background is what `helm uninstall` uses.
func propagation(ref object.Ref) metav1.DeletionPropagation {
	if ref.Group == CRDGroup && ref.Kind == CRDKind {
		return metav1.DeletePropagationBackground
	}
	return metav1.DeletePropagationForeground
}

// ParseManifest parses a YAML stream of objects, as a release record stores
// it ("---" separated documents), in order. Empty documents are skipped;
// a document that is not an object with apiVersion and kind is an error.
func ParseManifest(manifest string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", doc, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", doc, err)
		}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
			return nil, fmt.Errorf("manifest document %d: apiVersion and kind are required", doc)
		}
		objs = append(objs, obj)
	}
}
