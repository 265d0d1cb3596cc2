package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/preflight"
)

// deployOptions are the inputs of `vllmctl deploy RELEASE [CHART]`.
type deployOptions struct {
	g         *GlobalOptions
	render    RenderFlags
	progress  progressFlags
	lock      lockFlags
	verdicts  verdictFlags
	preflight preflightFlags
	canary    canaryFlags

	output            string
	timeout           time.Duration
	timeoutGiven      bool // --timeout chosen by the user (flagGiven)
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
	takeOwnership     bool
	skipCRDs          bool
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
			o.timeoutGiven = flagGiven(cmd, o.g, "timeout")
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.canary.Validate(cmd.Flags()); err != nil {
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
	o.lock.AddFlags(f)
	o.verdicts.AddFlags(f)
	o.preflight.AddFlags(f)
	o.canary.AddFlags(f)
	f.DurationVar(&o.rollbackTimeout, "rollback-timeout", release.DefaultRollbackTimeout,
		"time budget of the automatic rollback (its own, not what is left of --timeout)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	f.DurationVar(&o.timeout, "timeout", release.DefaultTimeout,
		"how long to wait for the rollout (and, at most, to watch another operation's lock for renewals); "+timeoutFollowsHelp)
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
	f.BoolVar(&o.takeOwnership, "take-ownership", false,
		"adopt existing objects the chart renders that are another release's or were made by other means (refused otherwise, exit 6)")
	f.BoolVar(&o.skipCRDs, "skip-crds", false,
		"do not create the CustomResourceDefinitions of the chart's crds/ (by default the missing ones are created, never updated, before any other object)")
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
	if err := validateRecordOutput(o.output); err != nil {
		return err
	}
	if err := o.progress.Validate(); err != nil {
		return err
	}
	if err := o.lock.Validate(); err != nil {
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
	if err := o.preflight.Validate(); err != nil {
		return err
	}
	if o.historyMax < 0 {
		return newUsageError("--history-max %d: must be 0 (unlimited) or more", o.historyMax)
	}
	if o.rollbackSetBy && o.noRollbackSets && o.rollbackOnFailure {
		return newUsageError("--rollback-on-failure and --no-rollback contradict each other")
	}
	// One of them on the command line wins over the other's value from
	// the environment or the config file.
	switch {
	case o.rollbackSetBy && !o.noRollbackSets:
		o.noRollback = false
	case o.noRollbackSets && !o.rollbackSetBy:
		o.rollbackOnFailure = true
	}
	var err error
	if o.maxSurge != "" {
		if o.surge, err = preflight.ParseIntOrPercent("--max-surge", o.maxSurge); err != nil {
			return err
		}
	}
	if o.maxUnavailable != "" {
		if o.unavailable, err = preflight.ParseIntOrPercent("--max-unavailable", o.maxUnavailable); err != nil {
			return err
		}
	}
	if o.canary.opts != nil && (o.surge != nil || o.unavailable != nil) {
		return newUsageError("--canary sets the rollout's surge itself: it cannot be combined with --max-surge or --max-unavailable")
	}
	return nil
}

// Run deploys the release through the release engine and prints the
// result.
func (o *deployOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	engine, err := openEngine(o.g, o.newEngine, o.namespace, o.verdicts.options())
	if err != nil {
		return err
	}
	o.lock.apply(engine)
	printer := o.progress.printer(o.g.Streams.ErrOut)
	engine.Progress = printer.Print
	engine.UseRedactor(printer.red)
	res, err := release.NewDeployer(engine).Deploy(ctx, release.DeployOptions{
		Name:              o.opts.ReleaseName,
		Render:            &release.RenderInput{Chart: o.chart, Options: o.opts},
		Timeout:           givenTimeout(o.timeoutGiven, o.timeout),
		HistoryMax:        o.historyMax,
		DryRun:            o.dryRun,
		CreateNamespace:   o.createNamespace,
		ForceConflicts:    o.forceConflicts,
		ForceUnlock:       o.forceUnlock,
		TakeOwnership:     o.takeOwnership,
		RollbackOnFailure: o.rollbackOnFailure && !o.noRollback,
		RollbackTimeout:   o.rollbackTimeout,
		MaxSurge:          o.surge,
		MaxUnavailable:    o.unavailable,
		SkipPreflight:     o.preflight.skip,
		SkipCRDs:          o.skipCRDs,
		SurgePolicy:       o.preflight.surgePolicy,
		Diff:              o.diff,
		Canary:            o.canary.opts,
	})
	return finishOperation(o.g.Streams.Out, o.output, printer, res, err)
}

// timeoutFollowsHelp ends the help of the --timeout flags of deploy,
// rollback and wait.
const timeoutFollowsHelp = "without one (flag, VLLMCTL_TIMEOUT or config file) it follows the pods' start-up budget " +
	"(the largest startup probe budget plus readiness initial delay, plus 1m) when that is longer than the default"

// flagGiven reports whether the user chose the value of the flag name: on
// the command line, in VLLMCTL_<NAME> or in the config file. A value from
// the environment or the config file leaves the flag unchanged (see
// bindConfig): viper knows it was set.
func flagGiven(cmd *cobra.Command, g *GlobalOptions, name string) bool {
	f := cmd.Flags().Lookup(name)
	if f == nil {
		return false
	}
	return f.Changed || (g != nil && g.v != nil && g.v.IsSet(name)) || f.Value.String() != f.DefValue
}

// givenTimeout is the timeout an operation passes to the release engine:
// the --timeout the user chose, or 0 when none was given, for the engine
// to follow the objects' start-up budget (release.StartupTimeout).
func givenTimeout(given bool, timeout time.Duration) time.Duration {
	if given {
		return timeout
	}
	return 0
}
