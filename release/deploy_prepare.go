package release

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/groups"
	"github.com/vllmctl/vllmctl/release/preflight"
	"github.com/vllmctl/vllmctl/release/preflight/modelfit"
	"github.com/vllmctl/vllmctl/release/servecheck"
	"github.com/vllmctl/vllmctl/release/storage"
)

// RenderCluster is what a render for the engine's cluster takes from
// it, as `helm upgrade` renders: .Capabilities.KubeVersion from the
// server's version (charts.KubeVersion), .Capabilities.APIVersions from
// its discovery (with the chart's crds/ when withCRDs: the deploy creates
// them first, as `helm install` does) and a lookup it answers. Discovery
// is read once per engine; its warning (an API group that cannot be
// discovered) goes to the progress of release name.
func (e *Engine) RenderCluster(ctx context.Context, name string, withCRDs bool) (string, *charts.Cluster, error) {
	if e.discovered == nil {
		d, err := cluster.Discover(ctx, e.Client.Discovery())
		if err != nil {
			return "", nil, fmt.Errorf("release %s: %w", name, err)
		}
		if d.Warning != "" {
			e.emit(name, 0, PhaseRender, "", "warning", d.Warning)
		}
		e.discovered = d
	}
	c := &charts.Cluster{APIVersions: e.discovered.APIVersions, WithChartCRDs: withCRDs}
	if e.Lookup != nil {
		c.Lookup = e.Lookup(ctx, e.discovered.APIVersions)
	}
	return charts.KubeVersion("", e.discovered.KubeVersion), c, nil
}

// deployPlan is what a deploy applies and what it learnt before applying
// it.
type deployPlan struct {
	opts DeployOptions
	// plan is the revision the objects were rendered for.
	plan        storage.Plan
	kubeVersion string
	// cluster is what the render reads of the cluster (API versions,
	// lookup).
	cluster *charts.Cluster

	chart  storage.Chart
	values map[string]any
	// computed are the values the templates saw, notes the rendered
	// NOTES.txt (both recorded).
	computed map[string]any
	notes    string
	objs     []*unstructured.Unstructured
	manifest string
	// hooks are the chart's hooks (helm.sh/hook), as recorded.
	hooks []storage.Hook

	// preflight is the capacity preflight's report (nil: skipped or no
	// Deployment).
	preflight *preflight.Report
	// modelFit is the model-fit preflight's report (nil: not run yet, or
	// skipped).
	modelFit *modelfit.Report
	// diff is what the deploy changes (nil: not computed, or the dry run
	// was refused: the apply reports it).
	diff *diff.Report
	// known are the live objects the dry run read, for the apply, and
	// dryRun the dry run's outcomes (both by object.Ref.String()).
	known, dryRun map[string]*unstructured.Unstructured

	// deployed are the objects of the release's deployed revision (nil on
	// a first install): what a canary's decision compares the pod
	// templates with.
	deployed []*unstructured.Unstructured

	// seen are the records Acquire listed as it took the lock (nil: it
	// took a pending record over, or has not run), and underLock the
	// release's records other than the held one as known under the lock
	// (nil: unknown): read once, never listed again while the lock is held.
	seen, underLock []storage.Entry
	// surge are the temporary surge groups of a grouped upgrade with
	// --max-surge that the preflight let through (surge_group.go).
	surge []*unstructured.Unstructured
	// hpas are the live HPAs the deploy's dry run listed, for its apply.
	hpas cluster.LiveHPAs
	// renderWarnings are the render's notes for stderr (e.g. a dependency
	// left out because it is disabled and not vendored).
	renderWarnings []string

	// crdObjs are the chart's crds/ and crds what
	// the deploy does with them (nil: nothing; see crds.go).
	crdObjs []*unstructured.Unstructured
	crds    *crdPlan

	// analysis is the canary analysis the deploy runs (nil: none): the
	// --analysis file's, or the built-in chart's analysis values'.
	analysis *analysis.Config
}

