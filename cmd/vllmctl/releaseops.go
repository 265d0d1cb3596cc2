package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// openOperation opens the release engine of namespace for an operation
// that prints its progress: the engine's events and redactions go through
// the printer of p, on stderr.
func openOperation(g *GlobalOptions, p *progressFlags, namespace string, verdicts wait.RolloutOptions) (*release.Engine, *progressPrinter, error) {
	engine, err := g.Factory.Engine(namespace, verdicts)
	if err != nil {
		return nil, nil, err
	}
	printer := p.printer(g.Streams.ErrOut, g.Redactor)
	engine.Progress = printer.Print
	engine.UseRedactor(g.Redactor)
	return engine, printer, nil
}

// chartTarget is the release a command renders a chart for (deploy,
// diff): the namespace holding its records, the chart and the render
// options.
type chartTarget struct {
	namespace string
	chart     *chart.Chart
	opts      charts.RenderOptions
}

// complete resolves the release namespace, checks the release name and
// loads the chart of args (RELEASE [CHART]).
func (c *chartTarget) complete(ctx context.Context, g *GlobalOptions, render *RenderFlags, args []string) error {
	ns, err := recordNamespace(g)
	if err != nil {
		return err
	}
	c.namespace = ns
	c.chart, c.opts, err = render.Resolve(ctx, g.Streams.In, args, ns)
	return err
}

// releaseTarget is the RELEASE argument of a command acting on one release
// and the namespace holding its records.
type releaseTarget struct {
	release   string
	namespace string
}

// complete takes RELEASE from args and resolves the release namespace.
func (r *releaseTarget) complete(g *GlobalOptions, args []string) error {
	r.release = args[0]
	ns, err := recordNamespace(g)
	if err != nil {
		return err
	}
	r.namespace = ns
	return nil
}

// finishOperation ends a release operation that printed progress: it closes
// the progress printer, writes the result document (when there is one) to
// out, and returns the operation's error, else a write error.
func finishOperation(out io.Writer, format string, printer *progressPrinter, res *release.Result, err error) error {
	return finishWith(printer, res != nil, func() error { return writeReleaseResult(out, format, res) }, err)
}

// finishWith closes the progress printer, writes the result with write
// (when there is one), and returns the operation's error, else a write
// error.
func finishWith(printer *progressPrinter, hasResult bool, write func() error, err error) error {
	perr := printer.Close()
	if hasResult {
		if werr := write(); werr != nil && err == nil {
			err = werr
		}
	}
	if err == nil && perr != nil {
		err = fmt.Errorf("write progress: %w", perr)
	}
	return err
}

// progressFlags is --progress, shared by the commands that change a
// release.
type progressFlags struct {
	format string
}

// AddFlags registers --progress on fs.
func (p *progressFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&p.format, "progress", string(termout.ProgressAuto),
		"progress on stderr: auto (a live view on a terminal, plain lines otherwise), plain (one timestamped line per change) or json (JSON lines)")
}

// Validate checks the format.
func (p *progressFlags) Validate() error {
	switch termout.ProgressFormat(p.format) {
	case termout.ProgressAuto, termout.ProgressPlain, termout.ProgressJSON:
		return nil
	}
	return newUsageError("--progress %q: want auto, plain or json", p.format)
}

// printer returns the progress printer writing to w; JSON lines are
// redacted by red before they are encoded (the lines w passes on are, by
// the command's output writer).
func (p *progressFlags) printer(w io.Writer, red *diff.Redactor) *progressPrinter {
	return &progressPrinter{w: w, format: termout.ProgressFormat(p.format), red: red}
}

// progressPrinter prints release progress events: plain lines (one per
// change), JSON lines, and a wait's rollout progress through the wait
// package's printers (a live view on a terminal with auto).
type progressPrinter struct {
	w      io.Writer
	format termout.ProgressFormat

	// red is the command's Redactor, applied to JSON lines before they
	// are encoded.
	red *diff.Redactor

	mu   sync.Mutex
	wait termout.ProgressPrinter
	err  error
}

// Print prints one event. Write errors are kept (see Err) and never stop
// the operation.
func (p *progressPrinter) Print(ev release.ProgressEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	if ev.Phase == release.PhaseDiff && ev.Diff != nil {
		// A diff is for people: text in every progress format.
		p.closeWait()
		if err := ev.Diff.WriteText(p.w, colorOutput(p.w)); err != nil && p.err == nil {
			p.err = err
		}
		return
	}
	if p.format == termout.ProgressJSON {
		p.err = json.NewEncoder(p.w).Encode(diff.RedactCopy(p.red, ev))
		return
	}
	if ev.Phase == release.PhasePreflight && ev.Preflight != nil {
		p.closeWait()
		if p.err = ev.Preflight.Print(p.w); p.err == nil {
			for _, m := range ev.Preflight.Messages() {
				if _, p.err = fmt.Fprintln(p.w, m); p.err != nil {
					break
				}
			}
		}
		return
	}
	if ev.Phase == release.PhaseWait && ev.Wait != nil {
		if p.wait == nil {
			if p.wait, p.err = termout.NewProgressPrinter(p.w, p.format); p.err != nil {
				return
			}
		}
		p.err = p.wait.Print(*ev.Wait)
		return
	}
	p.closeWait()
	if p.err == nil {
		_, p.err = fmt.Fprintln(p.w, ev.String())
	}
}

