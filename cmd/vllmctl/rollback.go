package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/wait"
)

// rollbackOptions are the inputs of `vllmctl rollback RELEASE`.
type rollbackOptions struct {
	g        *GlobalOptions
	progress progressFlags
	lock     lockFlags

	output         string
	toRevision     int
	timeout        time.Duration
	timeoutGiven   bool // --timeout chosen by the user (flagGiven)
	historyMax     int
	forceUnlock    bool
	forceConflicts bool

	releaseTarget

	// newEngine builds the release engine; nil: the kubeconfig's cluster.
	newEngine engineFactory
}

func newRollbackCommand(g *GlobalOptions) *cobra.Command {
	return rollbackCommand(&rollbackOptions{g: g})
}

func rollbackCommand(o *rollbackOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollback RELEASE",
		Short: "Restore an earlier revision of a release, then wait",
		Long: "Re-apply the manifest stored in revision N of RELEASE (default: the newest deployed or superseded\n" +
			"revision before the current one) as a new revision described \"Rollback to N\", delete the objects\n" +
			"N does not have, check that every Deployment serves the pod template N ran (its ReplicaSet is\n" +
			"reused, with a new revision number) and wait until everything is ready. No chart is needed.\n\n" +
			"Exit status: 0 restored, 2 unknown release or revision (nothing changed), 4 the rollout failed,\n" +
			"5 another operation holds the release, 6 the cluster refused.",
		Example: "  vllmctl rollback qwen\n" +
			"  vllmctl rollback qwen --to-revision 3 -o json",
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
	o.lock.AddFlags(f)
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	f.IntVar(&o.toRevision, "to-revision", 0, "revision to restore (0: the previous good revision)")
	f.DurationVar(&o.timeout, "timeout", release.DefaultTimeout,
		"how long to wait for the rollout (and, at most, to watch another operation's lock for renewals); "+timeoutFollowsHelp)
	f.IntVar(&o.historyMax, "history-max", 10, "release records to keep (0: unlimited)")
	f.BoolVar(&o.forceUnlock, "force-unlock", false, "take over the lock of another operation on the release")
	f.BoolVar(&o.forceConflicts, "force-conflicts", false, "take over fields other field managers own")
	return cmd
}

// Complete resolves the release and the namespace.
func (o *rollbackOptions) Complete(args []string) error {
	return o.releaseTarget.complete(o.g, args)
}

// Validate checks the release name and the flags.
func (o *rollbackOptions) Validate() error {
	if err := release.ValidateName(o.release); err != nil {
		return err
	}
	if err := validateRecordOutput(o.output); err != nil {
		return err
	}
	if err := o.progress.Validate(); err != nil {
		return err
	}
	if err := o.lock.Validate(); err != nil {
		return err
	}
	if o.toRevision < 0 {
		return newUsageError("--to-revision %d: must be 1 or more (0: the previous good revision)", o.toRevision)
	}
	if o.timeout <= 0 {
		return newUsageError("--timeout %s: must be positive", o.timeout)
	}
	if o.historyMax < 0 {
		return newUsageError("--history-max %d: must be 0 (unlimited) or more", o.historyMax)
	}
	return nil
}

// Run rolls back and prints the result.
func (o *rollbackOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	engine, err := openEngine(o.g, o.newEngine, o.namespace, wait.RolloutOptions{})
	if err != nil {
		return err
	}
	o.lock.apply(engine)
	printer := o.progress.printer(o.g.Streams.ErrOut)
	engine.Progress = printer.Print
	engine.UseRedactor(printer.red)
	res, err := release.NewRollbacker(engine).Rollback(ctx, release.RollbackOptions{
		Name:           o.release,
		ToRevision:     o.toRevision,
		Timeout:        givenTimeout(o.timeoutGiven, o.timeout),
		HistoryMax:     o.historyMax,
		ForceUnlock:    o.forceUnlock,
		ForceConflicts: o.forceConflicts,
	})
	return finishOperation(o.g.Streams.Out, o.output, printer, res, err)
}
