// Grouped rollouts: the StatefulSets of a multi-node release's engine
// groups are applied a wave of groups at a time, the next wave only once
// the previous one is Ready.

package release

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// GroupLabel marks a StatefulSet as one engine group of a multi-node
// release (its value is the group's index): such StatefulSets are rolled
// out group by group.
const GroupLabel = "vllmctl.io/group"

// wavePlan is how a deploy rolls its engine groups out: first holds every
// object applied at once (the objects that are not groups, the groups the
// deploy creates or does not change, and the first wave of changed
// groups); later are the next waves, in order.
type wavePlan struct {
	first []*unstructured.Unstructured
	later [][]*unstructured.Unstructured
	// wave1 are the changed groups in first.
	wave1 []*unstructured.Unstructured
	// groups is how many groups change; size how many a wave holds.
	groups, size int
}

// withoutLater returns objs without the groups of the later waves (by
// reference: the canary's transient objects are copies).
func (w wavePlan) withoutLater(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	if len(w.later) == 0 {
		return objs
	}
	later := map[string]bool{}
	for _, wave := range w.later {
		for _, o := range wave {
			later[object.RefOf(o).String()] = true
		}
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if !later[object.RefOf(o).String()] {
			out = append(out, o)
		}
	}
	return out
}

// isGroup reports whether obj is a grouped StatefulSet.
func isGroup(obj *unstructured.Unstructured) bool {
	if !cluster.IsStatefulSet(object.RefOf(obj)) {
		return false
	}
	_, ok := obj.GetLabels()[GroupLabel]
	return ok
}

// groupIndex is a group's index (its label; -1 when not a number).
func groupIndex(obj *unstructured.Unstructured) int {
	n, err := strconv.Atoi(obj.GetLabels()[GroupLabel])
	if err != nil {
		return -1
	}
	return n
}

// planWaves splits objs for a grouped rollout. changed reports whether a
// group's pod template changes (a group that exists and is changed); size
// is how many changed groups a wave holds (maxUnavailable: a count, or a
// percentage of the release's groups, rounded down; 1 at least; default
// 1). first holds at least size changed groups; when first is given
// (canary groups), the first wave holds that many instead. Without changed
// groups, or on an install, everything is in first.
func planWaves(objs []*unstructured.Unstructured, changed func(*unstructured.Unstructured) bool, maxUnavailable *intstr.IntOrString, first int) wavePlan {
	var all, moving []*unstructured.Unstructured
	for _, o := range objs {
		if !isGroup(o) {
			continue
		}
		all = append(all, o)
		if changed(o) {
			moving = append(moving, o)
		}
	}
	size := 1
	if maxUnavailable != nil {
		if n, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, len(all), false); err == nil && n > 1 {
			size = n
		}
	}
	p := wavePlan{groups: len(moving), size: size}
	slices.SortStableFunc(moving, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(cmp.Compare(groupIndex(a), groupIndex(b)), strings.Compare(a.GetName(), b.GetName()))
	})
	head := size
	if first > 0 {
		head = first
	}
	head = min(head, len(moving))
	p.wave1 = moving[:head]
	later := map[*unstructured.Unstructured]bool{}
	for i := head; i < len(moving); i += size {
		wave := moving[i:min(i+size, len(moving))]
		p.later = append(p.later, wave)
		for _, o := range wave {
			later[o] = true
		}
	}
	for _, o := range objs {
		if !later[o] {
			p.first = append(p.first, o)
		}
	}
	return p
}

// groupWaves plans the deploy's waves: on an upgrade, the groups whose
// live pod template the deploy changes (the dry run's against the live
// one) move wave by wave.
func (p *deployPlan) groupWaves(namespace string, install bool) wavePlan {
	changed := func(o *unstructured.Unstructured) bool {
		if install {
			return false
		}
		key := charts.RefIn(o, namespace).String()
		live := p.known[key]
		if live == nil {
			return false
		}
		want := p.dryRun[key]
		if want == nil {
			want = o
		}
		return !canary.SameTemplate(live, want)
	}
	first := 0
	if c := p.opts.Canary; c != nil && !install {
		n := 0
		for _, o := range p.objs {
			if isGroup(o) {
				n++
			}
		}
		if k, err := intstr.GetScaledValueFromIntOrPercent(&c.Count, n, true); err == nil {
			first = max(k, 1)
		}
	}
	return planWaves(p.objs, changed, p.opts.MaxUnavailable, first)
}

// groupNames lists the groups of a wave.
func groupNames(wave []*unstructured.Unstructured) string {
	names := make([]string, len(wave))
	for i, o := range wave {
		names[i] = o.GetName()
	}
	return strings.Join(names, ", ")
}

// rollWaves applies the later waves of w one at a time: each wave's
// StatefulSets are applied, their ControllerRevisions recorded, and the
// wave watched until Ready (with every verdict) before the next starts.
// Each wave has the deploy's timeout of its own (its pods load their
// weights as the first wave's did). It returns as the wait does, with the
// diagnosis when it is already known (a refused apply, a revision not
// found).
func (d *Engine) rollWaves(ctx context.Context, rec *storage.Release, res *Result, w wavePlan, applyOpts cluster.ApplyOptions,
	timeout time.Duration) (wait.Result, *rollout.Diagnosis, error) {
	clk := d.clock()
	for i, wave := range w.later {
		deadline := storage.Stamp(clk).Add(timeout)
		remaining := func() time.Duration { return max(deadline.Sub(storage.Stamp(clk)), time.Millisecond) }
		d.emit(rec.Name, rec.Revision, PhaseApply, "", "wave",
			fmt.Sprintf("wave %d of %d: group(s) %s (the previous wave is Ready)", i+2, len(w.later)+1, groupNames(wave)))
		applied, err := d.Objects.Apply(ctx, wave, applyOpts)
		res.Applied = append(res.Applied, applied...)
		for _, a := range applied {
			d.emit(rec.Name, rec.Revision, PhaseApply, a.Object.String(), string(a.Action), "")
		}
		if err != nil {
			err = fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err)
			return wait.Result{}, applyFailure(err), err
		}
		rctx, cancel := context.WithTimeout(ctx, remaining())
		err = d.discoverReplicaSets(rctx, rec, wave, applied)
		cancel()
		if err != nil {
			if lost := lockLost(err); lost != nil {
				return wait.Result{}, nil, lost
			}
			err = fmt.Errorf("release %s revision %d: find ControllerRevisions: %w", rec.Name, rec.Revision, err)
			return wait.Result{}, replicaSetFailure(err), err
		}
		if wres, err := d.waitObjects(ctx, rec, wave, remaining()); err != nil {
			return wres, nil, err
		}
	}
	return wait.Result{}, nil, nil
}
