package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/release"
)

// diffOptions are the inputs of `vllmctl diff RELEASE [CHART]`.
type diffOptions struct {
	g      *GlobalOptions
	render RenderFlags

	output          string
	forceConflicts  bool
	createNamespace bool

	namespace string
	chart     *chart.Chart
	opts      charts.RenderOptions

	// newStore opens the record store of a namespace; nil: Secrets through
	// the kubeconfig.
	newStore func(namespace string) (release.Store, error)
	// newCluster returns what the diff dry-runs against and reads from,
	// with the server's version; nil: a release.Applier through the
	// kubeconfig and discovery.
	newCluster func(opts release.ApplyOptions) (diff.Cluster, string, error)
	// color forces colours on or off; nil: on when stdout is a terminal
	// and NO_COLOR is unset.
	color *bool
}

func newDiffCommand(g *GlobalOptions) *cobra.Command {
	return diffCommand(&diffOptions{g: g})
}

func diffCommand(o *diffOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff RELEASE [CHART]",
		Short: "Show what deploy would change, from a server-side dry run",
		Long: "Render CHART (default \"vllm\") for RELEASE, apply every object with a server-side dry run the way\n" +
			"deploy would (field manager vllmctl, the same --force-conflicts setting, replicas left to an HPA),\n" +
			"and compare the result with the live objects. Objects deploy would create are shown all-added (+),\n" +
			"objects it would prune all-removed (-), changed ones as a unified diff (~). Fields the API server\n" +
			"sets by itself are left out; Secret values are never shown, only whether each key is (changed),\n" +
			"(unchanged), (added) or (removed). Fields another field manager owns (hand edits such as kubectl\n" +
			"scale) that deploy would change are shown as deploy --force-conflicts would change them, and the\n" +
			"object's header notes the conflict: deploy refuses them unless --force-conflicts is given.\n\n" +
			"Exit status: 0 no changes, 1 changes (conflicts included), 2 invalid input, 6 the cluster refused\n" +
			"or could not be reached.",
		Example: "  vllmctl diff qwen -f prod.yaml\n" +
			"  vllmctl diff qwen ./mychart --set image.tag=v0.11.1 -o json",
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
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "output format: table (a unified diff per object), json or yaml")
	cmd.Flags().BoolVar(&o.forceConflicts, "force-conflicts", false,
		"dry-run as deploy --force-conflicts would: take over fields other field managers own")
	cmd.Flags().BoolVar(&o.createNamespace, "create-namespace", false,
		"dry-run as deploy --create-namespace would: a missing release namespace is created")
	return cmd
}

// Complete resolves the namespace and loads the chart.
func (o *diffOptions) Complete(args []string) error {
	ns, err := recordNamespace(o.g)
	if err != nil {
		return err
	}
	o.namespace = ns
	o.chart, o.opts, err = o.render.Resolve(args, ns)
	return err
}

// Validate checks the release name and the output format.
func (o *diffOptions) Validate() error {
	if err := charts.ValidateReleaseName(o.opts.ReleaseName); err != nil {
		return err
	}
	switch o.output {
	case "table", "json", "yaml":
		return nil
	}
	return newUsageError("--output %q: want table, json or yaml", o.output)
}

// Run renders the chart, computes the diff and prints it. Changes found
// are a silent error with exit code 1.
func (o *diffOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	name := o.opts.ReleaseName
	// Input errors first: they are exit code 2 whatever the cluster says.
	if _, err := charts.RenderContext(ctx, o.chart, o.opts); err != nil {
		return err
	}

	store, err := openRecordStore(o.g, o.newStore, o.namespace)
	if err != nil {
		return err
	}
	entries, err := store.List(ctx, name)
	if err != nil {
		return fmt.Errorf("release %s: read its records: %w", name, err)
	}
	previous, err := release.PreviousObjects(entries)
	if err != nil {
		return err
	}
	applyOpts := release.ApplyOptions{
		Namespace:       o.namespace,
		Release:         name,
		Force:           o.forceConflicts,
		CreateNamespace: o.createNamespace,
	}
	cluster, kubeVersion, err := o.cluster(applyOpts)
	if err != nil {
		return err
	}

	// Render as deploy would: the next revision, an upgrade when a
	// revision is deployed, the server's version.
	opts := o.opts
	opts.Revision = 1
	for _, e := range entries {
		opts.Revision = max(opts.Revision, e.Revision+1)
		if e.Status == release.StatusDeployed {
			opts.IsUpgrade = true
		}
	}
	opts.KubeVersion = kubeVersion
	rendered, err := charts.RenderContext(ctx, o.chart, opts)
	if err != nil {
		return err
	}

	rep, err := diff.Compute(ctx, cluster, rendered.Objects, diff.Options{
		Release:   name,
		Namespace: o.namespace,
		Previous:  previous,
	})
	if err != nil {
		return err
	}
	if err := o.write(o.g.Streams.Out, rep); err != nil {
		return err
	}
	if !rep.Empty() {
		return silentError{code: ExitChanges}
	}
	return nil
}

// write prints rep in the chosen output format.
func (o *diffOptions) write(w io.Writer, rep *diff.Report) error {
	switch o.output {
	case "json":
		return rep.WriteJSON(w)
	case "yaml":
		return rep.WriteYAML(w)
	}
	return rep.WriteText(w, o.useColor(w))
}

// useColor reports whether the text output gets ANSI colours: forced by
// the options, else when w is a terminal and NO_COLOR is unset.
func (o *diffOptions) useColor(w io.Writer) bool {
	if o.color != nil {
		return *o.color
	}
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return false
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// cluster returns the diff's cluster and the server's version.
func (o *diffOptions) cluster(opts release.ApplyOptions) (diff.Cluster, string, error) {
	if o.newCluster != nil {
		return o.newCluster(opts)
	}
	applier, err := release.NewApplier(o.g.ConfigFlags)
	if err != nil {
		return diff.Cluster{}, "", recordClusterError{err}
	}
	dc, err := o.g.ConfigFlags.ToDiscoveryClient()
	if err != nil {
		return diff.Cluster{}, "", recordClusterError{fmt.Errorf("discovery client: %w", err)}
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return diff.Cluster{}, "", recordClusterError{fmt.Errorf("server version: %w", err)}
	}
	return applier.DiffCluster(opts), v.GitVersion, nil
}
