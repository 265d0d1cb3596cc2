package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"

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

	flags      *pflag.FlagSet // the command's, to tell the flags given
	file       *fleet.File
	namespaces map[string]string // target name → release namespace

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
// namespaces.
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
	return o.resolveTargets()
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

// resolveTargets checks that every target's context is in the kubeconfig
// and settles its namespace (the context's when the file gives none).
// Problems are the file's (exit code 2), with its lines.
func (o *fleetOptions) resolveTargets() error {
	o.namespaces = map[string]string{}
	var problems []fleet.Problem
	for i, t := range o.file.Targets {
		field := fmt.Sprintf("targets[%d].context", i)
		cf := o.connectionFlags(t.Context)
		if err := checkKubeconfigFiles(kubeconfigFlag(cf.KubeConfig)); err != nil {
			return err
		}
		raw, err := cf.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return usageError{fmt.Errorf("fleet file %s: target %s: kubeconfig: %w", o.file.Path, t.Name, err)}
		}
		if _, ok := raw.Contexts[t.Context]; !ok {
			problems = append(problems, fleet.Problem{Line: t.Line, Field: field, Message: fmt.Sprintf("%q: no such context in the kubeconfig", t.Context)})
			continue
		}
		ns := t.Namespace
		if ns == "" {
			if ns, _, err = cf.ToRawKubeConfigLoader().Namespace(); err != nil || ns == "" {
				ns = "default"
			}
		}
		o.namespaces[t.Name] = ns
		o.file.Targets[i].Namespace = ns
	}
	if len(problems) > 0 {
		return &fleet.FileError{Path: o.file.Path, Problems: problems}
	}
	return nil
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

// fleetTarget is a built target and what prints its progress.
type fleetTarget struct {
	spec    fleet.TargetSpec
	target  *fleet.ReleaseTarget
	printer *progressPrinter
}

// Run builds a target per entry of the file and runs the operation.
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
	built := map[string]*fleetTarget{}
	targets := map[string]fleet.Target{}
	for _, t := range o.file.Targets {
		ft, err := o.buildTarget(t, input, stderr, format)
		if err != nil {
			return fmt.Errorf("fleet target %s (context %s): %w", t.Name, t.Context, err)
		}
		built[t.Name], targets[t.Name] = ft, ft.target
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
	defer func() {
		for _, ft := range built {
			_ = ft.printer.Close()
		}
	}()
	switch o.op {
	case "diff":
		res, err := runner.Diff(ctx)
		return o.finish(built, err, func() error { return writeFleetDiff(o.g.Streams.Out, o.output.format, res) }, res.Changes)
	case "status":
		res, err := runner.Status(ctx)
		return o.finish(built, err, func() error { return writeFleetStatus(o.g.Streams.Out, o.output.format, res) }, false)
	}
	res, err := runner.Deploy(ctx)
	return o.finish(built, err, func() error { return writeFleetResult(o.g.Streams.Out, o.output.format, res) }, false)
}

// finish closes the printers, writes the result and returns the
// operation's error, else exit 1 for a diff with changes.
func (o *fleetOptions) finish(built map[string]*fleetTarget, err error, write func() error, changes bool) error {
	for _, ft := range built {
		_ = ft.printer.Close()
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

// loadChart loads the fleet's chart once, for every target: a local
// chart path is relative to the fleet file.
func (o *fleetOptions) loadChart(ctx context.Context) (release.RenderInput, error) {
	ref := o.file.Chart
	if ref != "" && !filepath.IsAbs(ref) {
		if p := filepath.Join(filepath.Dir(o.file.Path), ref); fileExists(p) {
			ref = p
		}
	}
	render := RenderFlags{Source: o.source, PostRenderer: o.postRender.PostRenderer, PostRendererArgs: o.postRender.PostRendererArgs}
	render.Source.version = o.file.Version
	ch, opts, err := render.Resolve(ctx, o.g.Streams.In, []string{o.file.Release, ref}, "")
	if err != nil {
		return release.RenderInput{}, fmt.Errorf("fleet file %s: chart %q: %w", o.file.Path, o.file.Chart, err)
	}
	return render.input(ch, opts), nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// buildTarget builds the engine of a target's context and namespace, as
// deploy builds one for --context and -n, and its deploy options: the
// shared values, then the target's.
func (o *fleetOptions) buildTarget(t fleet.TargetSpec, input release.RenderInput, stderr io.Writer, format termout.ProgressFormat) (*fleetTarget, error) {
	factory, err := o.newFactory(t.Context)
	if err != nil {
		return nil, err
	}
	ns := o.namespaces[t.Name]
	engine, err := factory.Engine(ns, o.verdicts.options())
	if err != nil {
		return nil, err
	}
	pf := progressFlags{format: string(format)}
	printer := pf.printer(&prefixWriter{out: stderr, prefix: t.Name, json: format == termout.ProgressJSON}, o.g.Redactor)
	engine.Progress = printer.Print
	engine.UseRedactor(o.g.Redactor)
	engine.ServeCheck = o.serve.options()
	in := input
	in.Options.Namespace = ns
	in.Options.ValueFiles = append(append([]string(nil), o.file.Values...), t.Values...)
	in.Options.Set = append(append([]string(nil), o.file.Set...), t.Set...)
	deployOpts := o.deployOptions(o.file.Release, in, o.skipPreflight)
	deployOpts.RollbackOnFailure = true // a fleet always restores a target that fails
	return &fleetTarget{spec: t, printer: printer, target: &fleet.ReleaseTarget{
		Engine:  engine,
		Options: deployOpts,
	}}, nil
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
