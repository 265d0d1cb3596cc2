package release

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/groups"
	"github.com/vllmctl/vllmctl/release/servecheck"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// canaryDeploy is the canary of one deploy: the Deployments it holds, the
// objects applied with the transient strategy, and its phase machine.
type canaryDeploy struct {
	targets []canary.Target
	objs    []*unstructured.Unstructured
	// groups are the engine groups (StatefulSets) held as the canary of a
	// multi-node release: the first wave, applied with the chart's own
	// strategy (a group is all-or-nothing), watched and held before the
	// next waves start.
	groups []*unstructured.Unstructured
	run    *canary.Machine
}

// planCanary prepares the canary of a deploy that asked for one, and
// records its report in rec and res. There is none (nil, and the report
// says skipped) on a first install (no pods to hold a canary next to) or
// when no Deployment's pod template differs from the deployed revision's.
func (e *Engine) planCanary(p *deployPlan, rec *storage.Release, res *Result, install bool, waves groups.Plan) (*canaryDeploy, error) {
	o := p.opts.Canary
	if o == nil {
		return nil, nil
	}
	report := canary.NewReport(*o)
	rec.Canary, res.Canary = report, report
	skip := func(reason string) (*canaryDeploy, error) {
		report.Outcome, report.Reason = storage.CanarySkipped, reason
		e.emit(rec.Name, rec.Revision, PhaseCanary, "", storage.CanarySkipped, reason)
		if p.analysis != nil {
			e.emit(rec.Name, rec.Revision, PhaseAnalysis, "", "skipped", "no canary to analyse")
		}
		return nil, nil
	}
	if install {
		return skip("first install: there are no pods of a previous revision to hold a canary next to")
	}
	targets := p.canaryTargets(e.Namespace())
	if len(targets) == 0 && len(waves.Wave1) > 0 {
		for _, g := range waves.Wave1 {
			e.emit(rec.Name, rec.Revision, PhaseCanary, "StatefulSet "+charts.RefIn(g, e.Namespace()).Namespace+"/"+g.GetName(), "planned",
				fmt.Sprintf("engine group held as the canary (%d pod(s)); the next wave starts once it passed", canary.ReplicasOf(g)))
		}
		return &canaryDeploy{objs: p.objs, groups: waves.Wave1}, nil
	}
	if len(targets) == 0 {
		return skip("no Deployment's pod template differs from the deployed revision's: nothing to hold")
	}
	objs, err := canary.Objects(p.objs, targets, rec.Revision, e.Namespace())
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		e.emit(rec.Name, rec.Revision, PhaseCanary, "Deployment "+t.Ref.Namespace+"/"+t.Ref.Name, "planned",
			fmt.Sprintf("%d canary pod(s) of %d first (maxSurge %d, maxUnavailable 0 until promoted)", t.Pods, t.Replicas, t.Pods))
	}
	return &canaryDeploy{targets: targets, objs: objs}, nil
}

// canaryTargets are the Deployments a canary of this deploy holds (none
// without --canary): see canary.Targets.
func (p *deployPlan) canaryTargets(namespace string) []canary.Target {
	if p.opts.Canary == nil {
		return nil
	}
	return canary.Targets(p.objs, p.deployed, p.known, p.dryRun, p.opts.Canary.Count, namespace)
}

// readDeployed sets p.deployed from entries when the deploy asked for a
// canary (only a canary's decision needs the deployed revision's objects).
func (p *deployPlan) readDeployed(entries []storage.Entry) error {
	if p.opts.Canary == nil {
		return nil
	}
	deployed, err := canary.DeployedObjects(entries)
	if err != nil {
		return err
	}
	p.deployed = deployed
	return nil
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
func (e *Engine) runCanary(ctx context.Context, p *deployPlan, rec *storage.Release, c *canaryDeploy, applyOpts cluster.ApplyOptions, remaining func() time.Duration) (wait.Result, *rollout.Diagnosis, error) {
	o := *p.opts.Canary
	ns := e.Namespace()
	goal := wait.CanaryGoal{Pods: map[string]int32{}, MaxRestarts: o.MaxRestarts}
	for _, t := range c.targets {
		goal.Pods[t.Ref.Namespace+"/"+t.Ref.Name] = t.Pods
	}
	watched, pods := canary.TargetObjects(c.objs, c.targets, ns), canary.PodCount(c.targets)
	if len(c.groups) > 0 {
		watched = c.groups
		for _, g := range c.groups {
			pods += canary.ReplicasOf(g)
		}
	}
	c.run = &canary.Machine{
		Clock:  e.clock(),
		Opts:   o,
		Pods:   pods,
		Report: rec.Canary,
		Emit: func(phase, msg string) {
			e.emit(rec.Name, rec.Revision, PhaseCanary, "", phase, msg)
		},
		Watch: func(ctx context.Context, until <-chan struct{}) (wait.Result, error) {
			g := goal
			g.Until = until
			timeout := remaining()
			if until != nil {
				timeout += max(o.Hold, analysisLength(p.analysis)) + o.GateTimeout + c.run.ServeTimeout
			}
			return e.waitWith(ctx, rec, watched, wait.Options{Timeout: timeout, Canary: &g})
		},
		Gate: func(ctx context.Context, pods []string) (*storage.GateResult, error) {
			return canary.RunGate(ctx, o.Gate, canary.GateEnv{Release: rec.Name, Namespace: ns, Revision: rec.Revision, Pods: pods, Service: canary.ServiceOf(p.objs)}, o.GateTimeout)
		},
		Promote: func(ctx context.Context) error {
			if len(c.targets) == 0 {
				return nil // groups: the next waves follow
			}
			applied, err := e.Objects.Apply(ctx, canary.TargetObjects(p.objs, c.targets, ns), applyOpts)
			for _, a := range applied {
				e.emit(rec.Name, rec.Revision, PhaseApply, a.Object.String(), string(a.Action), "the chart's strategy")
			}
			return err
		},
	}
	c.run.Name, c.run.Revision = rec.Name, rec.Revision
	if cfg := p.analysis; cfg != nil {
		c.run.Analyze = func(ctx context.Context, pods []string, report *storage.AnalysisReport) error {
			resolve := func(ctx context.Context) (analysis.Targets, error) {
				if len(c.targets) == 0 {
					// Engine groups: the canary groups' leaders against
					// the other groups' leaders.
					return e.groupAnalysisTargets(ctx, p.objs, pods)
				}
				return canary.AnalysisTargets(ctx, e.Client, e.Namespace(), c.targets, pods)
			}
			return e.runAnalysis(ctx, rec, cfg, p.opts.Prometheus, resolve, report)
		}
	}
	serve, err := e.serveCheckOf(rec)
	if err != nil {
		return wait.Result{}, &rollout.Diagnosis{Reason: "ServeCheckError", Message: err.Error()}, err
	}
	if serve != nil {
		c.run.ServeTimeout = serve.Spec.Timeout
		c.run.Serve = func(ctx context.Context, pods []string) (*rollout.ServeReport, *rollout.Diagnosis, error) {
			// The watch keeps the lock fresh meanwhile.
			return e.runServeCheck(ctx, rec, p.objs, serve, servecheck.Scope{Pods: pods})
		}
	}
	wres, f, err := c.run.Run(ctx)
	rec.Analysis = c.run.Analysis
	if c.run.Served != nil {
		rec.ServeCheck = c.run.Served
	}
	switch {
	case f == nil || f.Object != "":
	case len(c.targets) > 0:
		f.Object = "deployment/" + c.targets[0].Ref.Name
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
