package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/release/storage"
)

// listOptions are the inputs of `vllmctl list`.
type listOptions struct {
	g *GlobalOptions

	output        outputFlags
	allNamespaces bool

	namespace string
	store     storage.Store

	// loc is the time zone of the table's times; nil: local time.
	loc *time.Location
}

func newListCommand(g *GlobalOptions) *cobra.Command {
	return listCommand(&listOptions{g: g})
}

func listCommand(o *listOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the releases of a namespace",
		Long: "List the releases of the namespace (-A: of all namespaces), one row per release showing its\n" +
			"latest revision.",
		Args: cobra.NoArgs,
		RunE: runCommand(o),
	}
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list releases in all namespaces")
	return cmd
}

// Complete resolves the namespace and the record store.
func (o *listOptions) Complete(*cobra.Command, []string) error {
	ns, err := recordNamespace(o.g)
	if err != nil {
		return err
	}
	o.namespace = ns
	if o.loc == nil {
		o.loc = time.Local
	}
	o.store, err = o.g.Factory.Store(ns)
	return err
}

// Validate checks the output format.
func (o *listOptions) Validate() error {
	return o.output.Validate()
}

// listRow is one release in `list -o json|yaml`.
type listRow struct {
	Name       string         `json:"name"`
	Namespace  string         `json:"namespace"`
	Revision   int            `json:"revision"`
	Status     storage.Status `json:"status"`
	Chart      string         `json:"chart"`
	AppVersion string         `json:"appVersion"`
	Updated    time.Time      `json:"updated"`
}

// Run prints one row per release: its latest revision. Only those records
// are decoded.
func (o *listOptions) Run(ctx context.Context) error {
	ns := o.namespace
	if o.allNamespaces {
		ns = metav1.NamespaceAll
	}
	entries, err := o.store.ListAll(ctx, ns)
	if err != nil {
		return err
	}
	rows := []listRow{}
	for _, e := range storage.LatestPerRelease(entries) {
		r, err := e.Release()
		if err != nil {
			// One unreadable record never hides the other releases.
			fmt.Fprintf(o.g.Streams.ErrOut, "warning: %v\n", err)
			rows = append(rows, listRow{Name: e.Name, Namespace: e.Namespace, Revision: e.Revision, Status: statusUnreadable})
			continue
		}
		rows = append(rows, listRow{
			Name:       r.Name,
			Namespace:  r.Namespace,
			Revision:   r.Revision,
			Status:     r.Status,
			Chart:      r.Chart.String(),
			AppVersion: r.Chart.AppVersion,
			Updated:    r.Updated,
		})
	}
	if o.output.format != "table" {
		return writeRecordDocument(o.g.Streams.Out, o.output.format, rows)
	}
	if len(rows) == 0 {
		where := "namespace " + o.namespace
		if o.allNamespaces {
			where = "any namespace"
		}
		_, err := fmt.Fprintf(o.g.Streams.ErrOut, "No releases found in %s.\n", where)
		return err
	}
	tw := newRecordTable(o.g.Streams.Out)
	fmt.Fprintln(tw, "NAME\tNAMESPACE\tREVISION\tSTATUS\tCHART\tAPP VERSION\tUPDATED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.Name, r.Namespace, r.Revision, r.Status,
			recordCell(r.Chart), recordCell(r.AppVersion), recordTime(r.Updated, o.loc))
	}
	return tw.Flush()
}
