package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/helmrecords"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// adoptOptions are the inputs of `vllmctl adopt RELEASE`.
type adoptOptions struct {
	g        *GlobalOptions
	progress progressFlags
	output   outputFlags

	helm              helmFlags
	dryRun            bool
	force             bool
	removeHelmRecords bool
	conflicts         conflictFlags

	releaseTarget
}

func newAdoptCommand(g *GlobalOptions) *cobra.Command {
	o := &adoptOptions{g: g}
	o.conflicts.help = forceConflictsHelp
	cmd := &cobra.Command{
		Use:   "adopt RELEASE",
		Short: "Move a Helm release to vllmctl, history included",
		Long: "Read the Helm release's records (Secrets sh.helm.release.v1.RELEASE.vN, or ConfigMaps with\n" +
			"--helm-driver configmap) and write one vllmctl record per Helm revision: the same revision numbers,\n" +
			"statuses, chart, values, manifests, hooks and times, the deployed one current. The deployed\n" +
			"revision's objects get vllmctl's field manager in place of Helm's (server-side or client-side apply)\n" +
			"and vllmctl's ownership labels; no pod template changes and no pod restarts. Deployment ReplicaSets\n" +
			"still there are tied to the revisions whose pod template they carry, so `rollback --to-revision`\n" +
			"reaches a Helm-era revision. Helm's records are kept, labelled owner=vllmctl-adopted (helm no\n" +
			"longer lists the release), unless --remove-helm-records.\n\n" +
			"Exit status: 0 adopted (or planned, with --dry-run), 2 no such Helm release or the release already\n" +
			"has vllmctl records (--force replaces them), 5 a Helm operation is in progress, 6 a Helm record is\n" +
			"unreadable or the cluster refused.",
		Example: "  vllmctl adopt chat -n inference --dry-run\n" +
			"  vllmctl adopt chat -n inference -o json",
		Args: cobra.ExactArgs(1),
		RunE: runCommand(o),
	}
	f := cmd.Flags()
	o.progress.AddFlags(f)
	o.output.AddFlags(f)
	o.conflicts.AddFlags(f)
	o.helm.AddFlags(f, "the field managers whose fields move to vllmctl")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the plan (revisions, objects, field managers to move) and change nothing")
	f.BoolVar(&o.force, "force", false, "replace the release's vllmctl records, if it has any")
	f.BoolVar(&o.removeHelmRecords, "remove-helm-records", false, "delete Helm's records instead of labelling them as adopted")
	return cmd
}

// Complete resolves the release and the namespace.
func (o *adoptOptions) Complete(_ *cobra.Command, args []string) error {
	return o.releaseTarget.complete(o.g, args)
}

// Validate checks the release name and the flags.
func (o *adoptOptions) Validate() error {
	if err := storage.ValidateName(o.release); err != nil {
		return err
	}
	return validateAll(o.output.Validate, o.progress.Validate, o.helm.Validate)
}

// Run adopts and prints what was done.
func (o *adoptOptions) Run(ctx context.Context) error {
	engine, mover, printer, err := openHelmOperation(o.g, &o.progress, o.namespace)
	if err != nil {
		return err
	}
	res, err := release.NewAdopter(engine, mover).Adopt(ctx, release.AdoptOptions{
		Name: o.release, Driver: o.helm.driver, HelmManagers: o.helm.managers, DryRun: o.dryRun, Force: o.force,
		RemoveHelmRecords: o.removeHelmRecords, ForceConflicts: o.conflicts.force,
	})
	return finishWith(printer, res != nil && (err == nil || o.dryRun), func() error { return o.write(res) }, err)
}

