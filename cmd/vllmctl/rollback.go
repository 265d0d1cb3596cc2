package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// rollbackOptions are the inputs of `vllmctl rollback RELEASE`.
type rollbackOptions struct {
	g        *GlobalOptions
	progress progressFlags
	lock     lockFlags

	output    outputFlags
	timeout   timeoutFlags
	history   historyFlags
	conflicts conflictFlags
	unlock    unlockFlags
	verdicts  verdictFlags
	serve     serveCheckFlags
	analysis  analysisFlags

	toRevision int
	flags      *pflag.FlagSet // the command's, to tell the flags given

	releaseTarget
}

func newRollbackCommand(g *GlobalOptions) *cobra.Command {
	o := &rollbackOptions{g: g}
	o.timeout.help = rolloutTimeoutHelp
	o.history.help = historyMaxHelp
	o.conflicts.help = forceConflictsHelp
	o.analysis.help = rollbackAnalysisHelp
	cmd := &cobra.Command{
		Use:   "rollback RELEASE",
		Short: "Restore an earlier revision of a release, then wait",
		Long: "Re-apply the manifest stored in revision N of RELEASE (default: the newest deployed or superseded\n" +
			"revision before the current one) as a new revision described \"Rollback to N\", delete the objects\n" +
			"N does not have, check that every Deployment serves the pod template N ran (its ReplicaSet is\n" +
			"reused, with a new revision number) and wait until everything is ready. No chart is needed.\n" +
			"With --analysis FILE the restored pods are then measured alone (a bake, as wait --analysis does):\n" +
			"a refusing analysis fails the rollback revision (exit 4).\n\n" +
			"Exit status: 0 restored, 2 unknown release or revision or an invalid analysis (nothing changed),\n" +
			"4 the rollout or its analysis failed,\n" +
			"5 another operation holds the release, 6 the cluster refused.",
		Example: "  vllmctl rollback qwen\n" +
			"  vllmctl rollback qwen --to-revision 3 -o json",
		Args: cobra.ExactArgs(1),
		RunE: runCommand(o),
	}
	f := cmd.Flags()
	o.progress.AddFlags(f)
	o.lock.AddFlags(f)
	o.output.AddFlags(f)
	o.timeout.AddFlags(f)
	o.history.AddFlags(f)
	o.conflicts.AddFlags(f)
	o.unlock.AddFlags(f)
	o.verdicts.AddFlags(f)
	o.serve.AddFlags(f)
	o.analysis.AddFlags(f)
	f.IntVar(&o.toRevision, "to-revision", 0, "revision to restore (0: the previous good revision)")
	return cmd
}

// Complete notes whether --timeout was given, resolves the release and
// the namespace.
func (o *rollbackOptions) Complete(cmd *cobra.Command, args []string) error {
	o.timeout.Complete(cmd.Flags(), o.g)
	o.serve.Complete(cmd.Flags(), o.g)
	o.flags = cmd.Flags()
	return o.releaseTarget.complete(o.g, args)
}

// Validate checks the release name and the flags.
func (o *rollbackOptions) Validate() error {
	if err := storage.ValidateName(o.release); err != nil {
		return err
	}
	toRevision := func() error {
		if o.toRevision < 0 {
			return newUsageError("--to-revision %d: must be 1 or more (0: the previous good revision)", o.toRevision)
		}
		return nil
	}
	// A rollback has no canary: an analysis is baked on the restored pods
	// alone.
	analysisSpec := func() error { return o.analysis.Validate(o.flags, false) }
	return validateAll(o.output.Validate, o.progress.Validate, o.lock.Validate, toRevision, o.timeout.Validate, o.history.Validate,
		o.verdicts.Validate, o.serve.Validate, analysisSpec)
}

// Run rolls back and prints the result.
func (o *rollbackOptions) Run(ctx context.Context) error {
	engine, printer, err := openOperation(o.g, &o.progress, o.namespace, o.verdicts.options())
	if err != nil {
		return err
	}
	o.lock.apply(engine)
	engine.ServeCheck = o.serve.options()
	res, err := engine.Rollback(ctx, release.RollbackOptions{
		Name:           o.release,
		ToRevision:     o.toRevision,
		Timeout:        o.timeout.givenTimeout(),
		HistoryMax:     o.history.max,
		ForceUnlock:    o.unlock.force,
		ForceConflicts: o.conflicts.force,
		Analysis:       o.analysis.cfg,
		Prometheus:     o.analysis.prom,
	})
	return finishOperation(o.g.Streams.Out, o.output.format, printer, res, err)
}
