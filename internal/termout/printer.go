// Progress printers (plain, live, JSON) of a wait's events, and
// WriteDiagnosis, the rendering of a Diagnosis. The text printers pass
// every line through SanitizeLine: events quote the cluster and the logs.

package termout

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

// ProgressFormat selects how progress events are printed.
type ProgressFormat string

// The progress formats.
const (
	// ProgressAuto: a live view redrawn in place when the writer is a
	// terminal, plain lines otherwise.
	ProgressAuto ProgressFormat = "auto"
	// ProgressPlain: one timestamped line per change.
	ProgressPlain ProgressFormat = "plain"
	// ProgressJSON: one JSON object (a rollout.Event) per line.
	ProgressJSON ProgressFormat = "json"
)

// ProgressPrinter prints the progress events of a wait.
type ProgressPrinter interface {
	// Print prints one event.
	Print(ev rollout.Event) error
	// Close ends the output (the events are over); it does not close the
	// writer.
	Close() error
}

// NewProgressPrinter returns the printer of format writing to w. With
// ProgressAuto (or ""), the live view is used only when w is a terminal.
func NewProgressPrinter(w io.Writer, format ProgressFormat) (ProgressPrinter, error) {
	switch format {
	case ProgressAuto, "":
		if IsTerminal(w) {
			return NewLivePrinter(w), nil
		}
		return NewPlainPrinter(w), nil
	case ProgressPlain:
		return NewPlainPrinter(w), nil
	case ProgressJSON:
		return NewJSONPrinter(w), nil
	}
	return nil, fmt.Errorf("unknown progress format %q (want auto, plain or json)", format)
}

