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
		Short:   "List a chart's dependencies, vendor them into its charts/",
		Long: "The dependencies of a chart are the charts its Chart.yaml declares; they render from the\n" +
			"chart's charts/ directory (directories or .tgz archives), as with Helm. `list` shows whether\n" +
			"each is there; `update` fetches them (file:// paths, chart repositories, OCI registries) into\n" +
			"charts/ and writes Chart.lock, as `helm dependency update` does.",
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
	source chartSourceFlags

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
		Example: "  vllmctl dependency list ./mychart\n  vllmctl dependency list ./mychart -o json\n" +
			"  vllmctl dependency list oci://registry.example.com/charts/app --version ~1.2",
		Args: cobra.ExactArgs(1),
		RunE: runCommand(o),
	}
	o.output.AddFlags(cmd.Flags())
	o.source.AddFlags(cmd.Flags())
	return cmd
}

// Complete loads the chart.
// CHART may also be a chart of a repository (REPO/NAME, NAME with --repo)
// or of an OCI registry (oci://…), with the chart source flags.
func (o *dependencyListOptions) Complete(cmd *cobra.Command, args []string) error {
	o.chartRef = args[0]
	so, err := o.source.options(o.g.Streams.In)
	if err != nil {
		return err
	}
	o.chart, _, err = source.Load(commandContext(cmd), source.Settings(), o.chartRef, so)
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
	g      *GlobalOptions
	source chartSourceFlags

	dir  string
	opts source.Options
}

func newDependencyUpdateCommand(g *GlobalOptions) *cobra.Command {
	o := &dependencyUpdateOptions{g: g}
	cmd := &cobra.Command{
		Use:     "update CHART",
		Aliases: []string{"up"},
		Short:   "Vendor the dependencies into the chart's charts/, write Chart.lock",
		Long: "Fetch each dependency of the chart directory CHART into CHART/charts/, delete the archives\n" +
			"of charts/ no dependency produces any more, and write CHART/Chart.lock, as `helm dependency\n" +
			"update` does (the same archives and lock file). A dependency's repository is a file:// path\n" +
			"(relative to CHART; packed), a chart repository URL (https://…) or @NAME of a repository added\n" +
			"with `vllmctl repo add` (the highest version of its index within the range), or an OCI\n" +
			"registry oci://HOST/PATH (the highest tag within the range); a dependency without one must\n" +
			"already be in charts/. Repositories and registries are reached with Helm's downloader,\n" +
			"repositories.yaml (with the credentials stored there) and registry config (`vllmctl registry\n" +
			"login`); the flags below apply to OCI registries, as helm's. Nothing in charts/ changes unless\n" +
			"every dependency was fetched: a repository or registry that cannot be reached or refuses the\n" +
			"credentials is exit 6, a chart or version that is not there exit 2. Progress goes to stderr.",
		Example: "  vllmctl dependency update ./mychart\n" +
			"  echo \"$TOKEN\" | vllmctl dependency update ./mychart --username ci --password-stdin",
		Args: cobra.ExactArgs(1),
		RunE: runCommand(o),
	}
	o.source.addRegistryFlags(cmd.Flags())
	return cmd
}

// Complete takes the chart directory and reads the password with
// --password-stdin.
func (o *dependencyUpdateOptions) Complete(_ *cobra.Command, args []string) error {
	o.dir = args[0]
	var err error
	o.opts, err = o.source.options(o.g.Streams.In)
	return err
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
func (o *dependencyUpdateOptions) Run(ctx context.Context) error {
	return source.UpdateDependencies(ctx, source.Settings(), o.dir, o.opts, o.g.Streams.ErrOut)
}
