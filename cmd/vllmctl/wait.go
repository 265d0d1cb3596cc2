package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/release"
)

// waitOptions are the inputs of `vllmctl wait RELEASE`.
type waitOptions struct {
	g        *GlobalOptions
	progress progressFlags
	verdicts verdictFlags

	output            string
	timeout           time.Duration
	timeoutGiven      bool // --timeout chosen by the user (flagGiven)
	rollbackOnFailure bool
	rollbackTimeout   time.Duration
	historyMax        int
	forceConflicts    bool

	releaseTarget

	// newEngine builds the release engine; nil: the kubeconfig's cluster.
	newEngine engineFactory
}

func newWaitCommand(g *GlobalOptions) *cobra.Command {
	return waitCommand(&waitOptions{g: g})
}

func waitCommand(o *waitOptions) *cobra.Command {
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
			"Exit status: 0 healthy, 2 unknown or uninstalled release, 3 failed and rolled back (--rollback-on-failure),\n" +
			"4 failed or timed out (not rolled back, or the rollback failed), 5 another operation holds the release,\n" +
			"6 the cluster refused.",
		Example: "  vllmctl wait qwen -n inference --timeout 15m\n" +
			"  vllmctl wait qwen --rollback-on-failure -o json",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.timeoutGiven = flagGiven(cmd, o.g, "timeout")
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
	o.progress.AddFlags(f)
	o.verdicts.AddFlags(f)
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	f.DurationVar(&o.timeout, "timeout", release.DefaultTimeout, "how long to wait for the revision's objects to become ready; "+timeoutFollowsHelp)
	f.BoolVar(&o.rollbackOnFailure, "rollback-on-failure", false,
		"roll back to the newest good revision when the wait fails or times out")
	f.DurationVar(&o.rollbackTimeout, "rollback-timeout", release.DefaultRollbackTimeout,
		"time budget of the rollback (its own, not what is left of --timeout)")
	f.IntVar(&o.historyMax, "history-max", 10, "release records the rollback keeps (0: unlimited)")
	f.BoolVar(&o.forceConflicts, "force-conflicts", false, "let the rollback take over fields other field managers own")
	return cmd
}

// Complete resolves the release and the namespace.
func (o *waitOptions) Complete(args []string) error {
	return o.releaseTarget.complete(o.g, args)
}

// Validate checks the release name and the flags.
func (o *waitOptions) Validate() error {
	if err := release.ValidateName(o.release); err != nil {
		return err
	}
	if err := validateRecordOutput(o.output); err != nil {
		return err
	}
	if err := o.progress.Validate(); err != nil {
		return err
	}
	if err := o.verdicts.Validate(); err != nil {
		return err
	}
	if o.timeout <= 0 {
		return newUsageError("--timeout %s: must be positive", o.timeout)
	}
	if o.rollbackTimeout <= 0 {
		return newUsageError("--rollback-timeout %s: must be positive", o.rollbackTimeout)
	}
	if o.historyMax < 0 {
		return newUsageError("--history-max %d: must be 0 (unlimited) or more", o.historyMax)
	}
	return nil
}

// Run waits and prints the result.
func (o *waitOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	engine, err := openEngine(o.g, o.newEngine, o.namespace, o.verdicts.options())
	if err != nil {
		return err
	}
	printer := o.progress.printer(o.g.Streams.ErrOut)
	engine.Progress = printer.Print
	engine.UseRedactor(printer.red)
	res, err := release.NewWatcher(engine).Wait(ctx, release.WaitOptions{
		Name:              o.release,
		Timeout:           givenTimeout(o.timeoutGiven, o.timeout),
		RollbackOnFailure: o.rollbackOnFailure,
		RollbackTimeout:   o.rollbackTimeout,
		HistoryMax:        o.historyMax,
		ForceConflicts:    o.forceConflicts,
	})
	return finishOperation(o.g.Streams.Out, o.output, printer, res, err)
}
