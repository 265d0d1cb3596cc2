package release

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// canaryDeploy is the canary of one deploy: the Deployments it holds, the
// objects applied with the transient strategy, and its phase machine.
type canaryDeploy struct {
	targets []canaryTarget
	objs    []*unstructured.Unstructured
	// groups are the engine groups (StatefulSets) held as the canary of a
	// multi-node release: the first wave, applied with the chart's own
	// strategy (a group is all-or-nothing), watched and held before the
	// next waves start.
	groups []*unstructured.Unstructured
	run    *canaryRun
}

// planCanary prepares the canary of a deploy that asked for one, and
// records its report in rec and res. There is none (nil, and the report
// says skipped) on a first install (no pods to hold a canary next to) or
// when no Deployment's pod template differs from the deployed revision's.
func (d *Engine) planCanary(p *deployPlan, rec *storage.Release, res *Result, install bool, waves wavePlan) (*canaryDeploy, error) {
	o := p.opts.Canary
	if o == nil {
		return nil, nil
	}
	report := newCanaryReport(*o)
	rec.Canary, res.Canary = report, report
	skip := func(reason string) (*canaryDeploy, error) {
		report.Outcome, report.Reason = storage.CanarySkipped, reason
		d.emit(rec.Name, rec.Revision, PhaseCanary, "", storage.CanarySkipped, reason)
		if p.analysis != nil {
			d.emit(rec.Name, rec.Revision, PhaseAnalysis, "", "skipped", "no canary to analyse")
		}
		return nil, nil
	}
	if install {
		return skip("first install: there are no pods of a previous revision to hold a canary next to")
	}
	targets := p.canaryTargets(d.Namespace())
	if len(targets) == 0 && len(waves.wave1) > 0 {
		for _, g := range waves.wave1 {
			d.emit(rec.Name, rec.Revision, PhaseCanary, "StatefulSet "+refIn(g, d.Namespace()).Namespace+"/"+g.GetName(), "planned",
				fmt.Sprintf("engine group held as the canary (%d pod(s)); the next wave starts once it passed", replicasOf(g)))
		}
		return &canaryDeploy{objs: p.objs, groups: waves.wave1}, nil
	}
	if len(targets) == 0 {
		return skip("no Deployment's pod template differs from the deployed revision's: nothing to hold")
	}
	objs, err := canaryObjects(p.objs, targets, rec.Revision, d.Namespace())
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		d.emit(rec.Name, rec.Revision, PhaseCanary, "Deployment "+t.ref.Namespace+"/"+t.ref.Name, "planned",
			fmt.Sprintf("%d canary pod(s) of %d first (maxSurge %d, maxUnavailable 0 until promoted)", t.pods, t.replicas, t.pods))
	}
	return &canaryDeploy{targets: targets, objs: objs}, nil
}

// canaryTargets are the Deployments a canary of this deploy holds (none
// without --canary): see the function of the same name.
func (p *deployPlan) canaryTargets(namespace string) []canaryTarget {
	if p.opts.Canary == nil {
		return nil
	}
	return canaryTargets(p.objs, p.deployed, p.known, p.dryRun, p.opts.Canary.Count, namespace)
}

// readDeployed sets p.deployed from entries when the deploy asked for a
// canary (only a canary's decision needs the deployed revision's objects).
func (p *deployPlan) readDeployed(entries []storage.Entry) error {
	if p.opts.Canary == nil {
		return nil
	}
	deployed, err := deployedObjects(entries)
	if err != nil {
		return err
	}
	p.deployed = deployed
	return nil
}

// deployedObjects returns the objects of the deployed revision among
// entries (the highest one; nil when none is deployed).
func deployedObjects(entries []storage.Entry) ([]*unstructured.Unstructured, error) {
	for _, e := range slices.Backward(entries) {
		if e.Status != storage.StatusDeployed {
			continue
		}
		r, err := e.Release()
		if err != nil {
			return nil, err
		}
		objs, err := cluster.ParseManifest(r.Manifest)
		if err != nil {
			return nil, fmt.Errorf("release %s revision %d: %w", r.Name, r.Revision, err)
		}
		return objs, nil
	}
	return nil, nil
}

// applied returns what the deploy applies first: the transient objects
// when there is a canary.
func (c *canaryDeploy) applied(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	if c == nil {
		return objs
	}
	return c.objs
}

