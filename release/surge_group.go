// Temporary surge groups: with --max-surge, a grouped upgrade first adds
// copies of the first changed groups on the new revision, so the release
// keeps its serving capacity while its groups are replaced wave by wave,
// and deletes them once the upgrade ended (release/groups makes the
// copies).

package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/groups"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// surgeGroups returns the temporary groups of a grouped upgrade with
// --max-surge: copies of the first k changed groups as rendered (k:
// MaxSurge, a count or a percentage of the release's groups rounded up;
// at most the changed groups), none on an install or without changed
// groups. A copy whose name would be too long is left out.
func (p *deployPlan) surgeGroups(namespace string, install bool) []*unstructured.Unstructured {
	if p.opts.MaxSurge == nil || install {
		return nil
	}
	w := p.groupWaves(namespace, install)
	if w.Groups == 0 {
		return nil
	}
	total := 0
	for _, o := range p.objs {
		if groups.IsGroup(o) {
			total++
		}
	}
	k, err := intstr.GetScaledValueFromIntOrPercent(p.opts.MaxSurge, total, true)
	if err != nil || k <= 0 {
		return nil
	}
	moving := slices.Clone(w.Wave1)
	for _, wave := range w.Later {
		moving = append(moving, wave...)
	}
	var out []*unstructured.Unstructured
	for _, g := range moving[:min(k, len(moving))] {
		if c, err := groups.SurgeCopy(g); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// addSurge applies the temporary surge groups and waits until they rolled
// out (every verdict applies to their pods), before the first wave
// replaces a group, within timeout. It returns as the wait does, with the
// diagnosis when already known (a refused apply).
func (e *Engine) addSurge(ctx context.Context, rec *storage.Release, res *Result, surge []*unstructured.Unstructured,
	applyOpts cluster.ApplyOptions, timeout time.Duration) (wait.Result, *rollout.Diagnosis, error) {
	e.emit(rec.Name, rec.Revision, PhaseApply, "", "surge",
		fmt.Sprintf("temporary group(s) %s on the new revision first (--max-surge), deleted once the upgrade ended", groups.Names(surge)))
	applied, err := e.Objects.Apply(ctx, surge, applyOpts)
	res.Applied = append(res.Applied, applied...)
	for _, a := range applied {
		e.emit(rec.Name, rec.Revision, PhaseApply, a.Object.String(), string(a.Action), "temporary surge group")
	}
	if err != nil {
		err = fmt.Errorf("release %s revision %d: surge group: %w", rec.Name, rec.Revision, err)
		return wait.Result{}, applyFailure(err), err
	}
	wres, err := e.waitObjects(ctx, rec, surge, timeout)
	return wres, nil, err
}

// removeSurge deletes the release's temporary surge groups: the ones this
// deploy added and any an interrupted deploy left behind (found by their
// labels), on a context of its own (it runs after an interrupt too). Each
// deletion is reported; an error is returned joined.
func (e *Engine) removeSurge(ctx context.Context, rec *storage.Release) error {
	rctx, cancel := storage.FinishContext(ctx)
	defer cancel()
	sel := groups.SurgeLabel + "=true," + owner.LabelRelease + "=" + rec.Name
	list, err := e.Client.AppsV1().StatefulSets(e.Namespace()).List(rctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("release %s: list temporary surge groups: %w", rec.Name, err)
	}
	var errs []error
	for i := range list.Items {
		s := &list.Items[i]
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind("StatefulSet")
		u.SetNamespace(s.Namespace)
		u.SetName(s.Name)
		r, err := e.Objects.Delete(rctx, u, cluster.PruneOptions{Release: rec.Name, Namespace: e.Namespace()})
		e.emit(rec.Name, rec.Revision, PhasePrune, r.Object.String(), string(r.Action), "temporary surge group")
		if err != nil {
			errs = append(errs, fmt.Errorf("release %s: delete temporary surge group %s: %w", rec.Name, s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// warnIf reports err as a warning of rec's operation (nothing when nil).
func (e *Engine) warnIf(rec *storage.Release, err error) {
	if err != nil {
		e.emit(rec.Name, rec.Revision, PhasePrune, "", "warning", err.Error())
	}
}
