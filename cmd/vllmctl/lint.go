package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/charts/lint"
)

// lintRelease is the release name lint renders charts with (as
// `helm template` without a name).
const lintRelease = "release-name"

// lintOptions are the inputs of `vllmctl lint [CHART]`.
type lintOptions struct {
	g      *GlobalOptions
	render RenderFlags
	strict bool
	output outputFlags

	chart *chart.Chart
	opts  charts.RenderOptions
}

// lintReport is the -o json|yaml document.
type lintReport struct {
	Findings []lint.Finding `json:"findings"`
	Errors   int            `json:"errors"`
	Warnings int            `json:"warnings"`
}

// lintFailedError reports error findings (exit 2); the findings themselves
// are already on stdout.
type lintFailedError struct {
	errors   int
	promoted int // warnings counted as errors by --strict
}

func (e lintFailedError) Error() string {
	if e.promoted > 0 {
		return fmt.Sprintf("lint: %d error(s), %d of them warnings counted as errors with --strict", e.errors, e.promoted)
	}
	return fmt.Sprintf("lint: %d error(s)", e.errors)
}

func (e lintFailedError) ExitCode() int { return ExitInvalid }

func newLintCommand(g *GlobalOptions) *cobra.Command {
	o := &lintOptions{g: g}
	var ruleHelp strings.Builder
	for _, r := range lint.Rules() {
		fmt.Fprintf(&ruleHelp, "  %s %-7s %s\n", r.ID, r.Severity, r.Summary)
	}
	cmd := &cobra.Command{
		Use:   "lint [CHART]",
		Short: "Check a chart's values against its schema and its objects against inference rules, no cluster needed",
		Long: "Render CHART (a chart directory, a packaged .tgz, a built-in chart, or a chart of a repository:\n" +
			"REPO/NAME, or NAME with --repo URL, at --version; default \"vllm\") as `vllmctl template`\n" +
			"does, with release name \"" + lintRelease + "\", then check the rendered workloads, those of its\n" +
			"subcharts included (each finding names the template of its object):\n\n" +
			ruleHelp.String() + "\n" +
			"Values rejected by the chart's values.schema.json fail with exit code 2 and the values path.\n" +
			"The exit code is 2 when any finding is an error (with --strict: an error or a warning), else 0.\n" +
			"The release namespace is -n, else the kubeconfig's, else \"default\" — which itself raises VL008:\n" +
			"lint with the namespace you deploy to.",
		Example: "  vllmctl lint -n inference\n" +
			"  vllmctl lint ./mychart -n inference -f prod.yaml --strict -o json",
		Args: cobra.MaximumNArgs(1),
		RunE: runCommand(o),
	}
	o.render.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.strict, "strict", false, "treat warnings as errors (exit code 2)")
	o.output.AddFlags(cmd.Flags())
	return cmd
}

// Complete resolves the namespace and loads the chart.
func (o *lintOptions) Complete(cmd *cobra.Command, args []string) error {
	ns, err := localNamespace(o.g)
	if err != nil {
		return err
	}
	o.chart, o.opts, err = o.render.Resolve(commandContext(cmd), o.g.Streams.In, append([]string{lintRelease}, args...), ns)
	return err
}

// Validate checks the output format.
func (o *lintOptions) Validate() error {
	return o.output.Validate()
}

// Run renders the chart, lints the objects and prints the findings. It
// returns a lintFailedError (exit 2) when there are error findings.
func (o *lintOptions) Run(ctx context.Context) error {
	r, err := charts.RenderContext(ctx, o.chart, o.opts)
	if err != nil {
		return err
	}
	printWarnings(o.g.Streams.ErrOut, r.Warnings)
	findings := lint.Run(r.Objects, lint.Options{Namespace: o.opts.Namespace, Source: r.Source})
	promoted := 0
	if o.strict {
		promoted = lint.Strict(findings)
	}
	errs, warns, infos := lint.Counts(findings)
	if err := writeLintReport(o.g.Streams.Out, o.output.format, findings, errs, warns); err != nil {
		return err
	}
	fmt.Fprintf(o.g.Streams.ErrOut, "lint %s: %d error(s), %d warning(s), %d info\n", r.Chart.Name, errs, warns, infos)
	if errs > 0 {
		return lintFailedError{errors: errs, promoted: promoted}
	}
	return nil
}

// writeLintReport prints the findings as a table (nothing when there are
// none) or as one JSON or YAML document.
func writeLintReport(w io.Writer, format string, findings []lint.Finding, errs, warns int) error {
	if findings == nil {
		findings = []lint.Finding{}
	}
	var out []byte
	var err error
	switch format {
	case "json":
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // keep ">=" in messages readable
		err = enc.Encode(lintReport{Findings: findings, Errors: errs, Warnings: warns})
		out = buf.Bytes()
	case "yaml":
		out, err = yaml.Marshal(lintReport{Findings: findings, Errors: errs, Warnings: warns})
	default:
		if len(findings) == 0 {
			return nil
		}
		tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
		fmt.Fprintln(tw, "SEVERITY\tRULE\tOBJECT\tTEMPLATE\tFIELD\tMESSAGE")
		for _, f := range findings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Severity, f.Rule, f.Object, recordCell(f.Template), f.Field, oneLine(f.Message))
		}
		return tw.Flush()
	}
	if err != nil {
		return fmt.Errorf("encode lint report: %w", err)
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("write lint report: %w", err)
	}
	return nil
}

// oneLine keeps a table cell on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
