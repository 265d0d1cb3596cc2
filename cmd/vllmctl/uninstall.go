package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// uninstallOptions are the inputs of `vllmctl uninstall RELEASE`.
type uninstallOptions struct {
	g        *GlobalOptions
	progress progressFlags

	output  outputFlags
	timeout timeoutFlags
	unlock  unlockFlags

	keepHistory bool

	releaseTarget
}

func newUninstallCommand(g *GlobalOptions) *cobra.Command {
	o := &uninstallOptions{g: g}
	o.timeout.help = staleLockTimeoutHelp
	cmd := &cobra.Command{
		Use:   "uninstall RELEASE",
		Short: "Delete a release's objects and its records",
		Long: "Take RELEASE's lock, delete its objects (those of the deployed revision and of any later failed\n" +
			"one, still labelled as the release's) in reverse apply order with foreground propagation, then\n" +
			"delete its records; --keep-history keeps them, the last one marked uninstalled. Namespaces are\n" +
			"never deleted.",
		Args: cobra.ExactArgs(1),
		RunE: runCommand(o),
	}
	f := cmd.Flags()
	o.progress.AddFlags(f)
	o.output.AddFlags(f)
	o.timeout.AddFlags(f)
	o.unlock.AddFlags(f)
	f.BoolVar(&o.keepHistory, "keep-history", false, "keep the records, the last one marked uninstalled")
	return cmd
}

// Complete resolves the release and the namespace.
func (o *uninstallOptions) Complete(_ *cobra.Command, args []string) error {
	return o.releaseTarget.complete(o.g, args)
}

// Validate checks the release name and the flags.
func (o *uninstallOptions) Validate() error {
	if err := storage.ValidateName(o.release); err != nil {
		return err
	}
	return validateAll(o.output.Validate, o.timeout.Validate, o.progress.Validate)
}

// Run uninstalls and prints what was deleted.
func (o *uninstallOptions) Run(ctx context.Context) error {
	engine, printer, err := openOperation(o.g, &o.progress, o.namespace, wait.RolloutOptions{})
	if err != nil {
		return err
	}
	res, err := engine.Uninstall(ctx, release.UninstallOptions{
		Name: o.release, KeepHistory: o.keepHistory, Timeout: o.timeout.timeout, ForceUnlock: o.unlock.force,
	})
	return finishWith(printer, res != nil, func() error { return o.write(res) }, err)
}

func (o *uninstallOptions) write(res *release.UninstallResult) error {
	if o.output.format != "table" {
		return writeRecordDocument(o.g.Streams.Out, o.output.format, res)
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
