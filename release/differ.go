package release

import (
	"context"
	"errors"
	"fmt"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/preflight/modelfit"
	"github.com/vllmctl/vllmctl/release/storage"
)

// DiffOptions are the inputs of `vllmctl diff`.
type DiffOptions struct {
	// Name is the release name.
	Name string
	// Render is the chart and its render options.
	Render RenderInput
	// ForceConflicts and CreateNamespace dry-run as deploy with the same
	// flags would apply.
	ForceConflicts  bool
	CreateNamespace bool
	// SkipPreflight skips the model-fit preflight; ModelFit is where it
	// reads the models' config.json.
	SkipPreflight bool
	ModelFit      modelfit.Source
}

// Diff renders the chart as deploy would (the next revision, an upgrade
// when a revision is deployed, the server's version), applies every object
// with a server-side dry run the way deploy would, and compares the result
// with the live objects; objects of the live revisions the chart no longer
// renders are shown as pruned. Input errors come first (exit code 2),
// before the cluster is asked anything; a model that cannot fit its GPUs
// (the model-fit preflight, unless SkipPreflight) is refused with exit
// code 2 before the dry run.
func (e *Engine) Diff(ctx context.Context, opts DiffOptions) (*diff.Report, error) {
	if err := storage.ValidateName(opts.Name); err != nil {
		return nil, err
	}
	if err := validateRender(ctx, opts.Name, &opts.Render); err != nil {
		return nil, err
	}
	if err := e.check(needStore, needObjects, needClient); err != nil {
		return nil, err
	}
	entries, err := e.Store.List(ctx, opts.Name)
	if err != nil {
		return nil, fmt.Errorf("release %s: read its records: %w", opts.Name, err)
	}
	kv, rc, err := e.RenderCluster(ctx, opts.Name, true)
	if err != nil {
		return nil, err
	}
	plan := storage.PlanOf(entries)
	ro := opts.Render.Options
	ro.ReleaseName = opts.Name
	ro.Revision, ro.IsUpgrade, ro.KubeVersion, ro.Cluster = plan.Revision, plan.Upgrade, kv, rc
	if ro.Previous, err = PreviousValues(ro, plan, entries); err != nil {
		return nil, fmt.Errorf("release %s: %w", opts.Name, err)
	}
	ro.LearnSecrets = e.learnSecrets()
	r, err := charts.RenderContext(ctx, opts.Render.Chart, ro)
	if err != nil {
		return nil, err
	}
	for _, w := range r.Warnings {
		e.emit(opts.Name, 0, PhaseRender, "", "warning", w)
	}
	if !opts.SkipPreflight && opts.ModelFit.Configured() {
		// What deploy would refuse, diff refuses too (exit code 2).
		vm, err := charts.ValuesMapOf(opts.Render.Chart)
		if err != nil {
			return nil, err
		}
		if _, err := runModelFit(ctx, e, e.Client, opts.Name, r.Objects, r.Values, vm, opts.ModelFit); err != nil {
			return nil, err
		}
	}
	crds, err := e.planCRDs(ctx, opts.Name, plan.Revision, r.CRDs, r.Objects)
	if err != nil {
		return nil, err
	}
	rep, err := e.withCRDs(crds).diff(ctx, opts.Name, entries, r.Objects, cluster.ApplyOptions{
		Release:         opts.Name,
		Force:           opts.ForceConflicts,
		CreateNamespace: opts.CreateNamespace,
	})
	if err != nil {
		return rep, err
	}
	rep.Hooks = diffHooks(r.Hooks, e.Namespace(), plan.Upgrade)
	next, err := recordedOfRender(opts.Name, r)
	if err != nil {
		return nil, err
	}
	next.postRenderer = opts.Render.Options.PostRenderer
	changes, err := e.recordedChanges(entries, next)
	if err != nil {
		return nil, err
	}
	rep.SetRecorded(changes)
	return rep, nil
}

// recordedOfRender is what a revision of r would record besides its
// objects (as a deploy without --skip-crds records it).
func recordedOfRender(name string, r *charts.Rendered) (recorded, error) {
	hooks, err := storage.HooksOf(r.Hooks)
	if err != nil {
		return recorded{}, fmt.Errorf("release %s: %w", name, err)
	}
	var crds string
	if len(r.CRDs) > 0 {
		if crds, err = charts.Manifest(r.CRDs); err != nil {
			return recorded{}, &InvalidManifestError{Name: name, Err: err}
		}
	}
	return recorded{hooks: hooks, notes: r.Notes, crdManifest: crds, values: r.Values}, nil
}

// diffHooks lists the rendered hooks the deploy would run (pre- and
// post-upgrade hooks on an upgrade, pre- and post-install on an install)
// as a diff shows them.
func diffHooks(hooks []charts.Hook, namespace string, upgrade bool) []diff.Hook {
	pre, post := charts.HookPreInstall, charts.HookPostInstall
	if upgrade {
		pre, post = charts.HookPreUpgrade, charts.HookPostUpgrade
	}
	var out []diff.Hook
	for _, h := range hooks {
		var events []string
		for _, e := range h.Events {
			if e == pre || e == post {
				events = append(events, string(e))
			}
		}
		if len(events) > 0 {
			out = append(out, diff.Hook{Object: charts.RefIn(h.Object, namespace).String(), Events: events, Weight: h.Weight})
		}
	}
	return out
}

// validateRender renders in once without a cluster, so that every input
// error of the values and the schema is reported with exit code 2 before
// the cluster is asked anything (a template's error waits for the render
// for the cluster, see below). The chart's kubeVersion constraint is checked
// later, against the server's version. With --reuse-values or
// --reset-then-reuse-values the values are only parsed: they are complete
// only with the current revision's, which are read from the cluster (the
// render that counts reports their problems, still before anything is
// applied).
func validateRender(ctx context.Context, name string, in *RenderInput) error {
	if in.Chart == nil {
		return &charts.InputError{Source: "chart", Msg: "no chart to render"}
	}
	ro := in.Options
	if !ro.ResetValues && (ro.ReuseValues || ro.ResetThenReuseValues) {
		_, err := charts.UserValues(ro)
		return err
	}
	ro.ReleaseName = name
	ro.SkipKubeVersionCheck = true
	ro.PostRenderer = nil // run once, by the render that counts
	_, err := charts.RenderContext(ctx, in.Chart, ro)
	var ie *charts.InputError
	if errors.As(err, &ie) && ie.Source == charts.SourceTemplate {
		// A template may fail offline only: one that calls fail unless
		// the cluster serves an API, or unless lookup finds an object.
		// The render for the cluster, still before anything is applied
		// or locked, reports a template that fails there too.
		return nil
	}
	return err
}