// runCanary runs the canary's phases up to promotion, within the
// deploy's timeout for the canary pods to start (the hold and the gate
// have their own durations). It returns the failure, if any, as the
// rollout does: the wait's result and error, and the diagnosis when the
// canary found it itself (a refusing gate).
func (d *Engine) runCanary(ctx context.Context, p *deployPlan, rec *storage.Release, c *canaryDeploy, applyOpts cluster.ApplyOptions, remaining func() time.Duration) (wait.Result, *rollout.Diagnosis, error) {
	o := *p.opts.Canary
	ns := d.Namespace()
	goal := wait.CanaryGoal{Pods: map[string]int32{}, MaxRestarts: o.MaxRestarts}
	for _, t := range c.targets {
		goal.Pods[t.ref.Namespace+"/"+t.ref.Name] = t.pods
	}
	watched, pods := targetObjects(c.objs, c.targets, ns), canaryPods(c.targets)
	if len(c.groups) > 0 {
		watched = c.groups
		for _, g := range c.groups {
			pods += replicasOf(g)
		}
	}
	c.run = &canaryRun{
		clk:    d.clock(),
		opts:   o,
		pods:   pods,
		report: rec.Canary,
		emit: func(phase, msg string) {
			d.emit(rec.Name, rec.Revision, PhaseCanary, "", phase, msg)
		},
		watch: func(ctx context.Context, until <-chan struct{}) (wait.Result, error) {
			g := goal
			g.Until = until
			timeout := remaining()
			if until != nil {
				timeout += max(o.Hold, analysisLength(p.analysis)) + o.GateTimeout + c.run.serveTimeout
			}
			return d.waitWith(ctx, rec, watched, wait.Options{Timeout: timeout, Canary: &g})
		},
		gate: func(ctx context.Context, pods []string) (*storage.GateResult, error) {
			return runGate(ctx, o.Gate, gateEnv{Release: rec.Name, Namespace: ns, Revision: rec.Revision, Pods: pods, Service: serviceOf(p.objs)}, o.GateTimeout)
		},
		promote: func(ctx context.Context) error {
			if len(c.targets) == 0 {
				return nil // groups: the next waves follow
			}
			applied, err := d.Objects.Apply(ctx, targetObjects(p.objs, c.targets, ns), applyOpts)
			for _, a := range applied {
				d.emit(rec.Name, rec.Revision, PhaseApply, a.Object.String(), string(a.Action), "the chart's strategy")
			}
			return err
		},
	}
	c.run.name, c.run.revision = rec.Name, rec.Revision
	if cfg := p.analysis; cfg != nil {
		c.run.analyze = func(ctx context.Context, pods []string, report *storage.AnalysisReport) error {
			resolve := func(ctx context.Context) (analysis.Targets, error) {
				if len(c.targets) == 0 {
					// Engine groups: the canary groups' leaders against
					// the other groups' leaders.
					return d.groupAnalysisTargets(ctx, p.objs, pods)
				}
				return d.analysisTargets(ctx, c.targets, pods)
			}
			return d.runAnalysis(ctx, rec, cfg, p.opts.Prometheus, resolve, report)
		}
	}
	serve, err := d.serveCheckOf(rec)
	if err != nil {
		return wait.Result{}, &rollout.Diagnosis{Reason: "ServeCheckError", Message: err.Error()}, err
	}
	if serve != nil {
		c.run.serveTimeout = serve.spec.Timeout
		c.run.serve = func(ctx context.Context, pods []string) (*rollout.ServeReport, *rollout.Diagnosis, error) {
			// The watch keeps the lock fresh meanwhile.
			return d.runServeCheck(ctx, rec, p.objs, serve, serveScope{pods: pods})
		}
	}
	wres, f, err := c.run.run(ctx)
	rec.Analysis = c.run.analysis
	if c.run.served != nil {
		rec.ServeCheck = c.run.served
	}
	switch {
	case f == nil || f.Object != "":
	case len(c.targets) > 0:
		f.Object = "deployment/" + c.targets[0].ref.Name
	case len(c.groups) > 0:
		f.Object = "statefulset/" + c.groups[0].GetName()
	}
	return wres, f, err
}

// analysisLength is how long an analysis lasts (0: none).
func analysisLength(c *analysis.Config) time.Duration {
	if c == nil {
		return 0
	}
	return c.Duration()
}

// canarySummary is the canary's note in the revision's description.
func canarySummary(r *storage.CanaryReport) string {
	if r == nil {
		return ""
	}
	s := fmt.Sprintf("canary %s: %s", r.Count, r.Outcome)
	if r.Outcome == storage.CanarySkipped || r.Outcome == storage.CanaryFailed || r.Outcome == storage.CanaryInterrupted {
		if r.Reason != "" {
			s += " (" + firstLine(r.Reason) + ")"
		}
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// serviceOf names the first Service among objs ("" when none).
func serviceOf(objs []*unstructured.Unstructured) string {
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GroupVersionKind().Group == "" {
			return o.GetName()
		}
	}
	return ""
}
