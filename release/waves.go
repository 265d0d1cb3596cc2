// Grouped rollouts: the StatefulSets of a multi-node release's engine
// groups are applied a wave of groups at a time, the next wave only once
// the previous one is Ready (release/groups plans the waves).

package release

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/groups"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// groupWaves plans the deploy's waves: on an upgrade, the groups whose
// live pod template the deploy changes (the dry run's against the live
// one) move wave by wave.
func (p *deployPlan) groupWaves(namespace string, install bool) groups.Plan {
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
			if groups.IsGroup(o) {
				n++
			}
		}
		if k, err := intstr.GetScaledValueFromIntOrPercent(&c.Count, n, true); err == nil {
			first = max(k, 1)
		}
	}
	return groups.PlanWaves(p.objs, changed, p.opts.MaxUnavailable, first)
}

// rollWaves applies the later waves of w one at a time: each wave's
// StatefulSets are applied, their ControllerRevisions recorded, and the
// wave watched until Ready (with every verdict) before the next starts.
// Each wave has the deploy's timeout of its own (its pods load their
// weights as the first wave's did). It returns as the wait does, with the
// diagnosis when it is already known (a refused apply, a revision not
// found).
func (e *Engine) rollWaves(ctx context.Context, rec *storage.Release, res *Result, w groups.Plan, applyOpts cluster.ApplyOptions,
	timeout time.Duration) (wait.Result, *rollout.Diagnosis, error) {
	clk := e.clock()
	for i, wave := range w.Later {
		deadline := storage.Stamp(clk).Add(timeout)
		remaining := func() time.Duration { return max(deadline.Sub(storage.Stamp(clk)), time.Millisecond) }
		e.emit(rec.Name, rec.Revision, PhaseApply, "", "wave",
			fmt.Sprintf("wave %d of %d: group(s) %s (the previous wave is Ready)", i+2, len(w.Later)+1, groups.Names(wave)))
		applied, err := e.Objects.Apply(ctx, wave, applyOpts)
		res.Applied = append(res.Applied, applied...)
		for _, a := range applied {
			e.emit(rec.Name, rec.Revision, PhaseApply, a.Object.String(), string(a.Action), "")
		}
		if err != nil {
			err = fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err)
			return wait.Result{}, applyFailure(err), err
		}
		rctx, cancel := context.WithTimeout(ctx, remaining())
		err = e.discoverReplicaSets(rctx, rec, wave, applied)
		cancel()
		if err != nil {
			if lost := lockLost(err); lost != nil {
				return wait.Result{}, nil, lost
			}
			err = fmt.Errorf("release %s revision %d: find ControllerRevisions: %w", rec.Name, rec.Revision, err)
			return wait.Result{}, replicaSetFailure(err), err
		}
		if wres, err := e.waitObjects(ctx, rec, wave, remaining()); err != nil {
			return wres, nil, err
		}
	}
	return wait.Result{}, nil, nil
}
