// Command demoprogress renders the JSON progress lines of `vllmctl deploy
// --progress json` for people, as the plain progress vllmctl prints itself,
// and measures from them how long a failed rollout took to be caught and
// rolled back. hack/demo.sh (make demo) uses it:
//
//	demoprogress render  < progress.jsonl   plain progress on stdout; other lines verbatim
//	demoprogress timings < progress.jsonl   detection and rollback durations
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/preflight"
	"github.com/vllmctl/vllmctl/release/storage"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: demoprogress render|timings < progress.jsonl")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "render":
		err = render(os.Stdin, os.Stdout)
	case "timings":
		var t *timings
		if t, err = measure(os.Stdin); err == nil {
			err = t.print(os.Stdout)
		}
	default:
		err = fmt.Errorf("unknown mode %q: want render or timings", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demoprogress: %v\n", err)
		os.Exit(1)
	}
}

// line is one progress line: a release event, or the preflight report.
type line struct {
	release.ProgressEvent
	Preflight *preflight.Report `json:"preflight,omitempty"`
}

// parse decodes a progress line; ok is false for lines that are not JSON
// (an error message, say).
func parse(text string) (line, bool) {
	var l line
	if !strings.HasPrefix(text, "{") || json.Unmarshal([]byte(text), &l) != nil {
		return l, false
	}
	return l, true
}

// scan calls fn for every line of r.
func scan(r io.Reader, fn func(text string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if err := fn(sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// render prints every progress line as vllmctl's plain progress does:
// rollout events through wait's plain printer, the others as one line.
func render(r io.Reader, w io.Writer) error {
	var rollout *termout.PlainPrinter
	return scan(r, func(text string) error {
		l, ok := parse(text)
		switch {
		case !ok:
			_, err := fmt.Fprintln(w, text)
			return err
		case l.Preflight != nil:
			rollout = nil
			if err := l.Preflight.Print(w); err != nil {
				return err
			}
			for _, m := range l.Preflight.Messages() {
				if _, err := fmt.Fprintln(w, m); err != nil {
					return err
				}
			}
			return nil
		case l.Phase == release.PhaseWait && l.Object != "":
			if rollout == nil {
				rollout = termout.NewPlainPrinter(w)
			}
			return rollout.Print(waitEvent(l.ProgressEvent))
		default:
			rollout = nil
			_, err := fmt.Fprintln(w, l.String())
			return err
		}
	})
}

// waitEvent rebuilds the watcher's event of a wait-phase progress event.
// Its object is "apps/v1 Deployment ns/name" (see object.Ref.String).
func waitEvent(ev release.ProgressEvent) rollout.Event {
	var ref object.Ref
	if f := strings.Fields(ev.Object); len(f) == 3 {
		if g, v, ok := strings.Cut(f[0], "/"); ok {
			ref.Group, ref.Version = g, v
		} else {
			ref.Version = f[0]
		}
		ref.Kind = f[1]
		if ns, name, ok := strings.Cut(f[2], "/"); ok {
			ref.Namespace, ref.Name = ns, name
		} else {
			ref.Name = f[2]
		}
	} else {
		ref.Name = ev.Object
	}
	return rollout.Event{Time: ev.Time, Object: ref, Status: rollout.Status(ev.Status), Message: ev.Message, Rollout: ev.Rollout}
}

// mark is one moment of a failed rollout.
type mark struct {
	at   time.Time
	what string
}

// timings are the moments of a failed rollout that was rolled back.
type timings struct {
	failedRevision int
	firstSignal    mark // the first warning about a new pod, or the failure
	verdict        mark // the watcher's failure verdict
	rolledBack     mark // the rollback's revision deployed
}

// measure finds the moments of the first failed revision that was rolled
// back: its first warning about a new pod (the first container
// termination the watcher saw), its failure verdict, and the rollback's
// revision marked deployed.
func measure(r io.Reader) (*timings, error) {
	var events []release.ProgressEvent
	err := scan(r, func(text string) error {
		if l, ok := parse(text); ok && l.Preflight == nil {
			events = append(events, l.ProgressEvent)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	t := &timings{}
	for _, ev := range events {
		if ev.Phase == release.PhaseRollback && ev.Status == "started" {
			t.failedRevision = ev.Revision
			t.verdict = mark{ev.Time, strings.TrimPrefix(ev.Message, "rollout failed: ")}
			break
		}
	}
	if t.failedRevision == 0 {
		return nil, errors.New("no rollback started in the progress lines")
	}
	for _, ev := range events {
		if ev.Revision != t.failedRevision || ev.Phase != release.PhaseWait || ev.Rollout == nil {
			continue
		}
		p := ev.Rollout
		newPod := p.Warning != "" && !strings.Contains(p.Warning, "old ReplicaSet")
		if t.firstSignal.at.IsZero() && (newPod || p.Verdict.Failed()) {
			what := p.Warning
			if what == "" {
				what = string(p.Verdict)
			}
			t.firstSignal = mark{ev.Time, what}
		}
		if p.Verdict.Failed() {
			t.verdict = mark{ev.Time, string(p.Verdict)}
			break
		}
	}
	for _, ev := range events {
		if ev.Phase == release.PhaseDone && ev.Status == string(storage.StatusDeployed) && ev.Revision > t.failedRevision {
			t.rolledBack = mark{ev.Time, fmt.Sprintf("revision %d deployed: %s", ev.Revision, ev.Message)}
			break
		}
	}
	switch {
	case t.firstSignal.at.IsZero():
		return nil, fmt.Errorf("revision %d: no failure signal in the progress lines", t.failedRevision)
	case t.rolledBack.at.IsZero():
		return nil, fmt.Errorf("revision %d: the rollback did not finish", t.failedRevision)
	}
	return t, nil
}

// print writes the moments and the durations between them.
func (t *timings) print(w io.Writer) error {
	clock := func(m mark) string { return m.at.UTC().Format("15:04:05.000") }
	secs := func(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
	detection := t.verdict.at.Sub(t.firstSignal.at)
	rollback := t.rolledBack.at.Sub(t.verdict.at)
	var b strings.Builder
	fmt.Fprintf(&b, "revision %d failed and was rolled back:\n", t.failedRevision)
	fmt.Fprintf(&b, "  %s  first failure signal: %s\n", clock(t.firstSignal), t.firstSignal.what)
	fmt.Fprintf(&b, "  %s  verdict: %s\n", clock(t.verdict), t.verdict.what)
	fmt.Fprintf(&b, "  %s  previous revision serving again: %s\n", clock(t.rolledBack), t.rolledBack.what)
	fmt.Fprintf(&b, "detection %s (first failure signal to verdict), rollback %s (verdict to rollback deployed), total %s\n",
		secs(detection), secs(rollback), secs(detection+rollback))
	_, err := io.WriteString(w, b.String())
	return err
}
