package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vllmctl/vllmctl/fleet"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release"
)

// fleetOptions are the inputs of `vllmctl fleet deploy|diff|status FILE`.
type fleetOptions struct {
	g  *GlobalOptions
	op string // deploy, diff or status

	progress   progressFlags
	output     outputFlags
	verdicts   verdictFlags
	serve      serveCheckFlags
	source     chartSourceFlags
	postRender RenderFlags // --post-renderer, --post-renderer-args only
	deployFlags
	skipPreflight bool

	flags *pflag.FlagSet // the command's, to tell the flags given
	file  *fleet.File

	// newFactory builds the Factory of a kubeconfig context (default: the
	// kubeconfig's, through connectionFlags); tests set fakes.
	newFactory func(context string) (Factory, error)
}

func newFleetCommand(g *GlobalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Roll one release out across many clusters in waves (deploy, diff, status FILE)",
		Long: "A fleet file names a release, its chart and values, the targets (a kubeconfig context and\n" +
			"namespace each, with their own values overlays), the waves they are deployed in and the\n" +
			"policy (maxParallel, soak, gate, onFailure). See docs/commands.md.",
		Args: cobra.NoArgs,
		RunE: requireSubcommand("deploy, diff or status"),
	}
	for _, op := range []string{"deploy", "diff", "status"} {
		cmd.AddCommand(fleetCommand(&fleetOptions{g: g, op: op}))
	}
	return cmd
}

// fleetCommand builds `fleet <o.op> FILE` on o.
func fleetCommand(o *fleetOptions) *cobra.Command {
	short := map[string]string{
		"deploy": "Deploy the release to every target of FILE, wave by wave",
		"diff":   "Show, per target of FILE, what fleet deploy would change",
		"status": "Show, per target of FILE, the release's status",
	}[o.op]
	o.timeout.help = rolloutTimeoutHelp
	o.history.help = historyMaxHelp
	o.conflicts.help = forceConflictsHelp
	o.rollbackTimeout.help = "time budget of each rollback (a target's automatic one, the policy's)"
	cmd := &cobra.Command{
		Use:   o.op + " FILE",
		Short: short,
		Long: short + ".\n\n" +
			"Each target runs in its kubeconfig context (--kubeconfig applies; --context, --namespace and\n" +
			"the other connection flags do not: the fleet file chooses them). Progress lines on stderr are\n" +
			"prefixed with the target's name ([a] ...), the fleet's own with [fleet].\n\n" +
			fleetExitHelp(o.op),
		Args: cobra.ExactArgs(1),
		RunE: runCommand(o),
	}
	f := cmd.Flags()
	o.output.AddFlags(f)
	if o.op != "status" {
		o.source.addTransportFlags(f)
		o.postRender.AddPostRenderFlags(f)
		o.source.addVerifyFlags(f)
		f.BoolVar(&o.createNamespace, "create-namespace", false, "create a target's release namespace if it does not exist")
		o.conflicts.AddFlags(f)
		o.modelFit.AddFlags(f)
		f.BoolVar(&o.skipPreflight, "skip-preflight", false, "do not check each target's GPU, cpu, memory and quota headroom, nor that the model fits its GPUs")
	}
	if o.op == "deploy" {
		o.progress.AddFlags(f)
		o.verdicts.AddFlags(f)
		o.serve.AddFlags(f)
		o.analysis.help = bakeAnalysisHelp + "; each target's deploy bakes it after its rollout, and the soak's waits again"
		o.analysis.AddFlags(f)
		o.timeout.AddFlags(f)
		o.history.AddFlags(f)
		o.rollbackTimeout.AddFlags(f)
		f.BoolVar(&o.takeOwnership, "take-ownership", false, "adopt existing objects the chart renders that are not the release's")
		f.BoolVar(&o.unlock.force, "force-unlock", false, "take over a target's lock that another operation holds (one a killed fleet deploy left); targets without one deploy as usual")
	}
	return cmd
}

