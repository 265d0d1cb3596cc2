package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/wait"
)

// uninstallOptions are the inputs of `vllmctl uninstall RELEASE`.
type uninstallOptions struct {
	g        *GlobalOptions
	progress progressFlags

	output      string
	keepHistory bool
	timeout     time.Duration
	forceUnlock bool

	releaseTarget

	// newEngine builds the release engine; nil: the kubeconfig's cluster.
	newEngine engineFactory
}

func newUninstallCommand(g *GlobalOptions) *cobra.Command {
	return uninstallCommand(&uninstallOptions{g: g})
}

func uninstallCommand(o *uninstallOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uninstall RELEASE",
		Short: "Delete a release's objects and its records",
		Long: "Take RELEASE's lock, delete its objects (those of the deployed revision and of any later failed\n" +
			"one, still labelled as the release's) in reverse apply order with foreground propagation, then\n" +
			"delete its records; --keep-history keeps them, the last one marked uninstalled. Namespaces are\n" +
			"never deleted.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
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
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	f.BoolVar(&o.keepHistory, "keep-history", false, "keep the records, the last one marked uninstalled")
	f.DurationVar(&o.timeout, "timeout", release.DefaultTimeout, "the age after which another operation's lock is stale")
	f.BoolVar(&o.forceUnlock, "force-unlock", false, "take over the lock of another operation on the release")
	return cmd
}

// Complete resolves the release and the namespace.
func (o *uninstallOptions) Complete(args []string) error {
	return o.releaseTarget.complete(o.g, args)
}

// Validate checks the release name and the flags.
func (o *uninstallOptions) Validate() error {
	if err := release.ValidateName(o.release); err != nil {
		return err
	}
	if err := validateRecordOutput(o.output); err != nil {
		return err
	}
	if o.timeout <= 0 {
		return newUsageError("--timeout %s: must be positive", o.timeout)
	}
	return o.progress.Validate()
}

// Run uninstalls and prints what was deleted.
func (o *uninstallOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	engine, err := openEngine(o.g, o.newEngine, o.namespace, wait.RolloutOptions{})
	if err != nil {
		return err
	}
	printer := o.progress.printer(o.g.Streams.ErrOut)
	engine.Progress = printer.Print
	engine.UseRedactor(printer.red)
	res, err := release.NewUninstaller(engine).Uninstall(ctx, release.UninstallOptions{
		Name: o.release, KeepHistory: o.keepHistory, Timeout: o.timeout, ForceUnlock: o.forceUnlock,
	})
	return finishWith(printer, res != nil, func() error { return o.write(res) }, err)
}

func (o *uninstallOptions) write(res *release.UninstallResult) error {
	if o.output != "table" {
		return writeRecordDocument(o.g.Streams.Out, o.output, res)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "RELEASE: %s\n", res.Release)
	fmt.Fprintf(&b, "NAMESPACE: %s\n", res.Namespace)
	fmt.Fprintf(&b, "STATUS: %s\n", res.Status)
	if res.KeptHistory {
		fmt.Fprintf(&b, "HISTORY: kept, revision %d marked %s\n", res.Revision, res.Status)
	} else {
		revs := make([]string, len(res.DeletedRecords))
		for i, r := range res.DeletedRecords {
			revs[i] = strconv.Itoa(r)
		}
		fmt.Fprintf(&b, "HISTORY: deleted (revisions %s)\n", recordCell(strings.Join(revs, ", ")))
	}
	b.WriteString("DELETED:")
	if len(res.Deleted) == 0 {
		b.WriteString(" <none>")
	}
	b.WriteString("\n")
	for _, d := range res.Deleted {
		fmt.Fprintf(&b, "  %s\n", d)
	}
	if len(res.Kept) > 0 {
		b.WriteString("KEPT:\n")
		for _, k := range res.Kept {
			fmt.Fprintf(&b, "  %s: %s\n", k.Object, recordCell(k.Reason))
		}
	}
	if len(res.KeptCRDs) > 0 {
		fmt.Fprintf(&b, "CRDS KEPT: %s\n", strings.Join(res.KeptCRDs, ", "))
	}
	_, err := fmt.Fprint(o.g.Streams.Out, b.String())
	return err
}
