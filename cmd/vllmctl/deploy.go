package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/wait"
)

// deployOptions are the inputs of `vllmctl deploy RELEASE [CHART]`.
type deployOptions struct {
	g         *GlobalOptions
	render    RenderFlags
	progress  progressFlags
	verdicts  verdictFlags
	preflight preflightFlags

	output            string
	timeout           time.Duration
	rollbackOnFailure bool
	noRollback        bool
	maxSurge          string
	maxUnavailable    string
	diff              bool
	dryRun            bool
	forceConflicts    bool
	historyMax        int
	createNamespace   bool
	forceUnlock       bool
	rollbackTimeout   time.Duration

	namespace      string
	chart          *chart.Chart
	opts           charts.RenderOptions
	surge          *intstr.IntOrString
	unavailable    *intstr.IntOrString
	rollbackSetBy  bool // --rollback-on-failure given explicitly
	noRollbackSets bool // --no-rollback given explicitly

	// newEngine builds the release engine; nil: the kubeconfig's cluster.
	newEngine engineFactory
}

func newDeployCommand(g *GlobalOptions) *cobra.Command {
	return deployCommand(&deployOptions{g: g})
}

func deployCommand(o *deployOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deploy RELEASE [CHART]",
		Short: "Render, apply, record and wait for a release revision",
		Long: "Render CHART (a chart directory or a built-in chart; default \"vllm\") for RELEASE, take the release's\n" +
			"lock (a pending record), apply every object with server-side apply (field manager vllmctl),\n" +
			"record the ReplicaSets the rollout produces and wait until everything is ready. On success the\n" +
			"revision is marked deployed, objects the chart no longer renders are deleted and old records\n" +
			"beyond --history-max are pruned. The result goes to stdout, progress to stderr.\n\n" +
			"Exit status: 0 deployed, 2 invalid input (nothing applied), 3 failed and rolled back, 4 failed,\n" +
			"5 another operation holds the release, 6 the cluster refused (nothing recorded as deployed).",
		Example: "  vllmctl deploy qwen -n inference -f prod.yaml\n" +
			"  vllmctl deploy qwen ./mychart --set image.tag=v0.11.1 --timeout 20m -o json\n" +
			"  vllmctl deploy qwen --dry-run --diff",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.rollbackSetBy = cmd.Flags().Changed("rollback-on-failure")
			o.noRollbackSets = cmd.Flags().Changed("no-rollback")
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	o.render.AddFlags(f)
	o.progress.AddFlags(f)
	o.verdicts.AddFlags(f)
	o.preflight.AddFlags(f)
	f.DurationVar(&o.rollbackTimeout, "rollback-timeout", DefaultRollbackTimeout,
		"time budget of the automatic rollback (its own, not what is left of --timeout)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	f.DurationVar(&o.timeout, "timeout", release.DefaultTimeout,
		"how long to wait for the rollout; also the age after which another operation's lock is stale")
	f.BoolVar(&o.rollbackOnFailure, "rollback-on-failure", true, "roll back to the previous good revision when the rollout fails")
	f.BoolVar(&o.noRollback, "no-rollback", false, "do not roll back when the rollout fails (--rollback-on-failure=false)")
	f.StringVar(&o.maxSurge, "max-surge", "", "override the Deployments' rolling-update maxSurge (integer or percentage)")
	f.StringVar(&o.maxUnavailable, "max-unavailable", "", "override the Deployments' rolling-update maxUnavailable (integer or percentage)")
	f.BoolVar(&o.diff, "diff", false, "print what the deploy changes (as vllmctl diff shows it) on stderr before applying")
	f.BoolVar(&o.dryRun, "dry-run", false, "apply every object with a server-side dry run; nothing is changed or recorded")
	f.BoolVar(&o.forceConflicts, "force-conflicts", false, "take over fields other field managers own")
	f.IntVar(&o.historyMax, "history-max", 10, "release records to keep (0: unlimited)")
	f.BoolVar(&o.createNamespace, "create-namespace", false, "create the release namespace if it does not exist")
	f.BoolVar(&o.forceUnlock, "force-unlock", false, "take over the lock of another operation on the release")
	return cmd
}

// Complete resolves the namespace, checks the release name and loads the
// chart.
func (o *deployOptions) Complete(args []string) error {
	ns, err := recordNamespace(o.g)
	if err != nil {
		return err
	}
	o.namespace = ns
	o.chart, o.opts, err = o.render.Resolve(args, ns)
	return err
}

