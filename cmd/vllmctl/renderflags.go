package main

import (
	"context"
	"io"
	"os/exec"

	"github.com/spf13/pflag"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/charts/source"
	"github.com/vllmctl/vllmctl/release"
)

// RenderFlags are the flags that choose the chart and what it renders to,
// shared by deploy, diff, template and lint: -f/--values, --set,
// --set-string, --set-json, --set-file and --set-literal, with Helm 4's
// syntax and precedence (files in order, then --set-json, --set,
// --set-string, --set-file, --set-literal), and the chart source flags
// (--repo, --version and the repository transport flags).
type RenderFlags struct {
	// Source are the chart source flags.
	Source chartSourceFlags
	// Located is where CHART led, after Resolve.
	Located *source.Chart

	// ValueFiles are the -f/--values files, in order (later wins).
	ValueFiles []string
	// Set are the --set values (a.b=c, a[0]=x, a={x,y}, escaped \,).
	Set []string
	// SetString are the --set-string values: like Set, always strings.
	SetString []string
	// SetFile are the --set-file values (key=path: the file's content).
	SetFile []string
	// SetJSON are the --set-json values (key=JSON, or a JSON object).
	SetJSON []string
	// SetLiteral are the --set-literal values (key=value, taken as is).
	SetLiteral []string
	// PostRenderer and PostRendererArgs are --post-renderer and
	// --post-renderer-args (deploy, diff, template; see
	// AddPostRenderFlags).
	PostRenderer     string
	PostRendererArgs []string
}

// AddPostRenderFlags registers --post-renderer and --post-renderer-args
// on fs, as Helm names them (the executable form).
func (f *RenderFlags) AddPostRenderFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.PostRenderer, "post-renderer", "",
		"an executable (a path, or a name in PATH) that reads the rendered manifests, hooks included, on stdin and prints the ones to use on stdout; recorded (path and args) in the release record")
	fs.StringArrayVar(&f.PostRendererArgs, "post-renderer-args", nil,
		"an argument to the post-renderer; repeatable, in order")
}

// postRenderer returns the post-renderer of the flags (nil: none): an
// executable that cannot be found is an *charts.InputError naming it.
func (f *RenderFlags) postRenderer() (*charts.PostRenderer, error) {
	if f.PostRenderer == "" {
		if len(f.PostRendererArgs) > 0 {
			return nil, newUsageError("--post-renderer-args needs --post-renderer")
		}
		return nil, nil
	}
	if _, err := exec.LookPath(f.PostRenderer); err != nil {
		return nil, &charts.InputError{Source: "post-renderer", File: f.PostRenderer, Msg: "not an executable found on this path or in PATH", Err: err}
	}
	return &charts.PostRenderer{Path: f.PostRenderer, Args: append([]string(nil), f.PostRendererArgs...)}, nil
}

// AddFlags registers the render flags on fs.
func (f *RenderFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVarP(&f.ValueFiles, "values", "f", nil,
		"values file (YAML); repeatable, later files win")
	fs.StringArrayVar(&f.Set, "set", nil,
		"set a value, Helm syntax (a.b=c, a[0]=x, a={x,y}, \\, for a literal comma); repeatable, wins over -f and --set-json")
	fs.StringArrayVar(&f.SetString, "set-string", nil,
		"like --set, but every value is a string; repeatable, wins over --set")
	fs.StringArrayVar(&f.SetJSON, "set-json", nil,
		"set a JSON value (a.b=[1,2], a={\"x\":1}) or merge a JSON object ({\"a\":{\"b\":1}}); repeatable, wins over -f, loses to --set")
	fs.StringArrayVar(&f.SetFile, "set-file", nil,
		"set a value to the content of a file (a.b=path); repeatable, wins over --set-string")
	fs.StringArrayVar(&f.SetLiteral, "set-literal", nil,
		"set a value as the literal string after '=' (no escapes, commas or lists); repeatable, wins over every other values flag")
	f.Source.AddFlags(fs)
}

// ChartRef returns the CHART of the arguments RELEASE [CHART]: args[1], or
// the default built-in chart when it is omitted.
func ChartRef(args []string) string {
	if len(args) > 1 && args[1] != "" {
		return args[1]
	}
	return charts.DefaultChart
}

