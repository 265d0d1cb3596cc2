package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vllmctl/vllmctl/charts"
)

// templateOptions are the inputs of `vllmctl template RELEASE [CHART]`.
type templateOptions struct {
	g      *GlobalOptions
	render RenderFlags

	kubeVersion string
	includeCRDs bool

	chart *chart.Chart
	opts  charts.RenderOptions
}

func newTemplateCommand(g *GlobalOptions) *cobra.Command {
	o := &templateOptions{g: g}
	cmd := &cobra.Command{
		Use:   "template RELEASE [CHART]",
		Short: "Render a chart's manifests to stdout, no cluster needed",
		Long: "Render CHART (a chart directory, a packaged .tgz, a built-in chart, or a chart of a repository:\n" +
			"REPO/NAME, or NAME with --repo URL, at --version; default \"vllm\") for release RELEASE\n" +
			"as `helm template` would, mark every object as the release's (labels\n" +
			"app.kubernetes.io/managed-by=vllmctl and vllmctl.io/release=RELEASE, annotation\n" +
			"vllmctl.io/release-namespace=NAMESPACE; the chart's other labels stay as it renders them),\n" +
			"sort the objects in apply order and print them as one\n" +
			"YAML stream. The namespace is -n, else the kubeconfig's, else \"default\".\n\n" +
			"Subcharts in the chart's charts/ (directories or .tgz) render as with Helm: condition, tags,\n" +
			"alias, import-values, globals, their own values.schema.json. A dependency that is not in\n" +
			"charts/ is left out with a warning on stderr when it is disabled, and refused (exit 2) when it\n" +
			"is enabled. With --include-crds the CustomResourceDefinitions of the crds/ directories of the\n" +
			"chart and its enabled subcharts come first, as written.",
		Example: "  vllmctl template qwen\n" +
			"  vllmctl template qwen ./mychart -n inference -f prod.yaml --set resources.gpu=2\n" +
			"  vllmctl template shop ./umbrella --include-crds\n" +
			"  vllmctl template qwen models/vllm --version '~1.4'\n" +
			"  vllmctl template qwen vllm --repo https://charts.example.com --version 1.4.2",
		Args: cobra.RangeArgs(1, 2),
		RunE: runCommand(o),
	}
	o.render.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.kubeVersion, "kube-version", "",
		"Kubernetes version for .Capabilities.KubeVersion and the chart's kubeVersion constraint (default "+charts.DefaultKubeVersion+
			"; deploy and diff use the server's)")
	cmd.Flags().BoolVar(&o.includeCRDs, "include-crds", false,
		"print the CRDs of the crds/ directories of the chart and its enabled subcharts before the manifest")
	return cmd
}

// Complete resolves the namespace and loads the chart.
func (o *templateOptions) Complete(cmd *cobra.Command, args []string) error {
	ns, err := localNamespace(o.g)
	if err != nil {
		return err
	}
	o.chart, o.opts, err = o.render.Resolve(commandContext(cmd), o.g.Streams.In, args, ns)
	o.opts.KubeVersion = charts.KubeVersion(o.kubeVersion, "")
	return err
}

// Validate checks the release name (Resolve already did; kept for the
// Options pattern and for callers that set opts directly).
func (o *templateOptions) Validate() error {
	return charts.ValidateReleaseName(o.opts.ReleaseName)
}

// Run renders the chart and prints the manifest (the CRDs first with
// --include-crds, the hooks last, as helm template prints them) to stdout, the render's warnings to stderr.
func (o *templateOptions) Run(ctx context.Context) error {
	r, err := charts.RenderContext(ctx, o.chart, o.opts)
	if err != nil {
		return err
	}
	printWarnings(o.g.Streams.ErrOut, r.Warnings)
	out := r.Manifest
	if len(r.Hooks) > 0 {
		// After the objects, as helm template prints them.
		hooks, err := charts.Manifest(charts.HookObjects(r.Hooks))
		if err != nil {
			return err
		}
		if out != "" {
			out += "---\n"
		}
		out += hooks
	}
	if o.includeCRDs && len(r.CRDs) > 0 {
		crds, err := charts.Manifest(r.CRDs)
		if err != nil {
			return err
		}
		if out != "" {
			crds += "---\n"
		}
		out = crds + out
	}
	if _, err := fmt.Fprint(o.g.Streams.Out, out); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// printWarnings prints the warnings of a render, one line each.
func printWarnings(w io.Writer, warnings []string) {
	for _, line := range warnings {
		fmt.Fprintf(w, "warning: %s\n", line)
	}
}

// chartDir is the directory of the chart reference ref, for messages that
// name a command to run on it; "" for a built-in chart.
func chartDir(ref string) string {
	if !strings.ContainsAny(ref, `/\`) && charts.IsBuiltin(ref) {
		return ""
	}
	return ref
}
