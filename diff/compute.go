package diff

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/secretdata"
)

// DryRunResult is one object of a dry-run apply.
type DryRunResult struct {
	// Object is the object as the server would store it after the apply,
	// its namespace resolved. When Unvalidated, it is the object that
	// would be sent.
	Object *unstructured.Unstructured
	// Live, when LiveRead, is the live object the dry run read (nil:
	// absent): the diff does not read it again.
	Live     *unstructured.Unstructured
	LiveRead bool
	// Unvalidated is set for an object the server could not dry-run
	// because its namespace does not exist yet (the deploy would create
	// it): the object would be created.
	Unvalidated bool
	// Conflicts are the fields other field managers own that the apply
	// would change: the deploy is refused unless --force-conflicts is
	// given. Object is then the outcome of a forced apply, so the report
	// still shows the drift.
	Conflicts []FieldConflict
}

// DryRunFunc applies objs with dryRun=All along the path a real deploy
// takes (same field manager, force setting and HPA rule) and returns one
// result per object in apply order, plus one for a Namespace the deploy
// would create.
type DryRunFunc func(ctx context.Context, objs []*unstructured.Unstructured) ([]DryRunResult, error)

// GetFunc reads the live copy of obj (as a manifest lists it: a namespaced
// object without a namespace is looked up in namespace). It returns nil
// and no error when there is no such object, or when the cluster does not
// serve its kind. Its errors name the object.
type GetFunc func(ctx context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error)

// Cluster is what Compute dry-runs against and reads live objects from.
// cluster.NewDiffCluster makes one from a cluster.Applier.
type Cluster struct {
	DryRun DryRunFunc
	Get    GetFunc
}

// Options tune Compute.
type Options struct {
	// Release is the release name: only live objects that are the
	// release's (owner.Owns with Namespace) are pruned. Required.
	Release string
	// Namespace is the release namespace, the namespace of namespaced
	// objects that name none.
	Namespace string
	// Previous are the objects a deploy would consider for pruning: those
	// of the deployed revision's manifest (cluster.ParseManifest of its
	// record), and of any later failed revision, as the deploy prunes
	// them; nil when nothing was deployed. Those the new objects no
	// longer have, still live with the release's labels, are reported as
	// prunes.
	Previous []*unstructured.Unstructured
}

// entry is one object whose before and after differ, before rendering.
type entry struct {
	ref    object.Ref
	action Action
	// before and after are the live object and the object the deploy
	// would leave, noise stripped; nil for a create / a prune.
	before, after map[string]any
	// conflicts are the fields other field managers own (a change only).
	conflicts []FieldConflict
}

// Compute reports what deploying objs (the rendered objects of the
// release) would change: objs are applied with c.DryRun, each result is
// compared with the live object (noise stripped, see StripNoise), and the
// objects of opts.Previous that objs no longer have and that are still live
// with the release's labels are reported as prunes. Namespaces are never
// pruned, as a deploy never prunes them.
//
// Objects come in the charts' sort order, prunes last. Secret values are
// masked (see MaskSecrets). Errors name the object; an error whose message
// could echo a Secret value is a *RedactedError. Errors carry the
// contract's exit code (ExitCode() int) or are API errors (exit code 6).
func Compute(ctx context.Context, c Cluster, objs []*unstructured.Unstructured, opts Options) (*Report, error) {
	if c.DryRun == nil || c.Get == nil {
		return nil, errors.New("diff: the cluster needs a dry run and a getter")
	}
	if opts.Release == "" {
		return nil, errors.New("diff: a release name is required")
	}
	values := secretdata.Values(append(append([]*unstructured.Unstructured(nil), objs...), opts.Previous...)...)
	refs := refNames(objs, opts.Namespace)
	rep, err := compute(ctx, c, objs, opts)
	if err != nil {
		return nil, redact(err, values, refs)
	}
	return rep, nil
}

func compute(ctx context.Context, c Cluster, objs []*unstructured.Unstructured, opts Options) (*Report, error) {
	results, err := c.DryRun(ctx, objs)
	if err != nil {
		return nil, err
	}
	rendered := map[object.ID]*unstructured.Unstructured{}
	for _, o := range objs {
		ref := object.RefOf(o)
		rendered[ref.ID()] = o
		if ref.Namespace == "" {
			ref.Namespace = opts.Namespace
			rendered[ref.ID()] = o
		}
	}

	var entries []entry
	current := map[object.ID]bool{}
	for _, r := range results {
		if r.Object == nil {
			continue
		}
		ref := object.RefOf(r.Object)
		current[ref.ID()] = true
		var live *unstructured.Unstructured
		switch {
		case r.Unvalidated:
		case r.LiveRead:
			live = r.Live
		default:
			if live, err = c.Get(ctx, r.Object, opts.Namespace); err != nil {
				return nil, err
			}
		}
		after := StripNoise(r.Object)
		if live == nil {
			stripAllocated(after, rendered[ref.ID()])
			entries = append(entries, entry{ref: ref, action: ActionCreate, after: after})
			continue
		}
		before := StripNoise(live)
		if reflect.DeepEqual(before, after) && len(r.Conflicts) == 0 {
			continue
		}
		entries = append(entries, entry{ref: ref, action: ActionChange, before: before, after: after, conflicts: r.Conflicts})
	}
	sortEntries(entries)

	prunes, err := c.prunes(ctx, current, opts)
	if err != nil {
		return nil, err
	}
	sortEntries(prunes)
	return build(append(entries, prunes...))
}