// IsTerminal reports whether w is a terminal, looking through writers
// that wrap one (Unwrap, as the command's redacting streams have).
func IsTerminal(w io.Writer) bool {
	for {
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// eventKey identifies the object of an event.
func eventKey(ev rollout.Event) string {
	return ev.Object.Namespace + "/" + rollout.ObjectName(ev.Object)
}

// eventLine formats an event without a timestamp:
//
//	deployment/chat: 1/2 updated, 1 ready, 1 available (new rs chat-7d9f8c6b5)
//	deployment/chat: 2/2 updated, 2 ready, 2 available (new rs chat-7d9f8c6b5): rolled out
//	statefulset/web: 1/2 updated, 1 ready, 1 available (update revision web-7c9d; current revision web-5f6b)
//	service/chat: Current
func eventLine(ev rollout.Event) string {
	var b strings.Builder
	b.WriteString(rollout.ObjectName(ev.Object))
	b.WriteString(": ")
	p := ev.Rollout
	if p == nil || ev.Status == rollout.StatusNotFound || ev.Status == rollout.StatusUnknown {
		b.WriteString(string(ev.Status))
		if ev.Message != "" {
			b.WriteString(": " + ev.Message)
		}
		return b.String()
	}
	fmt.Fprintf(&b, "%d/%d updated, %d ready, %d available", p.Updated, p.Desired, p.Ready, p.Available)
	var rs []string
	if p.NewReplicaSet != "" {
		rs = append(rs, "new rs "+p.NewReplicaSet)
	}
	if len(p.OldReplicaSets) > 0 {
		rs = append(rs, "old rs "+strings.Join(p.OldReplicaSets, ", "))
	}
	if p.UpdateRevision != "" {
		rs = append(rs, "update revision "+p.UpdateRevision)
		if p.CurrentRevision != "" && p.CurrentRevision != p.UpdateRevision {
			rs = append(rs, "current revision "+p.CurrentRevision)
		}
	}
	if len(rs) > 0 {
		b.WriteString(" (" + strings.Join(rs, "; ") + ")")
	}
	switch {
	case p.Verdict == rollout.VerdictRolledOut:
		b.WriteString(": rolled out")
	case p.Verdict == rollout.VerdictTimeout:
		b.WriteString(": timed out: " + ev.Message)
	case p.Verdict.Failed():
		b.WriteString(": failed: " + ev.Message)
	case len(p.Pods) > 0:
		b.WriteString(", new " + phasesLine(p.Pods, ev.Time))
	}
	return b.String()
}

// failureLines are the lines that follow the line of a failure verdict:
// its cause and evidence, then its hints, sanitised.
//
//	cause: gpu-oom: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
//	hint: lower `--gpu-memory-utilization` (model.gpuMemoryUtilization, now 0.95) or ...
func failureLines(ev rollout.Event) []string {
	p := ev.Rollout
	if p == nil || !p.Verdict.Failed() || (p.Cause == "" && len(p.Hints) == 0) {
		return nil
	}
	var out []string
	if p.Cause != "" {
		c := "cause: " + string(p.Cause)
		if p.Evidence != "" {
			c += ": " + p.Evidence
		}
		out = append(out, SanitizeLine(c))
	}
	for _, h := range p.Hints {
		out = append(out, SanitizeLine("hint: "+h))
	}
	return out
}

// PlainPrinter prints one timestamped line per change:
//
//	2026-11-30T01:02:03Z deployment/chat: 1/2 updated, 1 ready, 1 available (new rs chat-7d9f8c6b5)
//	2026-11-30T01:02:04Z deployment/chat: warning: pod chat-7d9f8c6b5-x2k4q container vllm: CrashLoopBackOff (restarts 1/2)
type PlainPrinter struct {
	w    io.Writer
	last map[string]string
}

// NewPlainPrinter returns a PlainPrinter writing to w.
func NewPlainPrinter(w io.Writer) *PlainPrinter {
	return &PlainPrinter{w: w, last: map[string]string{}}
}

// Print prints ev's line unless it says what the object's last line said;
// a warning is always printed.
func (p *PlainPrinter) Print(ev rollout.Event) error {
	stamp := ev.Time.UTC().Format(time.RFC3339)
	if ev.Rollout != nil && ev.Rollout.Warning != "" {
		if _, err := fmt.Fprintf(p.w, "%s %s: warning: %s\n", stamp, rollout.ObjectName(ev.Object), SanitizeLine(ev.Rollout.Warning)); err != nil {
			return err
		}
	}
	line := SanitizeLine(eventLine(ev))
	key := eventKey(ev)
	if p.last[key] == line {
		return nil
	}
	p.last[key] = line
	if _, err := fmt.Fprintf(p.w, "%s %s\n", stamp, line); err != nil {
		return err
	}
	for _, l := range failureLines(ev) {
		if _, err := fmt.Fprintf(p.w, "%s %s: %s\n", stamp, rollout.ObjectName(ev.Object), l); err != nil {
			return err
		}
	}
	return nil
}

// Close does nothing.
func (p *PlainPrinter) Close() error { return nil }

// LivePrinter keeps one line per object on a terminal and redraws them in
// place (ANSI cursor movement) as they change; warnings scroll above them.
type LivePrinter struct {
	w     io.Writer
	keys  []string
	lines map[string]string
	drawn int
}

// NewLivePrinter returns a LivePrinter writing to w, which should be a
// terminal (see NewProgressPrinter).
func NewLivePrinter(w io.Writer) *LivePrinter {
	return &LivePrinter{w: w, lines: map[string]string{}}
}

// Print updates ev's object line, prints ev's warning if any, and redraws.
func (p *LivePrinter) Print(ev rollout.Event) error {
	key := eventKey(ev)
	line := SanitizeLine(eventLine(ev))
	stamp := ev.Time.UTC().Format(time.RFC3339)
	var scroll []string
	if ev.Rollout != nil && ev.Rollout.Warning != "" {
		scroll = append(scroll, fmt.Sprintf("%s %s: warning: %s", stamp, rollout.ObjectName(ev.Object), SanitizeLine(ev.Rollout.Warning)))
	}
	for _, l := range failureLines(ev) {
		scroll = append(scroll, fmt.Sprintf("%s %s: %s", stamp, rollout.ObjectName(ev.Object), l))
	}
	old, known := p.lines[key]
	if known && old == line && len(scroll) == 0 {
		return nil
	}
	if !known {
		p.keys = append(p.keys, key)
	}
	p.lines[key] = line

	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	for _, l := range scroll {
		b.WriteString("\r\x1b[2K" + l + "\n")
	}
	for _, k := range p.keys {
		b.WriteString("\r\x1b[2K" + p.lines[k] + "\n")
	}
	p.drawn = len(p.keys)
	_, err := io.WriteString(p.w, b.String())
	return err
}

// Close leaves the last view on the terminal.
func (p *LivePrinter) Close() error { return nil }

// JSONPrinter prints every event as one JSON object per line.
type JSONPrinter struct {
	enc *json.Encoder
}

// NewJSONPrinter returns a JSONPrinter writing to w.
func NewJSONPrinter(w io.Writer) *JSONPrinter {
	return &JSONPrinter{enc: json.NewEncoder(w)}
}

// Print writes ev as a JSON line.
func (p *JSONPrinter) Print(ev rollout.Event) error { return p.enc.Encode(ev) }

// Close does nothing.
func (p *JSONPrinter) Close() error { return nil }

// WriteDiagnosis writes d for people, every value sanitised (SanitizeLine):
//
//	rollout failed: OOMKilled
//	  object:    deployment/chat
//	  pod:       chat-7d9f8c6b5-x2k4q (node gpu-node-1)
//	  container: vllm (exit code 137, 0 restarts)
//	  message:   OOMKilled, exit code 137
//	  cause:     unknown
//	  events:
//	    Warning BackOff: Back-off restarting failed container
//	  log tail:
//	    RuntimeError: Engine core initialization failed. See root cause above.
//	  hints:
//	    - ...
func WriteDiagnosis(w io.Writer, d *rollout.Diagnosis) error {
	if d == nil {
		return nil
	}
	head := "rollout failed"
	if d.Verdict == rollout.VerdictTimeout {
		head = "rollout timed out"
	}
	return writeDiagnosis(w, fmt.Sprintf("%s: %s", head, SanitizeLine(d.Reason)), d)
}

// WriteDiagnosisOnDemand writes d as WriteDiagnosis does, under the head
// "diagnosis: REASON" ("diagnosis" when d has no reason, as a log's): the
// output of vllmctl diagnose.
func WriteDiagnosisOnDemand(w io.Writer, d *rollout.Diagnosis) error {
	if d == nil {
		return nil
	}
	head := "diagnosis"
	if d.Reason != "" {
		head += ": " + SanitizeLine(d.Reason)
	}
	return writeDiagnosis(w, head, d)
}

func writeDiagnosis(w io.Writer, head string, d *rollout.Diagnosis) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", head)
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "  %-10s %s\n", name+":", SanitizeLine(value))
		}
	}
	field("verdict", string(d.Verdict))
	field("object", d.Object)
	if d.Pod != "" {
		pod := d.Pod
		if d.Node != "" {
			pod += " (node " + d.Node + ")"
		}
		field("pod", pod)
	}
	if d.Container != "" {
		c := d.Container
		if d.ExitCode != 0 || d.RestartCount != 0 {
			c += fmt.Sprintf(" (exit code %d, %d restarts)", d.ExitCode, d.RestartCount)
		}
		field("container", c)
	}
	field("message", d.Message)
	field("cause", string(d.Cause))
	field("evidence", d.Evidence)
	list := func(name string, items []string, bullet string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(&b, "  %s:\n", name)
		for _, it := range items {
			fmt.Fprintf(&b, "    %s%s\n", bullet, SanitizeLine(it))
		}
	}
	list("events", d.Events, "")
	list("log tail", d.LogTail, "")
	field("logs", d.LogNote)
	list("hints", d.Hints, "- ")
	_, err := io.WriteString(w, b.String())
	return err
}

