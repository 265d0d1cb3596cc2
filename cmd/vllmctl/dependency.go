package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/charts/source"
)

func newDependencyCommand(g *GlobalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "dependency",
		Aliases: []string{"dep", "dependencies"},
		Short:   "List a chart's dependencies, vendor those in file:// repositories",
		Long: "The dependencies of a chart are the charts its Chart.yaml declares; they render from the\n" +
			"chart's charts/ directory (directories or .tgz archives), as with Helm. `list` shows whether\n" +
			"each is there; `update` packs those in file:// repositories into charts/ and writes Chart.lock,\n" +
			"as `helm dependency update` does. Remote repositories (https, oci) are out of scope: vendor\n" +
			"them with `helm dependency build CHART`.",
		Args: cobra.NoArgs,
		RunE: requireSubcommand("list or update"),
	}
	cmd.AddCommand(newDependencyListCommand(g), newDependencyUpdateCommand(g))
	return cmd
}

// dependencyListOptions are the inputs of `vllmctl dependency list CHART`.
type dependencyListOptions struct {
	g      *GlobalOptions
	output outputFlags

	chartRef string
	chart    *chart.Chart
}

func newDependencyListCommand(g *GlobalOptions) *cobra.Command {
	o := &dependencyListOptions{g: g}
	cmd := &cobra.Command{
		Use:     "list CHART",
		Aliases: []string{"ls"},
		Short:   "List the dependencies of a chart and whether they are in its charts/",
		Long: "One row per dependency of CHART's Chart.yaml: NAME (and alias), VERSION (the range asked\n" +
			"for), REPOSITORY and STATUS: ok (a chart of that name and a version in range is in charts/),\n" +
			"missing (none of that name), wrong version (one of that name, out of range) or disabled (the\n" +
			"chart's default values turn it off by its condition or tags; it renders without it).",
		Example: "  vllmctl dependency list ./mychart\n  vllmctl dependency list ./mychart -o json",
		Args:    cobra.ExactArgs(1),
		RunE:    runCommand(o),
	}
	o.output.AddFlags(cmd.Flags())
	return cmd
}

// Complete loads the chart.
// CHART may also be a chart of a repository (REPO/NAME, latest stable).
func (o *dependencyListOptions) Complete(cmd *cobra.Command, args []string) error {
	o.chartRef = args[0]
	var err error
	o.chart, _, err = source.Load(commandContext(cmd), source.Settings(), o.chartRef, source.Options{})
	return err
}

// Validate checks the output format.
func (o *dependencyListOptions) Validate() error {
	return o.output.Validate()
}

// Run prints the dependencies as a table or one JSON/YAML document.
func (o *dependencyListOptions) Run(_ context.Context) error {
	deps, err := charts.ListDependencies(o.chart)
	if err != nil {
		return err
	}
	if o.output.format != "table" {
		return writeRecordDocument(o.g.Streams.Out, o.output.format, deps)
	}
	if len(deps) == 0 {
		_, err := fmt.Fprintf(o.g.Streams.ErrOut, "chart %s has no dependencies\n", o.chartRef)
		return err
	}
	tw := newRecordTable(o.g.Streams.Out)
	fmt.Fprintln(tw, "NAME\tVERSION\tREPOSITORY\tSTATUS")
	for _, d := range deps {
		name := d.Name
		if d.Alias != "" {
			name += " (alias " + d.Alias + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, recordCell(d.Version), recordCell(d.Repository), d.Status)
	}
	return tw.Flush()
}

// dependencyUpdateOptions are the inputs of `vllmctl dependency update CHART`.
type dependencyUpdateOptions struct {
	g   *GlobalOptions
	dir string
}

func newDependencyUpdateCommand(g *GlobalOptions) *cobra.Command {
	o := &dependencyUpdateOptions{g: g}
	return &cobra.Command{
		Use:     "update CHART",
		Aliases: []string{"up"},
		Short:   "Vendor the dependencies in file:// repositories into the chart's charts/, write Chart.lock",
		Long: "Pack each dependency of the chart directory CHART whose repository is a file:// path (relative\n" +
			"to CHART) into CHART/charts/NAME-VERSION.tgz, delete the archives of charts/ no dependency\n" +
			"produces any more, and write CHART/Chart.lock, as `helm dependency update` does (the same\n" +
			"archives and lock file). Dependencies without a repository must already be in charts/.\n" +
			"A dependency in a remote repository (https, oci) is refused (exit 2) before anything is\n" +
			"written: fetch those with `helm dependency build CHART`. Progress goes to stderr.",
		Example: "  vllmctl dependency update ./mychart",
		Args:    cobra.ExactArgs(1),
		RunE:    runCommand(o),
	}
}

// Complete takes the chart directory.
func (o *dependencyUpdateOptions) Complete(_ *cobra.Command, args []string) error {
	o.dir = args[0]
	return nil
}

// Validate refuses a built-in chart name: only a directory can be updated.
func (o *dependencyUpdateOptions) Validate() error {
	if !strings.ContainsAny(o.dir, `/\`) && charts.IsBuiltin(o.dir) {
		return &charts.InputError{Source: "chart", File: o.dir,
			Msg: "is a built-in chart, which has no dependencies; give a chart directory (e.g. ./" + o.dir + ")"}
	}
	return nil
}

// Run vendors the dependencies.
func (o *dependencyUpdateOptions) Run(_ context.Context) error {
	return charts.UpdateDependencies(o.dir, o.g.Streams.ErrOut)
}
