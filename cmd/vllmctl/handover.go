package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// handoverOptions are the inputs of `vllmctl handover RELEASE --to helm`.
type handoverOptions struct {
	g        *GlobalOptions
	progress progressFlags
	output   outputFlags

	to            string
	helm          helmFlags
	dryRun        bool
	removeRecords bool
	conflicts     conflictFlags

	releaseTarget
}

func newHandoverCommand(g *GlobalOptions) *cobra.Command {
	o := &handoverOptions{g: g}
	o.conflicts.help = forceConflictsHelp
	cmd := &cobra.Command{
		Use:   "handover RELEASE --to helm",
		Short: "Give a release back to Helm, history included",
		Long: "Write one Helm record per vllmctl revision (Secrets sh.helm.release.v1.RELEASE.vN, or ConfigMaps with\n" +
			"--helm-driver configmap; the records adopt read are given back as they were), move the fields vllmctl\n" +
			"owns in the deployed revision's objects to Helm's field manager and give them Helm's ownership keys\n" +
			"(app.kubernetes.io/managed-by=Helm, meta.helm.sh/release-name and -namespace; no pod template\n" +
			"changes), then mark vllmctl's deployed record handed-over (or remove the records with\n" +
			"--remove-records). helm history, upgrade and rollback then work; vllmctl refuses to act on the\n" +
			"release until `vllmctl adopt` takes it back.\n\n" +
			"Exit status: 0 handed over (or planned, with --dry-run), 2 no deployed revision, handed over already,\n" +
			"or Helm records of that name exist, 5 an operation holds the release, 6 the cluster refused.",
		Example: "  vllmctl handover chat -n inference --to helm --dry-run\n" +
			"  vllmctl handover chat -n inference --to helm",
		Args: cobra.ExactArgs(1),
		RunE: runCommand(o),
	}
	f := cmd.Flags()
	o.progress.AddFlags(f)
	o.output.AddFlags(f)
	o.conflicts.AddFlags(f)
	f.StringVar(&o.to, "to", "", "the tool the release goes to: helm (required)")
	o.helm.AddFlags(f, "the field manager Helm applies with (one)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the plan (Helm records, objects, field managers to move) and change nothing")
	f.BoolVar(&o.removeRecords, "remove-records", false, "delete vllmctl's records instead of marking the deployed one handed-over")
	return cmd
}

// Complete resolves the release and the namespace.
func (o *handoverOptions) Complete(_ *cobra.Command, args []string) error {
	return o.releaseTarget.complete(o.g, args)
}

// Validate checks the release name and the flags.
func (o *handoverOptions) Validate() error {
	if err := storage.ValidateName(o.release); err != nil {
		return err
	}
	to := func() error {
		if o.to != "helm" {
			return newUsageError("--to %q: want helm (the only tool a release can be handed over to)", o.to)
		}
		return nil
	}
	one := func() error {
		if len(o.helm.managers) != 1 {
			return newUsageError("--helm-field-manager %v: want one field manager, the one Helm applies with", o.helm.managers)
		}
		return nil
	}
	return validateAll(o.output.Validate, o.progress.Validate, to, o.helm.Validate, one)
}

// Run hands the release over and prints what was done.
func (o *handoverOptions) Run(ctx context.Context) error {
	engine, mover, printer, err := openHelmOperation(o.g, &o.progress, o.namespace)
	if err != nil {
		return err
	}
	res, err := release.NewHandoverer(engine, mover).Handover(ctx, release.HandoverOptions{
		Name: o.release, Driver: o.helm.driver, HelmManager: o.helm.managers[0], DryRun: o.dryRun, RemoveRecords: o.removeRecords,
		ForceConflicts: o.conflicts.force,
	})
	return finishWith(printer, res != nil && (err == nil || o.dryRun), func() error { return o.write(res) }, err)
}

func (o *handoverOptions) write(res *release.HandoverResult) error {
	head := fmt.Sprintf("release %s in namespace %s to Helm, %d revisions, current %d", res.Release, res.Namespace, len(res.Revisions), res.Current)
	return writeMoveResult(o.g.Streams.Out, o.output.format, res, "HANDED OVER", res.DryRun, head, func(b *strings.Builder) error {
		tw := newRecordTable(b)
		fmt.Fprintln(tw, "REVISION\tHELM STATUS\tCHART\tDESCRIPTION")
		for _, r := range res.Revisions {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.Revision, r.Status, recordCell(r.Chart), recordCell(r.Description))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		writeMoves(b, res.Objects, "helm")
		fmt.Fprintf(b, "HELM RECORDS: %s\n", strings.Join(res.HelmRecords, ", "))
		if res.RecordsAction == "removed" {
			b.WriteString("VLLMCTL RECORDS: removed\n")
		} else {
			fmt.Fprintf(b, "VLLMCTL RECORDS: kept, revision %d marked handed-over\n", res.Current)
		}
		return nil
	})
}
