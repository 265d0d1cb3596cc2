package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/release/analysis"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// statusOptions are the inputs of `vllmctl status RELEASE`.
type statusOptions struct {
	g *GlobalOptions

	output outputFlags

	releaseTarget

	// loc is the time zone of the table's times; nil: local time.
	loc *time.Location
}

func newStatusCommand(g *GlobalOptions) *cobra.Command {
	return statusCommand(&statusOptions{g: g})
}

func statusCommand(o *statusOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status RELEASE",
		Short: "Show the current revision of a release, its objects and their live status",
		Long: "Show the current (highest) revision of RELEASE, the live status of each of its objects (kstatus:\n" +
			"Current, InProgress, Failed, Terminating, or NotFound) and the ReplicaSets running pods of its\n" +
			"Deployments.",
		Args: cobra.ExactArgs(1),
		RunE: runCommand(o),
	}
	o.output.AddFlags(cmd.Flags())
	return cmd
}

// Complete resolves the release and the namespace.
func (o *statusOptions) Complete(_ *cobra.Command, args []string) error {
	if err := o.releaseTarget.complete(o.g, args); err != nil {
		return err
	}
	if o.loc == nil {
		o.loc = time.Local
	}
	return nil
}

// Validate checks the release name and the output format.
func (o *statusOptions) Validate() error {
	if err := storage.ValidateName(o.release); err != nil {
		return err
	}
	return o.output.Validate()
}

// Run prints the release's status.
func (o *statusOptions) Run(ctx context.Context) error {
	engine, err := o.g.Factory.Engine(o.namespace, wait.RolloutOptions{})
	if err != nil {
		return err
	}
	rep, err := engine.Status(ctx, o.release)
	if err != nil {
		return err
	}
	if o.output.format != "table" {
		return writeRecordDocument(o.g.Streams.Out, o.output.format, rep)
	}
	var b strings.Builder
	field := func(name, value string) { fmt.Fprintf(&b, "%s: %s\n", name, value) }
	field("RELEASE", rep.Release)
	field("NAMESPACE", rep.Namespace)
	field("REVISION", strconv.Itoa(rep.Revision))
	field("STATUS", string(rep.Status))
	field("DESCRIPTION", recordCell(rep.Description))
	field("CHART", recordCell(rep.Chart))
	field("APP VERSION", recordCell(rep.AppVersion))
	if rep.ChartSource != "" {
		field("CHART SOURCE", recordCell(rep.ChartSource+" ("+rep.ChartDigest+")"))
	}
	if rep.PostRenderer != nil {
		field("POST-RENDERER", recordCell(rep.PostRenderer.String()))
	}
	if rep.ChartSigner != "" || rep.ChartSignedDigest != "" {
		field("CHART SIGNED BY", recordCell(rep.ChartSigner+" ("+rep.ChartSignedDigest+")"))
	}
	field("UPDATED", recordTime(rep.Updated, o.loc))
	if rep.ServeCheck != nil {
		field("SERVE CHECK", recordCell(serveCell(rep.ServeCheck)))
	}
	writeFailure(&b, rep.Failure)
	for _, l := range rep.CanaryLeftovers {
		field("CANARY HELD", recordCell(l.String()))
	}
	writeAnalysis(&b, rep.Analysis, rep.AnalysisRevision)
	if len(rep.HelmRecords) > 0 {
		field("OWNED BY HELM TOO", recordCell(strings.Join(rep.HelmRecords, ", ")+
			": an adopt did not finish; run `vllmctl adopt "+rep.Release+" --force` again"))
	}
	if _, err := fmt.Fprint(o.g.Streams.Out, b.String()); err != nil {
		return err
	}

	fmt.Fprintln(o.g.Streams.Out)
	tw := newRecordTable(o.g.Streams.Out)
	fmt.Fprintln(tw, "OBJECT\tSTATUS\tMESSAGE")
	for _, obj := range rep.Objects {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", obj.Object, obj.Status, recordCell(obj.Message))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(o.g.Streams.Out)
	if len(rep.StatefulSets) > 0 {
		tw = newRecordTable(o.g.Streams.Out)
		fmt.Fprintln(tw, "STATEFULSET	CURRENT-REVISION	UPDATE-REVISION	READY	UPDATED	ROLLED OUT")
		for _, s := range rep.StatefulSets {
			done := "no"
			if s.RolledOut {
				done = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%s\n", s.StatefulSet, recordCell(s.CurrentRevision), recordCell(s.UpdateRevision),
				s.ReadyReplicas, s.Replicas, s.UpdatedReplicas, done)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(rep.ReplicaSets) == 0 {
			return nil
		}
		fmt.Fprintln(o.g.Streams.Out)
	}
	if len(rep.ReplicaSets) == 0 {
		_, err := fmt.Fprintln(o.g.Streams.Out, "No ReplicaSet is running pods.")
		return err
	}
	tw = newRecordTable(o.g.Streams.Out)
	fmt.Fprintln(tw, "DEPLOYMENT\tREPLICASET\tPOD-TEMPLATE-HASH\tREVISION\tREADY\tAVAILABLE\tCURRENT")
	for _, rs := range rep.ReplicaSets {
		current := "no"
		if rs.Current {
			current = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d/%d\t%d\t%s\n", rs.Deployment, rs.Name, rs.PodTemplateHash, rs.Revision,
			rs.ReadyReplicas, rs.Replicas, rs.AvailableReplicas, current)
	}
	return tw.Flush()
}

// writeAnalysis writes a canary analysis: its outcome, then one line per
// measurement.
func writeAnalysis(b *strings.Builder, r *storage.AnalysisReport, revision int) {
	if r == nil {
		return
	}
	head := fmt.Sprintf("%s (revision %d, %s provider, %d × %s)", r.Outcome, revision, r.Provider, r.Count, r.Interval)
	if r.Reason != "" && r.Outcome != storage.AnalysisPassed {
		head += ": " + r.Reason
	}
	fmt.Fprintf(b, "ANALYSIS: %s\n", recordCell(head))
	if r.Load != nil {
		fmt.Fprintf(b, "ANALYSIS LOAD: %g rps, %d sent, %d failed, %d dropped\n", r.Load.RPS, r.Load.Sent, r.Load.Failed, r.Load.Dropped)
	}
	for _, m := range r.Measurements {
		fmt.Fprintf(b, "  %s %s\n", m.At.UTC().Format(time.RFC3339), recordCell(analysis.DescribeMeasurement(m)))
	}
}