// phasesLine summarises the pods' phases for a progress line at now:
// "pods: 1 Loading (startup probe: 29m10s left), 1 Ready".
func phasesLine(phases []rollout.PodPhase, now time.Time) string {
	order := []string{rollout.PhasePending, rollout.PhaseScheduled, rollout.PhasePulling, rollout.PhaseInitializing, rollout.PhaseStarting, rollout.PhaseLoading, rollout.PhaseExited, rollout.PhaseReady}
	counts := map[string]int{}
	var others []string
	var deadline time.Time
	for _, p := range phases {
		if counts[p.Phase] == 0 && !slices.Contains(order, p.Phase) {
			others = append(others, p.Phase)
		}
		counts[p.Phase]++
		if p.Phase == rollout.PhaseLoading && !p.StartupDeadline.IsZero() && (deadline.IsZero() || p.StartupDeadline.Before(deadline)) {
			deadline = p.StartupDeadline
		}
	}
	var parts []string
	for _, name := range append(order, others...) {
		n := counts[name]
		if n == 0 {
			continue
		}
		part := fmt.Sprintf("%d %s", n, name)
		if name == rollout.PhaseLoading && !deadline.IsZero() {
			left := deadline.Sub(now).Round(time.Second)
			if left > 0 {
				part += fmt.Sprintf(" (startup probe: %s left)", left)
			} else {
				part += " (startup probe budget spent)"
			}
		}
		parts = append(parts, part)
	}
	return "pods: " + strings.Join(parts, ", ")
}