// Validate checks the flags.
func (o *deployOptions) Validate() error {
	if err := charts.ValidateReleaseName(o.opts.ReleaseName); err != nil {
		return err
	}
	if err := validateRecordOutput(o.output); err != nil {
		return err
	}
	if err := o.progress.Validate(); err != nil {
		return err
	}
	if o.timeout <= 0 {
		return newUsageError("--timeout %s: must be positive", o.timeout)
	}
	if o.rollbackTimeout <= 0 {
		return newUsageError("--rollback-timeout %s: must be positive", o.rollbackTimeout)
	}
	if err := o.verdicts.Validate(); err != nil {
		return err
	}
	if _, err := release.ParseSurgePolicy(o.preflight.policy); err != nil {
		return err
	}
	if o.historyMax < 0 {
		return newUsageError("--history-max %d: must be 0 (unlimited) or more", o.historyMax)
	}
	if o.rollbackSetBy && o.noRollbackSets && o.rollbackOnFailure {
		return newUsageError("--rollback-on-failure and --no-rollback contradict each other")
	}
	var err error
	if o.maxSurge != "" {
		if o.surge, err = release.ParseIntOrPercent("--max-surge", o.maxSurge); err != nil {
			return err
		}
	}
	if o.maxUnavailable != "" {
		if o.unavailable, err = release.ParseIntOrPercent("--max-unavailable", o.maxUnavailable); err != nil {
			return err
		}
	}
	return nil
}

// Run renders the chart, deploys it and prints the result.
func (o *deployOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	start := time.Now()
	name := o.opts.ReleaseName
	// Input errors first: exit code 2 whatever the cluster says.
	rendered, err := charts.RenderContext(ctx, o.chart, o.opts)
	if err != nil {
		return err
	}

	engine, err := openEngine(o.g, o.newEngine, o.namespace, o.verdicts.options())
	if err != nil {
		return err
	}
	printer := o.progress.printer(o.g.Streams.ErrOut)
	engine.Progress = printer.Print

	// Render as the next revision: .Release.Revision and IsUpgrade.
	entries, err := engine.Store.List(ctx, name)
	if err != nil {
		return fmt.Errorf("release %s: read its records: %w", name, err)
	}
	opts := o.opts
	opts.Revision = 1
	for _, e := range entries {
		opts.Revision = max(opts.Revision, e.Revision+1)
		if e.Status == release.StatusDeployed {
			opts.IsUpgrade = true
		}
	}
	if opts.Revision != o.opts.Revision || opts.IsUpgrade != o.opts.IsUpgrade {
		if rendered, err = charts.RenderContext(ctx, o.chart, opts); err != nil {
			return err
		}
	}

	deployOpts := release.DeployOptions{
		Name:              name,
		Chart:             release.Chart{Name: rendered.Chart.Name, Version: rendered.Chart.Version, AppVersion: rendered.Chart.AppVersion},
		Values:            rendered.UserValues,
		Objects:           rendered.Objects,
		Manifest:          rendered.Manifest,
		Timeout:           o.timeout,
		HistoryMax:        o.historyMax,
		DryRun:            o.dryRun,
		CreateNamespace:   o.createNamespace,
		ForceConflicts:    o.forceConflicts,
		ForceUnlock:       o.forceUnlock,
		RollbackOnFailure: o.rollbackOnFailure && !o.noRollback,
		MaxSurge:          o.surge,
		MaxUnavailable:    o.unavailable,
	}

	// Preflight: can the rollout finish on the free GPUs and quotas? Runs
	// before anything is applied or recorded; may steer the strategy.
	objs, preflight, err := runPreflight(ctx, o.g.Streams.ErrOut, o.progress.format == string(wait.ProgressJSON),
		engine, rendered.Objects, o.preflight, deployOpts)
	if err != nil {
		return err
	}
	if preflight != nil && preflight.Changed() {
		deployOpts.Objects, deployOpts.Manifest, deployOpts.Note = objs, "", preflight.Description()
	}

	// What the deploy changes, from one server-side dry run: printed with
	// --diff, and, when empty while the current revision is healthy, the
	// deploy reconciles like a controller and records no new revision.
	reconcile := !o.dryRun && !o.forceUnlock
	if o.diff || reconcile {
		applyOpts := release.ApplyOptions{Namespace: o.namespace, Release: name, Force: o.forceConflicts, CreateNamespace: o.createNamespace}
		rep, err := dryRunDiff(ctx, engine, name, entries, deployOpts.Objects, applyOpts)
		switch {
		case err != nil && o.diff:
			return fmt.Errorf("--diff: %w", err)
		case err != nil:
			// A refusal: the deploy itself reports it.
			reconcile = false
		case o.diff:
			w := o.g.Streams.ErrOut
			_, noColor := os.LookupEnv("NO_COLOR")
			if err := rep.WriteText(w, !noColor && wait.IsTerminal(w)); err != nil {
				return fmt.Errorf("--diff: %w", err)
			}
		}
		if reconcile && rep.Empty() {
			current, err := healthyCurrent(ctx, engine, name, entries)
			if err != nil {
				return err
			}
			if current != nil {
				fmt.Fprintf(o.g.Streams.ErrOut, "release %s is up to date (revision %d): nothing to change, no new revision\n", name, current.Revision)
				return writeReleaseResult(o.g.Streams.Out, o.output, upToDateResult(current, start))
			}
		}
	}

	d := release.NewDeployer(engine)
	if deployOpts.RollbackOnFailure {
		d.OnFailure = autoRollback(engine, o.rollbackTimeout, o.historyMax, o.forceConflicts)
	}
	res, err := d.Deploy(ctx, deployOpts)
	if res != nil && preflight != nil && len(preflight.Deployments) > 0 {
		res.Preflight = preflight
	}
	return finishOperation(o.g.Streams.Out, o.output, printer, res, err)
}