// prepare renders the chart for plan and prepares the objects.
func (e *Engine) prepare(ctx context.Context, opts DeployOptions, plan storage.Plan, entries []storage.Entry) (*deployPlan, error) {
	opts.Render.Options.LearnSecrets = e.learnSecrets()
	p := &deployPlan{opts: opts}
	kv, rc, err := e.RenderCluster(ctx, opts.Name, !opts.SkipCRDs)
	if err != nil {
		return nil, err
	}
	p.kubeVersion, p.cluster = kv, rc
	if err := p.build(ctx, plan, entries); err != nil {
		return nil, err
	}
	e.Redactor.AddObjects(p.objs...)
	if _, err := servecheck.Resolve(p.chart, p.computed, e.ServeCheck); err != nil {
		return nil, fmt.Errorf("release %s: %w", opts.Name, err)
	}
	if err := e.planDeployCRDs(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

// build renders the objects for plan (after the records entries) and
// applies the strategy overrides: the flags', then the preflight's.
func (p *deployPlan) build(ctx context.Context, plan storage.Plan, entries []storage.Entry) error {
	opts := p.opts
	p.plan = plan
	in := opts.Render
	ro := in.Options
	ro.ReleaseName = opts.Name
	ro.Revision, ro.IsUpgrade, ro.KubeVersion, ro.Cluster = plan.Revision, plan.Upgrade, p.kubeVersion, p.cluster
	prev, err := PreviousValues(ro, plan, entries)
	if err != nil {
		return err
	}
	ro.Previous = prev
	r, err := charts.RenderContext(ctx, in.Chart, ro)
	if err != nil {
		return err
	}
	p.renderWarnings = r.Warnings
	p.crdObjs = r.CRDs
	p.chart = storage.Chart{Name: r.Chart.Name, Version: r.Chart.Version, AppVersion: r.Chart.AppVersion, Source: in.Source, Digest: in.Digest, Signer: in.Signer, SignedDigest: in.SignedDigest,
		Builtin: in.Builtin}
	if p.chart.ValuesMap, err = charts.ValuesMapOf(in.Chart); err != nil {
		return err
	}
	p.values, p.computed, p.notes = r.UserValues, r.Values, r.Notes
	if p.analysis, err = analysis.Of(opts.Analysis, in.Chart.Values, r.Values, opts.Canary != nil, opts.Prometheus != nil); err != nil {
		return err
	}
	if p.hooks, err = storage.HooksOf(r.Hooks); err != nil {
		return fmt.Errorf("release %s: %w", opts.Name, err)
	}
	objs, manifest, err := prepareObjects(opts.Name, r.Objects, r.Manifest, opts.MaxSurge, opts.MaxUnavailable)
	if err != nil {
		return err
	}
	p.objs, p.manifest = objs, manifest
	if p.adjusts() {
		return p.adjust()
	}
	return nil
}

// adjusts reports whether the preflight changes the objects' strategy:
// never for a canary, whose transient strategy is applied at the rollout
// and never recorded.
func (p *deployPlan) adjusts() bool {
	return p.preflight != nil && p.preflight.Changed() && p.opts.Canary == nil
}

// knownDeployment returns the preflight's view of what the deploy's dry
// run read of a Deployment: its live copy and the dry run's outcome.
func (p *deployPlan) knownDeployment(namespace string) func(ns, name string) (live, applied *unstructured.Unstructured, ok bool) {
	refs := map[[2]string]string{}
	for _, o := range p.objs {
		if r := charts.RefIn(o, namespace); r.IsDeployment() {
			refs[[2]string{r.Namespace, r.Name}] = r.String()
		}
	}
	return func(ns, name string) (*unstructured.Unstructured, *unstructured.Unstructured, bool) {
		key, ok := refs[[2]string{ns, name}]
		if !ok {
			return nil, nil, false
		}
		live, ok := p.known[key]
		return live, p.dryRun[key], ok
	}
}

// adjust applies the preflight's strategy changes to the objects.
func (p *deployPlan) adjust() error {
	objs, err := preflight.ApplyOverrides(p.objs, p.preflight)
	if err != nil {
		return err
	}
	manifest, err := charts.Manifest(objs)
	if err != nil {
		return &InvalidManifestError{Name: p.opts.Name, Err: err}
	}
	p.objs, p.manifest = objs, manifest
	if desc := p.preflight.Description(); !strings.Contains(p.opts.Note, desc) {
		p.opts.Note = joinNotes(p.opts.Note, desc)
	}
	return nil
}

// prepareObjects applies the strategy override of surge and unavailable
// to the rendered objects (the deploy's own) and returns them with the
// manifest to record.
func prepareObjects(name string, objs []*unstructured.Unstructured, manifest string, surge, unavailable *intstr.IntOrString) ([]*unstructured.Unstructured, string, error) {
	if surge == nil && unavailable == nil {
		return objs, manifest, nil
	}
	for _, o := range objs {
		if object.RefOf(o).IsDeployment() {
			if err := preflight.SetStrategy(o, surge, unavailable); err != nil {
				return nil, "", &InvalidManifestError{Name: name, Err: err}
			}
		}
	}
	m, err := charts.Manifest(objs)
	if err != nil {
		return nil, "", &InvalidManifestError{Name: name, Err: err}
	}
	return objs, m, nil
}

// preflight runs the capacity preflight (unless skipped): a refusal is an
// error with exit code 2, before anything is applied or recorded; a
// strategy the surge policy changed is applied to the objects.
func (e *Engine) preflight(ctx context.Context, p *deployPlan) error {
	opts := p.opts
	p.surge = p.surgeGroups(e.Namespace(), !p.plan.Upgrade)
	if opts.SkipPreflight {
		return nil
	}
	if err := e.checkModelFit(ctx, p); err != nil {
		return err
	}
	policy := opts.SurgePolicy
	if policy == "" {
		policy = preflight.SurgePolicyAuto
	}
	pfOpts := preflight.Options{
		Namespace:      e.Namespace(),
		Release:        opts.Name,
		Policy:         policy,
		MaxSurge:       opts.MaxSurge,
		MaxUnavailable: opts.MaxUnavailable,
		PodClient:      e.PodClient,
	}
	if p.modelFit != nil {
		// The model-fit check listed every node: not listed again.
		pfOpts.Nodes = p.modelFit.Nodes
	}
	pfOpts.OnHPAs = p.hpas.Seed
	if p.known != nil {
		// The deploy's dry run already read the Deployments and listed
		// the HPAs: the preflight reads neither again.
		pfOpts.Known, pfOpts.HPAs = p.knownDeployment(e.Namespace()), p.hpas.Listed
	}
	if targets := p.canaryTargets(e.Namespace()); len(targets) > 0 {
		// The canary phase surges by each target's canary count with
		// nothing unavailable: its extra pods must fit.
		zero := intstr.FromInt32(0)
		pfOpts.Overrides = func(ns, name string) (*intstr.IntOrString, *intstr.IntOrString) {
			t := canary.TargetOf(targets, object.Ref{Group: "apps", Kind: "Deployment", Namespace: ns, Name: name})
			if t == nil {
				return nil, nil
			}
			surge := intstr.FromInt32(t.Pods)
			return &surge, &zero
		}
	}
	// Temporary surge groups (--max-surge on a grouped upgrade) must
	// gang-fit next to the groups; under the auto policy an upgrade whose
	// surge groups alone do not fit goes without them.
	objs := p.objs
	if len(p.surge) > 0 {
		objs = append(slices.Clone(p.objs), p.surge...)
	}
	report, err := preflight.Run(ctx, e.Client, objs, pfOpts)
	if err != nil && policy == preflight.SurgePolicyAuto && groups.SurgeRefused(err, p.surge) {
		p.opts.Note = joinNotes(p.opts.Note, fmt.Sprintf("no temporary surge group: %s would not fit (--max-surge)", groups.Names(p.surge)))
		p.surge = nil
		report, err = preflight.Run(ctx, e.Client, p.objs, pfOpts)
	}
	if report != nil && (len(report.Deployments) > 0 || len(report.Groups) > 0) {
		e.emitEvent(ProgressEvent{Release: opts.Name, Phase: PhasePreflight, Preflight: report})
		p.preflight = report
	}
	if err != nil {
		return err
	}
	if p.adjusts() {
		return p.adjust()
	}
	return nil
}

// preflightAdjusts is preflight, reporting whether it changed the objects.
func (e *Engine) preflightAdjusts(ctx context.Context, p *deployPlan) (bool, error) {
	before := p.manifest
	if err := e.preflight(ctx, p); err != nil {
		return false, err
	}
	return p.manifest != before, nil
}

// changes computes what the deploy changes, from one server-side dry run
// of every object: emitted with Diff, and the base of the up-to-date
// check. A dry run the cluster refuses refuses the deploy before the lock,
// with nothing applied (*DryRunError).
//
// The same dry run reads the live copies of the objects: one that exists
// without the release's labels (another release's, or made by other
// means) refuses the deploy (*OwnershipError) unless TakeOwnership adopts
// it, which the revision's description then says.
func (e *Engine) changes(ctx context.Context, p *deployPlan, entries []storage.Entry) error {
	rep, known, dry, err := e.withCRDs(p.crds).diffLive(ctx, p.opts.Name, entries, p.objs, p.applyOptions(p.opts.Name))
	if err != nil {
		// Whose objects they are comes first: a refused dry run may be
		// the consequence (another release's immutable selector).
		if live, gerr := e.withCRDs(p.crds).liveCopies(ctx, p.objs); gerr == nil && !p.opts.TakeOwnership {
			if foreign := foreignObjects(p.opts.Name, e.Namespace(), live); len(foreign) > 0 {
				return &OwnershipError{Name: p.opts.Name, Objects: foreign}
			}
		}
		return &DryRunError{Name: p.opts.Name, Err: err}
	}
	var live []*unstructured.Unstructured
	for _, l := range known {
		live = append(live, l)
	}
	if foreign := foreignObjects(p.opts.Name, e.Namespace(), live); len(foreign) > 0 {
		if !p.opts.TakeOwnership {
			return &OwnershipError{Name: p.opts.Name, Objects: foreign}
		}
		p.opts.Note = joinNotes(p.opts.Note, ownershipNote(foreign))
	}
	// What the record keeps besides the objects counts as much: a change
	// to a hook alone is a new revision whose hooks run. CRDs the record
	// cannot keep (too large) are compared as the record would keep them:
	// none.
	crds, _ := p.crdManifest()
	recorded, err := e.recordedChanges(entries, recorded{hooks: p.hooks, notes: p.notes, crdManifest: crds, values: p.computed, postRenderer: p.opts.Render.Options.PostRenderer})
	if err != nil {
		return err
	}
	rep.SetRecorded(recorded)
	p.diff, p.known, p.dryRun = rep, known, dry
	return nil
}

// emitDiff emits what the deploy changes (a PhaseDiff event), when asked.
func (e *Engine) emitDiff(p *deployPlan) {
	if p.opts.Diff && p.diff != nil {
		e.emitEvent(ProgressEvent{Release: p.opts.Name, Phase: PhaseDiff, Diff: p.diff})
	}
}

// applyOptions are the options of the deploy's apply (and of its dry runs).
func (p *deployPlan) applyOptions(name string) cluster.ApplyOptions {
	return cluster.ApplyOptions{
		Release:         name,
		Force:           p.opts.ForceConflicts,
		CreateNamespace: p.opts.CreateNamespace,
		LiveHPAs:        &p.hpas,
	}
}

// diff computes what applying objs would change, from a server-side dry
// run against the live objects, and which objects of the live revisions of
// entries the deploy would prune.
func (e *Engine) diff(ctx context.Context, name string, entries []storage.Entry, objs []*unstructured.Unstructured, applyOpts cluster.ApplyOptions) (*diff.Report, error) {
	rep, _, _, err := e.diffLive(ctx, name, entries, objs, applyOpts)
	return rep, err
}

// diffLive is diff, also returning the live copies of objs it read, by
// object.Ref.String() (a nil value: absent): what the deploy's apply need
// not read again, and whose owner the deploy checks; and the dry run's
// outcome for each object it validated, for the capacity preflight.
func (e *Engine) diffLive(ctx context.Context, name string, entries []storage.Entry, objs []*unstructured.Unstructured,
	applyOpts cluster.ApplyOptions) (rep *diff.Report, known, dry map[string]*unstructured.Unstructured, err error) {
	previous, err := PreviousObjects(entries)
	if err != nil {
		return nil, nil, nil, err
	}
	e.Redactor.AddObjects(previous...)
	applyOpts.Namespace = e.Namespace()
	wanted := map[string]bool{}
	for _, o := range objs {
		wanted[charts.RefIn(o, e.Namespace()).String()] = true
	}
	cluster := cluster.NewDiffCluster(e.Objects, applyOpts)
	var mu sync.Mutex
	known, dry = map[string]*unstructured.Unstructured{}, map[string]*unstructured.Unstructured{}
	note := func(ref string, live *unstructured.Unstructured) {
		if wanted[ref] {
			mu.Lock()
			known[ref] = live
			mu.Unlock()
		}
	}
	dryRun, get := cluster.DryRun, cluster.Get
	cluster.DryRun = func(ctx context.Context, objs []*unstructured.Unstructured) ([]diff.DryRunResult, error) {
		results, err := dryRun(ctx, objs)
		for _, r := range results {
			if r.Object == nil {
				continue
			}
			ref := object.RefOf(r.Object).String()
			if r.LiveRead {
				note(ref, r.Live)
			}
			if !r.Unvalidated && wanted[ref] {
				mu.Lock()
				dry[ref] = r.Object
				mu.Unlock()
			}
		}
		return results, err
	}
	cluster.Get = func(ctx context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error) {
		l, err := get(ctx, obj, namespace)
		if err == nil {
			note(charts.RefIn(obj, namespace).String(), l)
		}
		return l, err
	}
	rep, err = diff.Compute(ctx, cluster, objs, diff.Options{
		Release:   name,
		Namespace: e.Namespace(),
		Previous:  previous,
	})
	return rep, known, dry, err
}

// liveCopies reads the live copies of objs (absent ones left out).
func (e *Engine) liveCopies(ctx context.Context, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		l, err := e.Objects.Get(ctx, o, e.Namespace())
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// joinNotes joins description notes with "; ".
func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// healthyDeployed returns the status of the newest of entries when it is
// deployed and every one of its objects is Current, else nil.
func (e *Engine) healthyDeployed(ctx context.Context, entries []storage.Entry) (*StatusReport, error) {
	if len(entries) == 0 || entries[len(entries)-1].Status != storage.StatusDeployed {
		return nil, nil
	}
	rec, err := entries[len(entries)-1].Release()
	if err != nil {
		return nil, err
	}
	status, err := e.StatusOf(ctx, rec)
	if err != nil {
		return nil, err
	}
	for _, o := range status.Objects {
		if o.Status != string(rollout.StatusCurrent) {
			return nil, nil
		}
	}
	return status, nil
}

// upToDateResult is the result document of a deploy that changed nothing.
func upToDateResult(s *StatusReport, start time.Time, clk clock.PassiveClock) *Result {
	return &Result{
		Release:         s.Release,
		Namespace:       s.Namespace,
		Revision:        s.Revision,
		Status:          s.Status,
		ChartInfo:       s.ChartInfo,
		ReplicaSets:     s.RecordedReplicaSets,
		Description:     "up to date: " + s.Description,
		UpToDate:        true,
		DurationSeconds: storage.Stamp(clk).Sub(start).Seconds(),
	}
}

// sameEntries reports whether a and b list the same revisions with the
// same statuses.
func sameEntries(a, b []storage.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Revision != b[i].Revision || a[i].Status != b[i].Status {
			return false
		}
	}
	return true
}

// without returns entries less revision rev.
func without(entries []storage.Entry, rev int) []storage.Entry {
	out := make([]storage.Entry, 0, len(entries))
	for _, e := range entries {
		if e.Revision != rev {
			out = append(out, e)
		}
	}
	return out
}
