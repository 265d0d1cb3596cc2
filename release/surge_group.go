// Temporary surge groups: with --max-surge, a grouped upgrade first adds
// copies of the first changed groups on the new revision, so the release
// keeps its serving capacity while its groups are replaced wave by wave,
// and deletes them once the upgrade ended.

package release

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/preflight"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// SurgeLabel marks a temporary surge group (value "true"): it is in no
// revision's manifest, and a deploy deletes it once the upgrade ended (or
// finds it left behind by an interrupted one).
const SurgeLabel = "vllmctl.io/surge-group"

// surgeSuffix is added to a group's name (and its group label) to name its
// temporary copy.
const surgeSuffix = "-surge"

// maxStatefulSetName is the longest StatefulSet name whose pods' revision
// label (name-hash) stays within a label's 63 characters.
const maxStatefulSetName = 52

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
	if w.groups == 0 {
		return nil
	}
	total := 0
	for _, o := range p.objs {
		if isGroup(o) {
			total++
		}
	}
	k, err := intstr.GetScaledValueFromIntOrPercent(p.opts.MaxSurge, total, true)
	if err != nil || k <= 0 {
		return nil
	}
	moving := slices.Clone(w.wave1)
	for _, wave := range w.later {
		moving = append(moving, wave...)
	}
	var out []*unstructured.Unstructured
	for _, g := range moving[:min(k, len(moving))] {
		if c, err := surgeCopy(g); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// surgeCopy returns the temporary copy of group g: named g's name plus
// surgeSuffix, its group label (in its labels, selector, pod template and
// anywhere its pod template names it, as an anti-affinity term does)
// suffixed likewise so that the two never select each other's pods,
// labelled SurgeLabel, and with every reference to one of g's pods by its
// stable DNS name (g-<ordinal>.) in its pod template pointing at the
// copy's pod of that ordinal instead (a multi-node group's leader
// address).
func surgeCopy(g *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	base := g.GetName()
	name := base + surgeSuffix
	if len(name) > maxStatefulSetName {
		return nil, fmt.Errorf("StatefulSet %s: its surge copy's name %s is longer than %d characters", base, name, maxStatefulSetName)
	}
	c := g.DeepCopy()
	c.SetName(name)
	c.SetResourceVersion("")
	c.SetUID("")
	pods := regexp.MustCompile(`(^|[^a-z0-9.-])` + regexp.QuoteMeta(base) + `-([0-9]+)\.`)
	c.Object = rewrite(c.Object, func(key string, v any) any {
		s, ok := v.(string)
		if !ok {
			return v
		}
		if key == GroupLabel {
			return s + surgeSuffix
		}
		return pods.ReplaceAllString(s, "${1}"+name+"-${2}.")
	}).(map[string]any)
	c.SetName(name)
	labels := c.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[SurgeLabel] = "true"
	c.SetLabels(labels)
	return c, nil
}

// rewrite returns v with every string value replaced by fn(key, value),
// key being the map key it stands under ("" in lists).
func rewrite(v any, fn func(key string, v any) any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			switch e.(type) {
			case map[string]any, []any:
				t[k] = rewrite(e, fn)
			default:
				t[k] = fn(k, e)
			}
		}
		return t
	case []any:
		for i, e := range t {
			switch e.(type) {
			case map[string]any, []any:
				t[i] = rewrite(e, fn)
			default:
				t[i] = fn("", e)
			}
		}
		return t
	}
	return v
}

// surgeRefused reports whether err is a preflight refusal of surge groups
// only.
func surgeRefused(err error, surge []*unstructured.Unstructured) bool {
	var pe *preflight.Error
	if !errors.As(err, &pe) || len(pe.Refused) > 0 || len(pe.RefusedGroups) == 0 {
		return false
	}
	for _, g := range pe.RefusedGroups {
		if !slices.ContainsFunc(surge, func(s *unstructured.Unstructured) bool { return s.GetName() == g.StatefulSet }) {
			return false
		}
	}
	return true
}

// addSurge applies the temporary surge groups and waits until they rolled
// out (every verdict applies to their pods), before the first wave
// replaces a group, within timeout. It returns as the wait does, with the
// diagnosis when already known (a refused apply).
func (d *Engine) addSurge(ctx context.Context, rec *storage.Release, res *Result, surge []*unstructured.Unstructured,
	applyOpts cluster.ApplyOptions, timeout time.Duration) (wait.Result, *rollout.Diagnosis, error) {
	d.emit(rec.Name, rec.Revision, PhaseApply, "", "surge",
		fmt.Sprintf("temporary group(s) %s on the new revision first (--max-surge), deleted once the upgrade ended", groupNames(surge)))
	applied, err := d.Objects.Apply(ctx, surge, applyOpts)
	res.Applied = append(res.Applied, applied...)
	for _, a := range applied {
		d.emit(rec.Name, rec.Revision, PhaseApply, a.Object.String(), string(a.Action), "temporary surge group")
	}
	if err != nil {
		err = fmt.Errorf("release %s revision %d: surge group: %w", rec.Name, rec.Revision, err)
		return wait.Result{}, applyFailure(err), err
	}
	wres, err := d.waitObjects(ctx, rec, surge, timeout)
	return wres, nil, err
}

// removeSurge deletes the release's temporary surge groups: the ones this
// deploy added and any an interrupted deploy left behind (found by their
// labels), on a context of its own (it runs after an interrupt too). Each
// deletion is reported; an error is returned joined.
func (d *Engine) removeSurge(ctx context.Context, rec *storage.Release) error {
	rctx, cancel := storage.FinishContext(ctx)
	defer cancel()
	sel := SurgeLabel + "=true," + owner.LabelRelease + "=" + rec.Name
	list, err := d.Client.AppsV1().StatefulSets(d.Namespace()).List(rctx, metav1.ListOptions{LabelSelector: sel})
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
		r, err := d.Objects.Delete(rctx, u, cluster.PruneOptions{Release: rec.Name, Namespace: d.Namespace()})
		d.emit(rec.Name, rec.Revision, PhasePrune, r.Object.String(), string(r.Action), "temporary surge group")
		if err != nil {
			errs = append(errs, fmt.Errorf("release %s: delete temporary surge group %s: %w", rec.Name, s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// hasGroups reports whether objs hold an engine group.
func hasGroups(objs []*unstructured.Unstructured) bool {
	return slices.ContainsFunc(objs, isGroup)
}

// warnIf reports err as a warning of rec's operation (nothing when nil).
func (d *Engine) warnIf(rec *storage.Release, err error) {
	if err != nil {
		d.emit(rec.Name, rec.Revision, PhasePrune, "", "warning", err.Error())
	}
}
