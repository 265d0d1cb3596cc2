package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// historyOptions are the inputs of `vllmctl history RELEASE`.
type historyOptions struct {
	g *GlobalOptions

	output outputFlags
	repair bool

	releaseTarget
	store storage.Store

	// loc is the time zone of the table's times; nil: local time.
	loc *time.Location
}

func newHistoryCommand(g *GlobalOptions) *cobra.Command {
	return historyCommand(&historyOptions{g: g})
}

func historyCommand(o *historyOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history RELEASE",
		Short: "Show the revisions of a release",
		Long: "Show one row per recorded revision of RELEASE: when it was last updated, its status, chart,\n" +
			"app version, description and the ReplicaSets it produced.",
		Args: cobra.ExactArgs(1),
		RunE: runCommand(o),
	}
	o.output.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.repair, "repair", false,
		"replace every unreadable record of the release by a readable one marked failed (its manifest is lost)")
	return cmd
}

// Complete resolves the release, the namespace and the record store.
func (o *historyOptions) Complete(_ *cobra.Command, args []string) error {
	if err := o.releaseTarget.complete(o.g, args); err != nil {
		return err
	}
	if o.loc == nil {
		o.loc = time.Local
	}
	var err error
	o.store, err = o.g.Factory.Store(o.namespace)
	return err
}

// Validate checks the release name and the output format.
func (o *historyOptions) Validate() error {
	if err := storage.ValidateName(o.release); err != nil {
		return err
	}
	return o.output.Validate()
}

// historyRow is one revision in `history -o json|yaml`.
type historyRow struct {
	Revision int            `json:"revision"`
	Updated  time.Time      `json:"updated"`
	Status   storage.Status `json:"status"`
	release.ChartInfo
	Description string                  `json:"description"`
	ReplicaSets []storage.ReplicaSetRef `json:"replicaSets"`
	// ControllerRevisions are a grouped release's StatefulSet revisions.
	ControllerRevisions []storage.ControllerRevisionRef `json:"controllerRevisions,omitempty"`
	RollbackOf          int                             `json:"rollbackOf,omitempty"`
	Failure             *rollout.Diagnosis              `json:"failure,omitempty"`
	Canary              *storage.CanaryReport           `json:"canary,omitempty"`
	Analysis            *storage.AnalysisReport         `json:"analysis,omitempty"`
	ServeCheck          *rollout.ServeReport            `json:"serveCheck,omitempty"`
}

// Run prints the release's revisions. An unreadable record is a row with
// status "unreadable" and a warning on stderr; it never hides the others.
func (o *historyOptions) Run(ctx context.Context) error {
	if o.repair {
		repaired, err := storage.Repair(ctx, o.store, o.release, nil)
		for _, rev := range repaired {
			fmt.Fprintf(o.g.Streams.ErrOut, "repaired revision %d of release %s: its unreadable record is now marked failed\n", rev, o.release)
		}
		if err != nil {
			return err
		}
	}
	entries, err := storage.HistoryEntries(ctx, o.store, o.release)
	if err != nil {
		return err
	}
	rows := make([]historyRow, 0, len(entries))
	for _, e := range entries {
		r, err := e.Release()
		if err != nil {
			fmt.Fprintf(o.g.Streams.ErrOut, "warning: %v\n", err)
			rows = append(rows, historyRow{Revision: e.Revision, Status: statusUnreadable, Description: "unreadable record (was " + string(e.Status) + ")",
				ReplicaSets: []storage.ReplicaSetRef{}})
			continue
		}
		rs := r.ReplicaSets
		if rs == nil {
			rs = []storage.ReplicaSetRef{}
		}
		rows = append(rows, historyRow{
			Revision:            r.Revision,
			Updated:             r.Updated,
			Status:              r.Status,
			ChartInfo:           release.NewChartInfo(r.Chart),
			Description:         r.Description,
			ReplicaSets:         rs,
			ControllerRevisions: r.ControllerRevisions,
			RollbackOf:          r.RollbackOf,
			Failure:             r.Failure,
			Canary:              r.Canary,
			Analysis:            r.Analysis,
			ServeCheck:          r.ServeCheck,
		})
	}
	if o.output.format != "table" {
		return writeRecordDocument(o.g.Streams.Out, o.output.format, rows)
	}
	tw := newRecordTable(o.g.Streams.Out)
	fmt.Fprintln(tw, "REVISION\tUPDATED\tSTATUS\tCHART\tAPP VERSION\tDESCRIPTION\tREPLICASETS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Revision, recordTime(r.Updated, o.loc), r.Status,
			recordCell(r.Chart), recordCell(r.AppVersion), recordCell(r.Description), revisionsCell(r.ReplicaSets, r.ControllerRevisions))
	}
	return tw.Flush()
}
