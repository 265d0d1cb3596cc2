package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release/preflight"
)

// deployOptions are the inputs of `vllmctl deploy RELEASE [CHART]`.
type deployOptions struct {
	g         *GlobalOptions
	render    RenderFlags
	reuse     reuseFlags
	progress  progressFlags
	lock      lockFlags
	verdicts  verdictFlags
	preflight preflightFlags
	canary    canaryFlags
	serve     serveCheckFlags
	output    outputFlags
	deployFlags

	rollbackOnFailure bool
	noRollback        bool
	maxSurge          string
	maxUnavailable    string
	diff              bool
	dryRun            bool
	skipCRDs          bool

	chartTarget
	surge          *intstr.IntOrString
	unavailable    *intstr.IntOrString
	rollbackSetBy  bool           // --rollback-on-failure given explicitly
	noRollbackSets bool           // --no-rollback given explicitly
	flags          *pflag.FlagSet // the command's, to tell the flags given
}

func newDeployCommand(g *GlobalOptions) *cobra.Command {
	return deployCommand(&deployOptions{g: g})
}

// deployCommand builds the command on o (tests read o once it ran).
func deployCommand(o *deployOptions) *cobra.Command {
	o.timeout.help = rolloutTimeoutHelp
	o.history.help = historyMaxHelp
	o.conflicts.help = forceConflictsHelp
	o.rollbackTimeout.help = "time budget of the automatic rollback (its own, not what is left of --timeout)"
	cmd := &cobra.Command{
		Use:   "deploy RELEASE [CHART]",
		Short: "Render, apply, record and wait for a release revision",
		Long: "Render CHART (a chart directory, a packaged .tgz, a built-in chart, or a chart of a repository:\n" +
			"REPO/NAME, or NAME with --repo URL, at --version; default \"vllm\") for RELEASE, take the release's\n" +
			"lock (a pending record), apply every object with server-side apply (field manager vllmctl),\n" +
			"record the ReplicaSets (and a StatefulSet's ControllerRevisions) the rollout produces and wait\n" +
			"until everything is ready. Engine groups (StatefulSets labelled vllmctl.io/group, the built-in\n" +
			"chart with multiNode.nodes >= 2) are upgraded wave by wave, --max-unavailable groups at a time\n" +
			"(default 1), each wave only once the previous one is Ready. On success the\n" +
			"revision is marked deployed, objects the chart no longer renders are deleted and old records\n" +
			"beyond --history-max are pruned. The result goes to stdout, progress to stderr.\n\n" +
			"Exit status: 0 deployed, 2 invalid input (nothing applied), 3 failed and rolled back, 4 failed,\n" +
			"5 another operation holds the release, 6 the cluster refused (nothing recorded as deployed).",
		Example: "  vllmctl deploy qwen -n inference -f prod.yaml\n" +
			"  vllmctl deploy qwen ./mychart --set image.tag=v0.11.1 --timeout 20m -o json\n" +
			"  vllmctl deploy qwen --dry-run --diff",
		Args: cobra.RangeArgs(1, 2),
		RunE: runCommand(o),
	}
	f := cmd.Flags()
	o.render.AddFlags(f)
	o.render.AddPostRenderFlags(f)
	o.reuse.AddFlags(f)
	o.progress.AddFlags(f)
	o.lock.AddFlags(f)
	o.verdicts.AddFlags(f)
	o.preflight.AddFlags(f)
	o.modelFit.AddFlags(f)
	o.canary.AddFlags(f)
	o.analysis.AddFlags(f)
	o.serve.AddFlags(f)
	o.output.AddFlags(f)
	o.timeout.AddFlags(f)
	o.history.AddFlags(f)
	o.conflicts.AddFlags(f)
	o.unlock.AddFlags(f)
	o.rollbackTimeout.AddFlags(f)
	f.BoolVar(&o.rollbackOnFailure, "rollback-on-failure", true, "roll back to the previous good revision when the rollout fails")
	f.BoolVar(&o.noRollback, "no-rollback", false, "do not roll back when the rollout fails (--rollback-on-failure=false)")
	f.StringVar(&o.maxSurge, "max-surge", "", "override the Deployments' rolling-update maxSurge (integer or percentage)")
	f.StringVar(&o.maxUnavailable, "max-unavailable", "", "override the Deployments' rolling-update maxUnavailable (integer or percentage); for engine groups, how many groups a wave replaces")
	f.BoolVar(&o.diff, "diff", false, "print what the deploy changes (as vllmctl diff shows it) on stderr before applying")
	f.BoolVar(&o.dryRun, "dry-run", false, "apply every object with a server-side dry run; nothing is changed or recorded")
	f.BoolVar(&o.createNamespace, "create-namespace", false, "create the release namespace if it does not exist")
	f.BoolVar(&o.takeOwnership, "take-ownership", false,
		"adopt existing objects the chart renders that are another release's or were made by other means (refused otherwise, exit 6)")
	f.BoolVar(&o.skipCRDs, "skip-crds", false,
		"do not create the CustomResourceDefinitions of the chart's crds/ (by default the missing ones are created, never updated, before any other object)")
	return cmd
}