func (o *adoptOptions) write(res *release.AdoptResult) error {
	head := fmt.Sprintf("Helm release %s in namespace %s, %d revisions, current %d", res.Release, res.Namespace, len(res.Revisions), res.Current)
	return writeMoveResult(o.g.Streams.Out, o.output.format, res, "ADOPTED", res.DryRun, head, func(b *strings.Builder) error {
		tw := newRecordTable(b)
		fmt.Fprintln(tw, "REVISION\tSTATUS\tCHART\tREPLICASETS\tDESCRIPTION")
		for _, r := range res.Revisions {
			var rss []string
			for _, rs := range r.ReplicaSets {
				rss = append(rss, rs.Name)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.Revision, r.Status, recordCell(r.Chart), recordCell(strings.Join(rss, ",")), recordCell(r.Description))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		writeMoves(b, res.Objects, "vllmctl")
		action := "labelled owner=vllmctl-adopted (helm no longer lists the release)"
		if res.HelmRecordsAction == "removed" {
			action = "removed"
		}
		if res.DryRun {
			action = "to be " + action
		}
		fmt.Fprintf(b, "HELM RECORDS: %s: %s\n", action, strings.Join(res.HelmRecords, ", "))
		if len(res.Replaced) > 0 {
			fmt.Fprintf(b, "REPLACED vllmctl revisions: %v\n", res.Replaced)
		}
		if res.HistoryNote != "" {
			fmt.Fprintf(b, "NOTE: %s\n", res.HistoryNote)
		}
		return nil
	})
}

// writeMoveResult writes the result of adopt or handover: the document
// (json, yaml), or the table: a head line (verb, or the dry run's PLAN,
// then head), then what body writes.
func writeMoveResult(out io.Writer, format string, doc any, verb string, dryRun bool, head string, body func(*strings.Builder) error) error {
	if format != "table" {
		return writeRecordDocument(out, format, doc)
	}
	if dryRun {
		verb = "PLAN (dry run, nothing changed)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", verb, head)
	if err := body(&b); err != nil {
		return err
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// writeMoves writes the FIELD MANAGERS block of adopt and handover: each
// object and the field managers whose fields moved to `to`.
func writeMoves(b *strings.Builder, moves []cluster.ManagerMove, to string) {
	b.WriteString("FIELD MANAGERS:\n")
	for _, m := range moves {
		switch {
		case m.Missing:
			fmt.Fprintf(b, "  %s: missing\n", m.Object)
		case len(m.Moved) == 0:
			fmt.Fprintf(b, "  %s: nothing to move\n", m.Object)
		default:
			fmt.Fprintf(b, "  %s: %s -> %s\n", m.Object, strings.Join(m.Moved, ", "), to)
		}
	}
}

// helmFlags are --helm-driver and --helm-field-manager, of adopt and
// handover.
type helmFlags struct {
	driverName string
	driver     helmrecords.Driver
	managers   []string
}

// AddFlags registers the flags on fs, --helm-field-manager with help.
func (h *helmFlags) AddFlags(fs *pflag.FlagSet, managerHelp string) {
	fs.StringVar(&h.driverName, "helm-driver", "secret", "Helm's storage driver: secret or configmap")
	fs.StringSliceVar(&h.managers, "helm-field-manager", []string{"helm"}, managerHelp)
}

// Validate checks the driver and the field managers.
func (h *helmFlags) Validate() error {
	d, err := helmrecords.ParseDriver(h.driverName)
	if err != nil {
		return newUsageError("%v", err)
	}
	h.driver = d
	for _, m := range h.managers {
		if strings.TrimSpace(m) == "" || m == "vllmctl" {
			return newUsageError("--helm-field-manager %q: want the name of Helm's field manager (helm by default)", m)
		}
	}
	return nil
}

// openHelmOperation opens the release engine of an operation that moves
// field managers (adopt, handover), with its mover.
func openHelmOperation(g *GlobalOptions, p *progressFlags, namespace string) (*release.Engine, release.ManagerMover, *progressPrinter, error) {
	engine, printer, err := openOperation(g, p, namespace, wait.RolloutOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	mover, ok := engine.Objects.(release.ManagerMover)
	if !ok {
		return nil, nil, nil, errors.New("the cluster client cannot move field managers")
	}
	return engine, mover, printer, nil
}
