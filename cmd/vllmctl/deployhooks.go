package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/wait"
)

// DefaultRollbackTimeout is the automatic rollback's own time budget: it
// does not share what is left of --timeout.
const DefaultRollbackTimeout = 5 * time.Minute

// verdictFlags are the failure-verdict thresholds of the rollout watcher,
// shared by deploy, rollback and wait.
type verdictFlags struct {
	maxRestarts          int32
	maxOOMKills          int
	imagePullObservation int
	unschedulableTimeout time.Duration
}

// AddFlags registers the verdict thresholds on fs.
func (v *verdictFlags) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&v.maxRestarts, "max-restarts", wait.DefaultMaxRestarts,
		"fail the rollout when a container of a new pod is in CrashLoopBackOff with this many restarts")
	fs.IntVar(&v.maxOOMKills, "max-oom-kills", wait.DefaultMaxOOMKills,
		"fail the rollout after this many OOMKilled terminations of a container of a new pod")
	fs.IntVar(&v.imagePullObservation, "image-pull-observations", wait.DefaultImagePullObservations,
		"fail the rollout after this many consecutive observations of a new pod's image pull error")
	fs.DurationVar(&v.unschedulableTimeout, "unschedulable-timeout", wait.DefaultUnschedulableTimeout,
		"fail the rollout when a new pod stays unschedulable this long")
}

// Validate checks the thresholds.
func (v *verdictFlags) Validate() error {
	switch {
	case v.maxRestarts < 1:
		return newUsageError("--max-restarts %d: must be 1 or more", v.maxRestarts)
	case v.maxOOMKills < 1:
		return newUsageError("--max-oom-kills %d: must be 1 or more", v.maxOOMKills)
	case v.imagePullObservation < 1:
		return newUsageError("--image-pull-observations %d: must be 1 or more", v.imagePullObservation)
	case v.unschedulableTimeout <= 0:
		return newUsageError("--unschedulable-timeout %s: must be positive", v.unschedulableTimeout)
	}
	return nil
}

// options returns the watcher options of the flags.
func (v *verdictFlags) options() wait.RolloutOptions {
	return wait.RolloutOptions{
		MaxRestarts:           v.maxRestarts,
		MaxOOMKills:           v.maxOOMKills,
		ImagePullObservations: v.imagePullObservation,
		UnschedulableTimeout:  v.unschedulableTimeout,
	}
}

// preflightFlags select the capacity preflight and the surge policy.
type preflightFlags struct {
	policy string
	skip   bool
}

// AddFlags registers --surge-policy and --skip-preflight on fs.
func (p *preflightFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&p.policy, "surge-policy", string(release.SurgePolicyAuto),
		"when the rollout's surge cannot fit the free GPUs/quota: auto (switch to maxSurge 0 within the PodDisruptionBudget), strict (refuse) or off (report only)")
	fs.BoolVar(&p.skip, "skip-preflight", false, "do not check GPU, cpu, memory and quota headroom before applying")
}

// runPreflight checks that the rollout of objs can finish on the cluster's
// free capacity and quotas. It prints the report on w and returns the
// objects to apply (strategy adjusted by the surge policy, or objs) and a
// report (also in the result document). A refusal is a *release.PreflightError
// (exit 2, before anything is applied or recorded).
func runPreflight(ctx context.Context, w io.Writer, jsonLines bool, engine *release.Engine, objs []*unstructured.Unstructured, flags preflightFlags, opts release.DeployOptions) ([]*unstructured.Unstructured, *release.PreflightReport, error) {
	if flags.skip {
		return objs, nil, nil
	}
	policy, err := release.ParseSurgePolicy(flags.policy)
	if err != nil {
		return nil, nil, err
	}
	report, err := release.Preflight(ctx, engine.Client, objs, release.PreflightOptions{
		Namespace:      engine.Namespace(),
		Release:        opts.Name,
		Policy:         policy,
		MaxSurge:       opts.MaxSurge,
		MaxUnavailable: opts.MaxUnavailable,
	})
	if report != nil && len(report.Deployments) > 0 {
		var perr error
		if jsonLines {
			perr = json.NewEncoder(w).Encode(map[string]any{"time": time.Now().UTC(), "release": opts.Name, "phase": "preflight", "preflight": report})
		} else {
			perr = report.Print(w)
			for _, m := range report.Messages() {
				fmt.Fprintln(w, m)
			}
		}
		if perr != nil && err == nil {
			err = fmt.Errorf("write preflight report: %w", perr)
		}
	}
	if err != nil {
		return nil, report, err
	}
	if !report.Changed() {
		return objs, report, nil
	}
	adjusted, err := release.ApplyStrategyOverrides(objs, report)
	if err != nil {
		return nil, report, err
	}
	return adjusted, report, nil
}

// autoRollback is the Deployer's failure handler: it restores the newest
// good revision while the failed revision's lock is still held, on a
// context of its own (a Ctrl-C of the deploy stops the wait, never the
// rescue) bounded by its own budget.
func autoRollback(engine *release.Engine, budget time.Duration, historyMax int, forceConflicts bool) release.FailureHandler {
	return func(ctx context.Context, f *release.FailedRollout) (*release.Result, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
		defer cancel()
		rb := &release.Rollbacker{Engine: engine}
		return rb.RollbackHeld(rctx, f.Record, release.RollbackOptions{
			Timeout:        budget,
			HistoryMax:     historyMax,
			ForceConflicts: forceConflicts,
		})
	}
}

// dryRunDiff computes what applying objs would change, from a server-side
// dry run against the live objects (with the deploy's apply options), and
// which objects of the live revisions the deploy would prune.
func dryRunDiff(ctx context.Context, engine *release.Engine, name string, entries []release.Entry, objs []*unstructured.Unstructured, applyOpts release.ApplyOptions) (*diff.Report, error) {
	previous, err := release.PreviousObjects(entries)
	if err != nil {
		return nil, err
	}
	return diff.Compute(ctx, release.NewDiffCluster(engine.Objects, applyOpts), objs, diff.Options{
		Release:   name,
		Namespace: engine.Namespace(),
		Previous:  previous,
	})
}

// healthyCurrent returns the status of the release's newest revision when
// it is deployed and every one of its objects is Current, else nil.
func healthyCurrent(ctx context.Context, engine *release.Engine, name string, entries []release.Entry) (*release.StatusReport, error) {
	if len(entries) == 0 || entries[len(entries)-1].Status != release.StatusDeployed {
		return nil, nil
	}
	status, err := release.NewStatuser(engine).Status(ctx, name)
	if err != nil {
		return nil, err
	}
	for _, o := range status.Objects {
		if o.Status != string(wait.StatusCurrent) {
			return nil, nil
		}
	}
	return status, nil
}

// upToDateResult is the result document of a deploy that changed nothing.
func upToDateResult(s *release.StatusReport, start time.Time) *release.Result {
	return &release.Result{
		Release:         s.Release,
		Namespace:       s.Namespace,
		Revision:        s.Revision,
		Status:          s.Status,
		Chart:           s.Chart,
		AppVersion:      s.AppVersion,
		ReplicaSets:     s.RecordedReplicaSets,
		Description:     "up to date: " + s.Description,
		DurationSeconds: time.Since(start).Seconds(),
	}
}