// build renders entries into a Report.
func build(entries []entry) (*Report, error) {
	rep := &Report{Objects: []ObjectDiff{}}
	for _, e := range entries {
		od := ObjectDiff{Ref: e.ref, Object: e.ref.String(), Action: e.action, Conflicts: e.conflicts}
		if e.action == ActionChange {
			ro, err := rolloutOf(e.before, e.after)
			if err != nil {
				return nil, fmt.Errorf("rollout impact of %s: %w", e.ref, err)
			}
			od.Rollout = ro
		}
		MaskSecrets(e.before, e.after)
		a, err := toYAML(e.before)
		if err != nil {
			return nil, fmt.Errorf("render live %s: %w", e.ref, err)
		}
		b, err := toYAML(e.after)
		if err != nil {
			return nil, fmt.Errorf("render dry run of %s: %w", e.ref, err)
		}
		from, to := labelLive, labelDryRun
		switch e.action {
		case ActionCreate:
			from = labelNone
		case ActionPrune:
			to = labelNone
		}
		od.Diff = unmask(Unified(a, b, from, to, contextLines))
		if od.Diff == "" && len(od.Conflicts) == 0 {
			continue // equal once rendered (e.g. 1 and 1.0)
		}
		if len(od.Conflicts) > 0 {
			rep.Summary.Conflicts++
		}
		switch e.action {
		case ActionChange:
			rep.Summary.Change++
		case ActionCreate:
			rep.Summary.Create++
		case ActionPrune:
			rep.Summary.Prune++
		}
		rep.Objects = append(rep.Objects, od)
	}
	return rep, nil
}

// prunes returns the objects of opts.Previous that current no longer has
// and that are live with the release's labels, as a deploy would prune
// them.
func (c Cluster) prunes(ctx context.Context, current map[object.ID]bool, opts Options) ([]entry, error) {
	var out []entry
	seen := map[object.ID]bool{}
	for _, obj := range opts.Previous {
		ref := object.RefOf(obj)
		if ref.Group == "" && ref.Kind == "Namespace" {
			continue // never pruned
		}
		// Still rendered? Its namespace is the written one, or the
		// release namespace, or none (cluster-scoped): a kind has one
		// scope, so any match is the object.
		written := ref.ID()
		defaulted := written
		if defaulted.Namespace == "" {
			defaulted.Namespace = opts.Namespace
		}
		scoped := written
		scoped.Namespace = ""
		if current[written] || current[defaulted] || current[scoped] {
			continue
		}
		live, err := c.Get(ctx, obj, opts.Namespace)
		if err != nil {
			return nil, err
		}
		if live == nil || !owner.Owns(live, opts.Release, opts.Namespace) || charts.KeepsResource(live) {
			continue // gone, or another owner took it over: a deploy keeps it
		}
		ref.Namespace = live.GetNamespace()
		if current[ref.ID()] || seen[ref.ID()] {
			continue
		}
		seen[ref.ID()] = true
		out = append(out, entry{ref: ref, action: ActionPrune, before: StripNoise(live)})
	}
	return out, nil
}

// sortEntries sorts entries in the charts' apply order.
func sortEntries(entries []entry) {
	objs := make([]*unstructured.Unstructured, len(entries))
	byObj := make(map[*unstructured.Unstructured]entry, len(entries))
	for i, e := range entries {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion(e.ref.APIVersion())
		o.SetKind(e.ref.Kind)
		o.SetNamespace(e.ref.Namespace)
		o.SetName(e.ref.Name)
		objs[i] = o
		byObj[o] = e
	}
	charts.SortObjects(objs)
	for i, o := range objs {
		entries[i] = byObj[o]
	}
}

// refNames returns the names errors may give objs: with their namespace as
// written and with the release namespace.
func refNames(objs []*unstructured.Unstructured, namespace string) []string {
	var out []string
	for _, o := range objs {
		ref := object.RefOf(o)
		out = append(out, ref.String())
		if ref.Namespace == "" {
			ref.Namespace = namespace
			out = append(out, ref.String())
		}
	}
	return out
}
