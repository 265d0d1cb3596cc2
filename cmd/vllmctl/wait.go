package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// waitOptions are the inputs of `vllmctl wait RELEASE`.
type waitOptions struct {
	g        *GlobalOptions
	progress progressFlags
	verdicts verdictFlags
	serve    serveCheckFlags
	analysis analysisFlags

	output    outputFlags
	timeout   timeoutFlags
	history   historyFlags
	conflicts conflictFlags

	rollbackTimeout rollbackTimeoutFlags

	rollbackOnFailure bool

	flags *pflag.FlagSet // the command's, to tell the flags given

	releaseTarget
}

func newWaitCommand(g *GlobalOptions) *cobra.Command {
	o := &waitOptions{g: g}
	o.timeout.help = waitTimeoutHelp
	o.history.help = rollbackHistoryMaxHelp
	o.conflicts.help = rollbackForceConflictsHelp
	o.rollbackTimeout.help = "time budget of the rollback (its own, not what is left of --timeout)"
	o.analysis.help = bakeAnalysisHelp
	cmd := &cobra.Command{
		Use:   "wait RELEASE",
		Short: "Wait on the current revision of a release with the same verdicts as deploy",
		Long: "Wait until the objects of RELEASE's current (highest) revision are ready, with the rollout watcher and\n" +
			"failure verdicts deploy uses (crash loops, OOM kills, image pull errors, unschedulable pods, progress\n" +
			"deadline), for pipelines that applied by other means or whose deploy timed out. The result goes to\n" +
			"stdout, progress to stderr.\n\n" +
			"wait takes no lock and changes no record: a revision recorded failed whose objects became healthy\n" +
			"stays failed (deploy again, or roll back to it, to record a good revision). Only --rollback-on-failure\n" +
			"writes, as `vllmctl rollback` does: a new revision \"Rollback to N\" restoring the newest deployed or\n" +
			"superseded revision N at or below the waited one. When another field manager changed the objects,\n" +
			"that rollback needs --force-conflicts to take the fields back.\n\n" +
			"With --analysis FILE, or when the revision's built-in chart values enable analysis:, the new pods are\n" +
			"measured alone once Ready and serving, for interval × count (beyond --timeout), as deploy without\n" +
			"--canary does: verdict AnalysisFailed (or AnalysisInconclusive per the spec's inconclusive: policy);\n" +
			"the report is in the result, not in the record. A rollback after a refusing analysis restores the\n" +
			"newest good revision below the waited one; inconclusive: hold never rolls back.\n\n" +
			"Exit status: 0 healthy, 2 unknown or uninstalled release or an invalid analysis (nothing waited for),\n" +
			"3 failed and rolled back (--rollback-on-failure), 4 failed or timed out (not rolled back, or the\n" +
			"rollback failed), 5 another operation holds the release, 6 the cluster refused.",
		Example: "  vllmctl wait qwen -n inference --timeout 15m\n" +
			"  vllmctl wait qwen --rollback-on-failure -o json\n" +
			"  vllmctl wait qwen --analysis bake.yaml",
		Args: cobra.ExactArgs(1),
		RunE: runCommand(o),
	}
	f := cmd.Flags()
	o.progress.AddFlags(f)
	o.verdicts.AddFlags(f)
	o.serve.AddFlags(f)
	o.analysis.AddFlags(f)
	o.output.AddFlags(f)
	o.timeout.AddFlags(f)
	o.history.AddFlags(f)
	o.conflicts.AddFlags(f)
	f.BoolVar(&o.rollbackOnFailure, "rollback-on-failure", false,
		"roll back to the newest good revision when the wait fails or times out")
	o.rollbackTimeout.AddFlags(f)
	return cmd
}

// Complete notes whether --timeout was given, resolves the release and
// the namespace.
func (o *waitOptions) Complete(cmd *cobra.Command, args []string) error {
	o.flags = cmd.Flags()
	o.timeout.Complete(o.flags, o.g)
	o.serve.Complete(o.flags, o.g)
	return o.releaseTarget.complete(o.g, args)
}

// Validate checks the release name and the flags.
func (o *waitOptions) Validate() error {
	if err := storage.ValidateName(o.release); err != nil {
		return err
	}
	// A wait has no canary: an analysis is baked on the new pods alone.
	analysisSpec := func() error { return o.analysis.Validate(o.flags, false) }
	return validateAll(analysisSpec, o.output.Validate, o.progress.Validate, o.verdicts.Validate, o.timeout.Validate,
		o.rollbackTimeout.Validate, o.history.Validate, o.serve.Validate)
}

// Run waits and prints the result.
func (o *waitOptions) Run(ctx context.Context) error {
	engine, printer, err := openOperation(o.g, &o.progress, o.namespace, o.verdicts.options())
	if err != nil {
		return err
	}
	engine.ServeCheck = o.serve.options()
	res, err := engine.Wait(ctx, release.WaitOptions{
		Name:              o.release,
		Timeout:           o.timeout.givenTimeout(),
		RollbackOnFailure: o.rollbackOnFailure,
		RollbackTimeout:   o.rollbackTimeout.timeout,
		HistoryMax:        o.history.max,
		ForceConflicts:    o.conflicts.force,
		Analysis:          o.analysis.cfg,
		Prometheus:        o.analysis.prom,
	})
	return finishOperation(o.g.Streams.Out, o.output.format, printer, res, err)
}