// fleetExitHelp is the exit status paragraph of fleet op.
func fleetExitHelp(op string) string {
	return map[string]string{
		"deploy": "Exit status: 0 every target deployed or up to date, 2 invalid fleet file or a target's input\n" +
			"(nothing of that wave applied), 3 a target failed and the onFailure policy's rollback is done,\n" +
			"4 failed and not (fully) rolled back, 5 a target's lock is held, 6 a cluster refused or is\n" +
			"unreachable; the worst of the targets' codes (4 > 1 > 6 > 5 > 2 > 3 > 130).",
		"diff":   "Exit status: 0 no target would change, 1 some would, else the worst code of a target that failed.",
		"status": "Exit status: 0, else the worst code of a target whose status could not be read.",
	}[op]
}

// Complete loads and checks the fleet file, its targets' contexts and
// namespaces (File.ResolveTargets on the kubeconfig).
func (o *fleetOptions) Complete(cmd *cobra.Command, args []string) error {
	o.flags = cmd.Flags()
	if o.op == "deploy" {
		o.timeout.Complete(o.flags, o.g)
		o.serve.Complete(o.flags, o.g)
	}
	f, err := fleet.Load(args[0])
	if err != nil {
		return err
	}
	o.file = f
	if o.newFactory == nil {
		o.newFactory = func(kubeContext string) (Factory, error) {
			return newClusterFactory(o.connectionFlags(kubeContext)), nil
		}
	}
	if err := checkKubeconfigFiles(kubeconfigFlag(o.g.ConfigFlags.KubeConfig)); err != nil {
		return err
	}
	return f.ResolveTargets(func(kubeContext string) clientcmd.ClientConfig {
		return o.connectionFlags(kubeContext).ToRawKubeConfigLoader()
	})
}

// connectionFlags are the kubectl connection flags of a target: the
// kubeconfig and the per-user settings of the command line, the target's
// context.
func (o *fleetOptions) connectionFlags(kubeContext string) *genericclioptions.ConfigFlags {
	src := o.g.ConfigFlags
	cf := genericclioptions.NewConfigFlags(true).WithDiscoveryBurst(defaultDiscoveryBurst).WithDiscoveryQPS(defaultDiscoveryQPS)
	cf.KubeConfig, cf.CacheDir, cf.Timeout = src.KubeConfig, src.CacheDir, src.Timeout
	cf.Impersonate, cf.ImpersonateUID, cf.ImpersonateGroup = src.Impersonate, src.ImpersonateUID, src.ImpersonateGroup
	cf.Context = &kubeContext
	cf.WrapConfigFn = o.g.restConfig
	return cf
}

// Validate checks the flags.
func (o *fleetOptions) Validate() error {
	checks := []func() error{o.output.Validate, o.modelFit.Validate}
	if o.op == "deploy" {
		// A fleet holds no canary: an analysis bakes the new pods alone.
		analysisSpec := func() error { return o.analysis.Validate(o.flags, false) }
		checks = append(checks, analysisSpec, o.progress.Validate, o.verdicts.Validate, o.timeout.Validate, o.history.Validate, o.rollbackTimeout.Validate, o.serve.Validate)
	}
	return validateAll(checks...)
}

// Run builds a target per entry of the file (fleet.BuildTargets, on an
// engine per target that openTarget opens) and runs the operation.
func (o *fleetOptions) Run(ctx context.Context) error {
	var input release.RenderInput
	if o.op != "status" {
		var err error
		if input, err = o.loadChart(ctx); err != nil {
			return err
		}
	}
	stderr := &lockedWriter{w: o.g.Streams.ErrOut}
	format := termout.ProgressFormat(o.progress.format)
	if format == "" || format == termout.ProgressAuto {
		format = termout.ProgressPlain // one live view per target would interleave
	}
	// The command's one Redactor serves the whole fleet: every target's
	// engine teaches it the Secrets it renders, and the output streams
	// withhold them from every target's lines, the fleet's own lines, the
	// gate's command and output, the result and the error.
	var printers []*progressPrinter
	defer func() {
		for _, p := range printers {
			_ = p.Close()
		}
	}()
	engine := func(t fleet.TargetSpec) (*release.Engine, error) {
		e, printer, err := o.openTarget(t, stderr, format)
		if printer != nil {
			printers = append(printers, printer)
		}
		return e, err
	}
	targets, err := fleet.BuildTargets(o.file, o.deployOptions(o.file.Release, input, o.skipPreflight), engine)
	if err != nil {
		return err
	}
	runner, err := fleet.NewRunner(o.file, targets)
	if err != nil {
		return err
	}
	fleetLog := &prefixWriter{out: stderr, prefix: fleet.ReservedName, json: format == termout.ProgressJSON}
	runner.Log = func(target, message string) {
		w := fleetLog
		if target != "" {
			w = &prefixWriter{out: stderr, prefix: target, json: format == termout.ProgressJSON}
		}
		w.line(message)
	}
	switch o.op {
	case "diff":
		res, err := runner.Diff(ctx)
		return o.finish(printers, err, func() error { return writeFleetDiff(o.g.Streams.Out, o.output.format, res) }, res.Changes)
	case "status":
		res, err := runner.Status(ctx)
		return o.finish(printers, err, func() error { return writeFleetStatus(o.g.Streams.Out, o.output.format, res) }, false)
	}
	res, err := runner.Deploy(ctx)
	return o.finish(printers, err, func() error { return writeFleetResult(o.g.Streams.Out, o.output.format, res) }, false)
}