// Complete notes which flags were given, resolves the namespace, checks
// the release name and loads the chart.
func (o *deployOptions) Complete(cmd *cobra.Command, args []string) error {
	o.flags = cmd.Flags()
	o.rollbackSetBy = o.flags.Changed("rollback-on-failure")
	o.noRollbackSets = o.flags.Changed("no-rollback")
	o.timeout.Complete(o.flags, o.g)
	o.serve.Complete(o.flags, o.g)
	if err := o.chartTarget.complete(commandContext(cmd), o.g, &o.render, args); err != nil {
		return err
	}
	o.reuse.apply(&o.opts)
	return nil
}

// Validate checks the flags.
func (o *deployOptions) Validate() error {
	canary := func() error { return o.canary.Validate(o.flags) }
	analysisSpec := func() error { return o.analysis.Validate(o.flags, o.canary.opts != nil) }
	if err := validateAll(canary, analysisSpec, o.output.Validate, o.progress.Validate, o.lock.Validate, o.timeout.Validate,
		o.rollbackTimeout.Validate, o.verdicts.Validate, o.preflight.Validate, o.history.Validate, o.serve.Validate, o.modelFit.Validate); err != nil {
		return err
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
		if o.unavailable, err = preflight.ParseMaxUnavailable("--max-unavailable", o.maxUnavailable); err != nil {
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
	engine, printer, err := openOperation(o.g, &o.progress, o.namespace, o.verdicts.options())
	if err != nil {
		return err
	}
	o.lock.apply(engine)
	engine.ServeCheck = o.serve.options()
	opts := o.deployOptions(o.opts.ReleaseName, o.render.input(o.chart, o.opts), o.preflight.skip)
	opts.DryRun, opts.Diff, opts.SkipCRDs = o.dryRun, o.diff, o.skipCRDs
	opts.RollbackOnFailure = o.rollbackOnFailure && !o.noRollback
	opts.MaxSurge, opts.MaxUnavailable, opts.SurgePolicy = o.surge, o.unavailable, o.preflight.surgePolicy
	opts.Canary = o.canary.opts
	res, err := engine.Deploy(ctx, opts)
	err = finishOperation(o.g.Streams.Out, o.output.format, printer, res, err)
	if err == nil && res != nil && res.Notes != "" && o.output.format == "table" && o.progress.format != string(termout.ProgressJSON) {
		// As helm prints them after an install or upgrade; in the result
		// document (-o json|yaml) they are its notes field.
		fmt.Fprintf(o.g.Streams.ErrOut, "NOTES:\n%s\n", strings.TrimRight(res.Notes, "\n"))
	}
	return err
}