// RenderOptions returns the render options of release in namespace.
func (f *RenderFlags) RenderOptions(release, namespace string) charts.RenderOptions {
	return charts.RenderOptions{
		ReleaseName: release,
		Namespace:   namespace,
		ValueFiles:  append([]string(nil), f.ValueFiles...),
		Set:         append([]string(nil), f.Set...),
		SetString:   append([]string(nil), f.SetString...),
		SetFile:     append([]string(nil), f.SetFile...),
		SetJSON:     append([]string(nil), f.SetJSON...),
		SetLiteral:  append([]string(nil), f.SetLiteral...),
		Revision:    1,
	}
}

// Resolve loads the chart named by the arguments RELEASE [CHART] (a
// built-in chart, a local directory or .tgz, a chart of a repository:
// REPO/NAME, or NAME with --repo, or of an OCI registry: oci://…; see
// source.Locate) and returns it with
// the render options of RELEASE in namespace. --password-stdin reads in.
// Every problem with the input is a *charts.InputError (exit code 2); a
// repository or registry that cannot be reached is a *source.RepoError
// (exit code 6).
func (f *RenderFlags) Resolve(ctx context.Context, in io.Reader, args []string, namespace string) (*chart.Chart, charts.RenderOptions, error) {
	if len(args) == 0 {
		return nil, charts.RenderOptions{}, newUsageError("a RELEASE name is required")
	}
	opts := f.RenderOptions(args[0], namespace)
	if err := charts.ValidateReleaseName(opts.ReleaseName); err != nil {
		return nil, opts, err
	}
	pr, err := f.postRenderer()
	if err != nil {
		return nil, opts, err
	}
	opts.PostRenderer = pr
	so, err := f.Source.options(in)
	if err != nil {
		return nil, opts, err
	}
	ch, loc, err := source.Load(ctx, source.Settings(), ChartRef(args), so)
	if err != nil {
		return nil, opts, err
	}
	f.Located = loc
	if !loc.Remote() {
		opts.ChartDir = chartDir(ChartRef(args))
	}
	return ch, opts, nil
}

// localNamespace is the release namespace for commands that need no
// cluster (template): --namespace, else the kubeconfig context's
// namespace, else "default" — also when there is no kubeconfig at all.
func localNamespace(g *GlobalOptions) (string, error) {
	if g.ConfigFlags.Namespace != nil && *g.ConfigFlags.Namespace != "" {
		return *g.ConfigFlags.Namespace, validateNamespace(*g.ConfigFlags.Namespace)
	}
	if checkKubeconfigFiles(kubeconfigFlag(g.ConfigFlags.KubeConfig)) != nil {
		return "default", nil // not read at all: it may never end
	}
	ns, _, err := g.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil || ns == "" {
		// template and lint need no cluster: a missing or unreadable
		// kubeconfig is no reason to fail.
		return "default", nil
	}
	return ns, nil
}

// input is the deploy's render input: ch with opts, and where CHART led
// when it was pulled from a repository (the record keeps the .tgz's URL
// and digest) or an OCI registry (the oci:// reference pulled and the
// manifest digest).
func (f *RenderFlags) input(ch *chart.Chart, opts charts.RenderOptions) release.RenderInput {
	in := release.RenderInput{Chart: ch, Options: opts}
	if f.Located != nil && f.Located.Remote() {
		in.Source, in.Digest = f.Located.URL, f.Located.Digest
	}
	if f.Located != nil {
		in.Signer, in.SignedDigest = f.Located.Signer, f.Located.SignedDigest // --verify
		in.Builtin = f.Located.Builtin
	}
	return in
}

// reuseFlags are Helm's upgrade flags about the previous revision's
// values, shared by deploy and diff: --reuse-values,
// --reset-then-reuse-values and --reset-values.
type reuseFlags struct {
	reuse, resetThenReuse, reset bool
}

// AddFlags registers the flags on fs.
func (r *reuseFlags) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&r.reuse, "reuse-values", false,
		"on an upgrade, start from the current revision's values and defaults (the chart's new defaults are not taken) and merge -f/--set... over them; ignored with --reset-values")
	fs.BoolVar(&r.resetThenReuse, "reset-then-reuse-values", false,
		"on an upgrade, start from the chart's defaults, then the current revision's user-supplied values, then -f/--set...; ignored with --reset-values or --reuse-values")
	fs.BoolVar(&r.reset, "reset-values", false,
		"on an upgrade, use only the chart's defaults and the values given now (what deploy does without --reuse-values); wins over the two flags above")
}

// apply sets the flags on opts.
func (r *reuseFlags) apply(opts *charts.RenderOptions) {
	opts.ReuseValues, opts.ResetThenReuseValues, opts.ResetValues = r.reuse, r.resetThenReuse, r.reset
}
