package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/wait"
)

// diffOptions are the inputs of `vllmctl diff RELEASE [CHART]`.
type diffOptions struct {
	g      *GlobalOptions
	render RenderFlags
	reuse  reuseFlags

	output          outputFlags
	conflicts       conflictFlags
	createNamespace bool
	skipPreflight   bool
	modelFit        modelFitFlags

	chartTarget

	// color forces colours on or off; nil: on when stdout is a terminal
	// and NO_COLOR is unset.
	color *bool
}

func newDiffCommand(g *GlobalOptions) *cobra.Command {
	return diffCommand(&diffOptions{g: g})
}

// diffCommand builds the command on o (tests set o.color).
func diffCommand(o *diffOptions) *cobra.Command {
	o.output.help = "output format: table (a unified diff per object), json or yaml"
	o.conflicts.help = diffForceConflictsHelp
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
			"or could not be reached. A vLLM model that cannot fit its GPUs is refused with exit 2, as deploy\n" +
			"refuses it (the model-fit preflight; --skip-preflight skips it).",
		Example: "  vllmctl diff qwen -f prod.yaml\n" +
			"  vllmctl diff qwen ./mychart --set image.tag=v0.11.1 -o json",
		Args: cobra.RangeArgs(1, 2),
		RunE: runCommand(o),
	}
	o.render.AddFlags(cmd.Flags())
	o.render.AddPostRenderFlags(cmd.Flags())
	o.reuse.AddFlags(cmd.Flags())
	o.output.AddFlags(cmd.Flags())
	o.conflicts.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&o.createNamespace, "create-namespace", false,
		"dry-run as deploy --create-namespace would: a missing release namespace is created")
	cmd.Flags().BoolVar(&o.skipPreflight, "skip-preflight", false,
		"do not check that each vLLM model fits its GPUs (the model-fit preflight deploy runs)")
	o.modelFit.AddFlags(cmd.Flags())
	return cmd
}

// Complete resolves the namespace and loads the chart.
func (o *diffOptions) Complete(cmd *cobra.Command, args []string) error {
	if err := o.chartTarget.complete(commandContext(cmd), o.g, &o.render, args); err != nil {
		return err
	}
	o.reuse.apply(&o.opts)
	return nil
}

// Validate checks the output format.
func (o *diffOptions) Validate() error {
	return validateAll(o.output.Validate, o.modelFit.Validate)
}

// diffProgress writes the render's and the model-fit preflight's warnings
// to w, sanitised (termout.SanitizeLine: they quote the chart's objects and
// the models' configs); the fit and skip notes are deploy's progress:
// diff's stderr stays quiet.
func diffProgress(w io.Writer) func(release.ProgressEvent) {
	return func(ev release.ProgressEvent) {
		if ev.Phase == release.PhaseRender || (ev.Phase == release.PhasePreflight && ev.Status == "warning") {
			fmt.Fprintln(w, "warning: "+termout.SanitizeLine(ev.Message))
		}
	}
}

// Run computes the diff through the release engine and prints it.
// Changes found are a silent error with exit code 1.
func (o *diffOptions) Run(ctx context.Context) error {
	engine, err := o.g.Factory.Engine(o.namespace, wait.RolloutOptions{})
	if err != nil {
		return err
	}
	// stdout is the diff: the render's warnings go to stderr, as template's.
	engine.Progress = diffProgress(o.g.Streams.ErrOut)
	// It writes no record; its Redactor learns the Secrets an error (a
	// failing post-renderer's) may quote.
	engine.UseRedactor(o.g.Redactor)
	rep, err := engine.Diff(ctx, release.DiffOptions{
		Name:            o.opts.ReleaseName,
		Render:          release.RenderInput{Chart: o.chart, Options: o.opts},
		ForceConflicts:  o.conflicts.force,
		CreateNamespace: o.createNamespace,
		SkipPreflight:   o.skipPreflight,
		ModelFit:        o.modelFit.source(),
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
	switch o.output.format {
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
	return colorOutput(w)
}
