package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/wait"
)

// templateOptions are the inputs of `vllmctl template RELEASE [CHART]`.
type templateOptions struct {
	g      *GlobalOptions
	render RenderFlags

	kubeVersion string
	apiVersions []string
	dryRun      string
	includeCRDs bool

	chart *chart.Chart
	opts  charts.RenderOptions
}

func newTemplateCommand(g *GlobalOptions) *cobra.Command {
	o := &templateOptions{g: g}
	cmd := &cobra.Command{
		Use:   "template RELEASE [CHART]",
		Short: "Render a chart's manifests to stdout, no cluster needed (--dry-run=server: against the cluster)",
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
	o.render.AddPostRenderFlags(cmd.Flags())
	cmd.Flags().StringVar(&o.kubeVersion, "kube-version", "",
		"Kubernetes version for .Capabilities.KubeVersion and the chart's kubeVersion constraint (default "+charts.DefaultKubeVersion+
			"; deploy and diff use the server's)")
	cmd.Flags().StringSliceVarP(&o.apiVersions, "api-versions", "a", nil,
		"Kubernetes API versions (group/version or group/version/Kind) for .Capabilities.APIVersions, added to the default set; repeatable or comma-separated (not with --dry-run=server)")
	cmd.Flags().StringVar(&o.dryRun, "dry-run", "client",
		"\"client\" renders offline, as helm template; \"server\" renders against the cluster as helm install --dry-run=server: its version, its API versions and lookup, read-only")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "client"
	// A per-invocation choice, and deploy's --dry-run (a bool) shares the
	// name: VLLMCTL_DRY_RUN or the config file's dry-run are deploy's.
	commandLineOnly(cmd.Flags(), "dry-run")
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
	o.opts.LearnSecrets = o.g.Redactor.AddValues // a failing post-renderer's error may echo them
	o.opts.KubeVersion = charts.KubeVersion(o.kubeVersion, "")
	o.opts.APIVersions = o.apiVersions
	return err
}

// Validate checks the release name (Resolve already did; kept for the
// Options pattern and for callers that set opts directly) and --dry-run.
func (o *templateOptions) Validate() error {
	switch o.dryRun {
	case "client", "server":
	default:
		return newUsageError("--dry-run must be \"client\" or \"server\", not %q", o.dryRun)
	}
	if o.dryRun == "server" && len(o.apiVersions) > 0 {
		return newUsageError("--api-versions is for an offline render: --dry-run=server takes the cluster's")
	}
	if o.dryRun == "server" && o.kubeVersion != "" {
		return newUsageError("--kube-version is for an offline render: --dry-run=server takes the cluster's")
	}
	return charts.ValidateReleaseName(o.opts.ReleaseName)
}

// forCluster sets the render options of a --dry-run=server render: the
// cluster's version, API versions and lookup (read-only), as `helm
// install --dry-run=server` renders (the chart's CRDs are not created, so
// they do not count).
func (o *templateOptions) forCluster(ctx context.Context) error {
	engine, err := o.g.Factory.Engine(o.opts.Namespace, wait.RolloutOptions{})
	if err != nil {
		return err
	}
	o.opts.KubeVersion, o.opts.Cluster, err = engine.RenderCluster(ctx, o.opts.ReleaseName, false)
	return err
}

// Run renders the chart and prints the manifest (the CRDs first with
// --include-crds, the hooks last, as helm template prints them) to stdout, the render's warnings to stderr.
func (o *templateOptions) Run(ctx context.Context) error {
	if o.dryRun == "server" {
		if err := o.forCluster(ctx); err != nil {
			return err
		}
	}
	r, err := charts.RenderContext(ctx, o.chart, o.opts)
	if err != nil {
		return err
	}
	printWarnings(o.g.Streams.ErrOut, r.Warnings)
	if o.dryRun == "server" {
		// What lookup read from the cluster's Secrets is theirs to
		// keep: the data of every Secret is withheld, as Helm's
		// --hide-secret does for a dry run.
		if err := hideSecretData(r); err != nil {
			return err
		}
	}
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

// hideSecretData replaces the values of every Secret's data and
// stringData among r's objects and hooks by diff.Redacted, and rewrites
// r.Manifest.
func hideSecretData(r *charts.Rendered) error {
	for _, o := range append(slices.Clone(r.Objects), charts.HookObjects(r.Hooks)...) {
		if o.GetKind() != "Secret" || o.GroupVersionKind().Group != "" {
			continue
		}
		for _, field := range []string{"data", "stringData"} {
			m, ok := o.Object[field].(map[string]any)
			if !ok {
				continue
			}
			for k := range m {
				m[k] = diff.Redacted
			}
		}
	}
	var err error
	r.Manifest, err = charts.Manifest(r.Objects)
	return err
}
