package cluster

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/diff"
)

// ApplyGetter applies and reads a release's objects: an [*Applier], or a
// test fake (every ObjectClient is one).
type ApplyGetter interface {
	// Apply applies objs with server-side apply; see [Applier.Apply].
	Apply(ctx context.Context, objs []*unstructured.Unstructured, opts ApplyOptions) ([]ApplyResult, error)
	// Get reads the live copy of obj; see [Applier.Get].
	Get(ctx context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error)
}

// NewDiffCluster returns what diff.Compute needs to preview an apply of
// opts through objects: a dry run that is objects.Apply with opts and
// DryRun set, so it takes the path a real apply takes (field manager,
// --force-conflicts, namespace creation, the HPA rule), and a getter of
// live objects (a missing object, or one whose kind the cluster does not
// serve, is nil). Without opts.Force, an object whose apply conflicts with
// other field managers is dry-run again with force (ForceOnConflict): its
// result shows the drift and carries the conflicts.
func NewDiffCluster(objects ApplyGetter, opts ApplyOptions) diff.Cluster {
	opts.DryRun = true
	opts.ForceOnConflict = !opts.Force
	return diff.Cluster{
		DryRun: func(ctx context.Context, objs []*unstructured.Unstructured) ([]diff.DryRunResult, error) {
			results, err := objects.Apply(ctx, objs, opts)
			if err != nil {
				return nil, err
			}
			out := make([]diff.DryRunResult, 0, len(results))
			for _, r := range results {
				out = append(out, diff.DryRunResult{Object: r.Live, Live: r.Before, LiveRead: r.BeforeRead,
					Unvalidated: r.Unvalidated, Conflicts: diffConflicts(r.Conflict)})
			}
			return out, nil
		},
		Get: func(ctx context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error) {
			live, err := objects.Get(ctx, obj, namespace)
			var unknown *UnknownKindError
			switch {
			case apierrors.IsNotFound(err), errors.As(err, &unknown):
				return nil, nil
			case err != nil:
				return nil, err
			}
			return live, nil
		},
	}
}

// DiffCluster is NewDiffCluster(a, opts).
func (a *Applier) DiffCluster(opts ApplyOptions) diff.Cluster { return NewDiffCluster(a, opts) }

// diffConflicts converts an apply's conflicts for the diff.
func diffConflicts(e *FieldConflictError) []diff.FieldConflict {
	if e == nil {
		return nil
	}
	out := make([]diff.FieldConflict, len(e.Conflicts))
	for i, c := range e.Conflicts {
		out[i] = diff.FieldConflict{Field: c.Field, Manager: c.Manager, Subresource: c.Subresource}
	}
	return out
}