// closeWait ends the wait printer, if one is running.
func (p *progressPrinter) closeWait() {
	if p.wait != nil {
		if err := p.wait.Close(); p.err == nil {
			p.err = err
		}
		p.wait = nil
	}
}

// Close ends the output.
func (p *progressPrinter) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeWait()
	return p.err
}

// writeReleaseResult prints a deploy or rollback result: a summary
// (table) or one JSON/YAML document.
func writeReleaseResult(w io.Writer, format string, res *release.Result) error {
	if format != "table" {
		return writeRecordDocument(w, format, res)
	}
	var b strings.Builder
	field := func(name, value string) { fmt.Fprintf(&b, "%s: %s\n", name, value) }
	field("RELEASE", res.Release)
	field("NAMESPACE", res.Namespace)
	field("REVISION", strconv.Itoa(res.Revision))
	status := string(res.Status)
	if res.DryRun {
		status += " (dry run: nothing recorded)"
	}
	field("STATUS", status)
	field("DESCRIPTION", recordCell(res.Description))
	field("CHART", recordCell(res.Chart))
	field("APP VERSION", recordCell(res.AppVersion))
	if res.ChartSource != "" {
		field("CHART SOURCE", recordCell(res.ChartSource+" ("+res.ChartDigest+")"))
	}
	if res.ChartSigner != "" || res.ChartSignedDigest != "" {
		field("CHART SIGNED BY", recordCell(res.ChartSigner+" ("+res.ChartSignedDigest+")"))
	}
	if !res.DryRun {
		field("REPLICASETS", revisionsCell(res.ReplicaSets, res.ControllerRevisions))
	}
	if res.RolledBackTo > 0 {
		field("ROLLED BACK TO", strconv.Itoa(res.RolledBackTo))
	}
	if len(res.Pruned) > 0 {
		parts := make([]string, len(res.Pruned))
		for i, p := range res.Pruned {
			parts[i] = p.String()
		}
		field("PRUNED", strings.Join(parts, ", "))
	}
	if c := res.Canary; c != nil {
		field("CANARY", recordCell(canaryCell(c)))
	}
	if res.ServeCheck != nil {
		field("SERVE CHECK", recordCell(serveCell(res.ServeCheck)))
	}
	field("DURATION", formatSeconds(res.DurationSeconds))
	if res.DryRun {
		b.WriteString("OBJECTS:\n")
		for _, a := range res.Applied {
			line := fmt.Sprintf("  %s: %s", a.Object, a.Action)
			if a.Unvalidated {
				line += " (not validated: its namespace does not exist yet)"
			}
			b.WriteString(line + "\n")
		}
	}
	writeFailure(&b, res.Failure)
	writeAnalysis(&b, res.Analysis, res.Revision)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFailure prints a failure diagnosis as an indented block, every
// value sanitised (recordCell, termout.SanitizeLine).
func writeFailure(b *strings.Builder, f *rollout.Diagnosis) {
	if f == nil {
		return
	}
	fmt.Fprintf(b, "FAILURE: %s\n", recordCell(f.Reason))
	item := func(name, value string) {
		if value != "" {
			fmt.Fprintf(b, "  %-10s %s\n", name+":", recordCell(value))
		}
	}
	item("verdict", string(f.Verdict))
	item("object", f.Object)
	item("pod", f.Pod)
	item("node", f.Node)
	if f.Container != "" {
		item("container", fmt.Sprintf("%s (exit code %d, %d restarts)", f.Container, f.ExitCode, f.RestartCount))
	}
	item("message", f.Message)
	item("cause", string(f.Cause))
	item("evidence", f.Evidence)
	list := func(name string, lines []string) {
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(b, "  %s:\n", name)
		for _, l := range lines {
			fmt.Fprintf(b, "    %s\n", termout.SanitizeLine(strings.TrimRight(l, "\r\n")))
		}
	}
	list("events", f.Events)
	list("log tail", f.LogTail)
	item("logs", f.LogNote)
	list("hints", f.Hints)
}

// formatSeconds formats a duration in seconds, to a tenth of a second.
func formatSeconds(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(100 * time.Millisecond).String()
}

// canaryCell summarises a canary: outcome, pods, and each phase's time.
func canaryCell(c *storage.CanaryReport) string {
	s := fmt.Sprintf("%s (%s", c.Outcome, c.Count)
	if len(c.Pods) > 0 {
		s += ": " + strings.Join(c.Pods, ", ")
	}
	s += ")"
	for _, p := range c.Phases {
		s += fmt.Sprintf("; %s %s", p.Name, formatSeconds(p.DurationSeconds))
	}
	if c.Reason != "" && c.Outcome != storage.CanaryPromoted {
		s += "; " + c.Reason
	}
	return s
}

// serveCell summarises a serve check: outcome, then each pod's status
// and latency ("passed: chat-7d9f-x 200 35ms").
func serveCell(r *rollout.ServeReport) string {
	s := r.Outcome
	if r.Reason != "" {
		s += " (" + r.Reason + ")"
	}
	for i, p := range r.Pods {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		s += fmt.Sprintf("%s%s %s %d %dms", sep, p.Pod, p.Outcome, p.Status, p.LatencyMs)
		if p.Message != "" {
			s += " (" + p.Message + ")"
		}
	}
	return s
}
