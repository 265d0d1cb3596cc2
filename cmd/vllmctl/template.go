package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vllmctl/vllmctl/charts"
)

// templateOptions are the inputs of `vllmctl template RELEASE [CHART]`.
type templateOptions struct {
	g      *GlobalOptions
	render RenderFlags

	kubeVersion string

	chart *chart.Chart
	opts  charts.RenderOptions
}

func newTemplateCommand(g *GlobalOptions) *cobra.Command {
	o := &templateOptions{g: g}
	cmd := &cobra.Command{
		Use:   "template RELEASE [CHART]",
		Short: "Render a chart's manifests to stdout, no cluster needed",
		Long: "Render CHART (a chart directory or a built-in chart; default \"vllm\") for release RELEASE\n" +
			"as `helm template` would, label every object with app.kubernetes.io/managed-by=vllmctl and\n" +
			"app.kubernetes.io/instance=RELEASE, sort the objects in apply order and print them as one\n" +
			"YAML stream. The namespace is -n, else the kubeconfig's, else \"default\".",
		Example: "  vllmctl template qwen\n" +
			"  vllmctl template qwen ./mychart -n inference -f prod.yaml --set resources.gpu=2",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.render.AddFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.kubeVersion, "kube-version", "",
		"Kubernetes version for .Capabilities.KubeVersion and the chart's kubeVersion constraint (default "+charts.DefaultKubeVersion+
			"; deploy and diff use the server's)")
	return cmd
}

// Complete resolves the namespace and loads the chart.
func (o *templateOptions) Complete(args []string) error {
	ns, err := localNamespace(o.g)
	if err != nil {
		return err
	}
	o.chart, o.opts, err = o.render.Resolve(args, ns)
	o.opts.KubeVersion = charts.KubeVersion(o.kubeVersion, "")
	return err
}

// Validate checks the release name (Resolve already did; kept for the
// Options pattern and for callers that set opts directly).
func (o *templateOptions) Validate() error {
	return charts.ValidateReleaseName(o.opts.ReleaseName)
}

// Run renders the chart and prints the manifest.
func (o *templateOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := charts.RenderContext(ctx, o.chart, o.opts)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprint(o.g.Streams.Out, r.Manifest); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}