// finish closes the printers, writes the result and returns the
// operation's error, else exit 1 for a diff with changes.
func (o *fleetOptions) finish(printers []*progressPrinter, err error, write func() error, changes bool) error {
	for _, p := range printers {
		_ = p.Close()
	}
	werr := write()
	if err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("write the fleet result: %w", werr)
	}
	if changes {
		return silentError{code: ExitChanges}
	}
	return nil
}

// loadChart loads the fleet's chart once, for every target (a local
// chart path is relative to the fleet file: File.ChartRef).
func (o *fleetOptions) loadChart(ctx context.Context) (release.RenderInput, error) {
	render := RenderFlags{Source: o.source, PostRenderer: o.postRender.PostRenderer, PostRendererArgs: o.postRender.PostRendererArgs}
	render.Source.version = o.file.Version
	ch, opts, err := render.Resolve(ctx, o.g.Streams.In, []string{o.file.Release, o.file.ChartRef()}, "")
	if err != nil {
		return release.RenderInput{}, fmt.Errorf("fleet file %s: chart %q: %w", o.file.Path, o.file.Chart, err)
	}
	return render.input(ch, opts), nil
}

// openTarget opens the release engine of target t, as deploy opens one
// for --context and -n: the engine of its context's Factory, its
// progress printed on stderr prefixed with its name.
func (o *fleetOptions) openTarget(t fleet.TargetSpec, stderr io.Writer, format termout.ProgressFormat) (*release.Engine, *progressPrinter, error) {
	factory, err := o.newFactory(t.Context)
	if err != nil {
		return nil, nil, err
	}
	engine, err := factory.Engine(t.Namespace, o.verdicts.options())
	if err != nil {
		return nil, nil, err
	}
	pf := progressFlags{format: string(format)}
	printer := pf.printer(&prefixWriter{out: stderr, prefix: t.Name, json: format == termout.ProgressJSON}, o.g.Redactor)
	engine.Progress = printer.Print
	engine.UseRedactor(o.g.Redactor)
	engine.ServeCheck = o.serve.options()
	return engine, printer, nil
}

// lockedWriter serialises whole writes of several targets' printers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// prefixWriter writes each complete line to out prefixed with "[prefix] "
// (a JSON line gets a "target" member instead).
type prefixWriter struct {
	out    io.Writer
	prefix string
	json   bool
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if err := p.emit(string(p.buf[:i])); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
}

func (p *prefixWriter) emit(line string) error {
	var out string
	switch {
	case p.json && strings.HasPrefix(line, "{"):
		out = fmt.Sprintf("{\"target\":%q,%s\n", p.prefix, line[1:])
	case p.json:
		out = fmt.Sprintf("{\"target\":%q,\"message\":%q}\n", p.prefix, line)
	default:
		out = "[" + p.prefix + "] " + line + "\n"
	}
	_, err := io.WriteString(p.out, out)
	return err
}

// line writes one message line.
func (p *prefixWriter) line(msg string) { _ = p.emit(termout.SanitizeLine(msg)) }
