package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/internal/object"
)

// Action says what a deploy would do with one object.
type Action string

// The actions a diff reports. Objects a deploy would leave as they are do
// not appear in a Report.
const (
	// ActionChange: the object exists and the deploy would change it (~).
	ActionChange Action = "change"
	// ActionCreate: the object does not exist and the deploy would create
	// it (+).
	ActionCreate Action = "create"
	// ActionPrune: the object belongs to the deployed revision, the new
	// one no longer has it, and the deploy would delete it (-).
	ActionPrune Action = "prune"
)

// Symbol returns the one-character mark of the action: ~, + or -.
func (a Action) Symbol() string {
	switch a {
	case ActionChange:
		return "~"
	case ActionCreate:
		return "+"
	case ActionPrune:
		return "-"
	}
	return "?"
}

// ObjectDiff is what a deploy would do with one object.
type ObjectDiff struct {
	// Ref identifies the object; Object is its String form.
	Ref    object.Ref `json:"-"`
	Object string     `json:"object"`
	Action Action     `json:"action"`
	// Diff is a unified diff (3 lines of context) of the object's YAML,
	// live against dry run, noise removed and Secret values masked. A
	// created object is all additions, a pruned one all removals.
	Diff string `json:"diff"`
	// Rollout is set for a Deployment whose pod template changes.
	Rollout *Rollout `json:"rollout,omitempty"`
	// Conflicts are the fields of a changed object that other field
	// managers own (hand edits such as kubectl scale): Diff shows what a
	// deploy with --force-conflicts would change, and a deploy without it
	// is refused.
	Conflicts []FieldConflict `json:"conflicts,omitempty"`
}

// FieldConflict is one field another field manager owns, which the apply
// would change.
type FieldConflict struct {
	// Field is the field path, e.g. ".spec.replicas".
	Field string `json:"field"`
	// Manager is the other field manager, e.g. "kubectl-scale".
	Manager string `json:"manager"`
	// Subresource is set when the manager wrote the field through one
	// (e.g. "scale").
	Subresource string `json:"subresource,omitempty"`
}

// Note returns what the text rendering adds to the object's header, e.g.
// `conflict: .spec.replicas owned by "kubectl-scale"; deploy needs
// --force-conflicts`; "" when there is nothing to note.
func (o ObjectDiff) Note() string {
	if len(o.Conflicts) == 0 {
		return ""
	}
	var managers []string
	fields := map[string][]string{}
	for _, c := range o.Conflicts {
		m := strconv.Quote(c.Manager)
		if _, ok := fields[m]; !ok {
			managers = append(managers, m)
		}
		if !slices.Contains(fields[m], c.Field) {
			fields[m] = append(fields[m], c.Field)
		}
	}
	parts := make([]string, len(managers))
	for i, m := range managers {
		parts[i] = strings.Join(fields[m], ", ") + " owned by " + m
	}
	return "conflict: " + strings.Join(parts, "; ") + "; deploy needs --force-conflicts"
}

// Summary counts the objects of a Report per action.
type Summary struct {
	Change int `json:"change"`
	Create int `json:"create"`
	Prune  int `json:"prune"`
	// Conflicts counts the changed objects with fields other field
	// managers own (deploy needs --force-conflicts).
	Conflicts int `json:"conflicts,omitempty"`
	// Recorded counts the changes to what the revision records besides
	// its objects (Report.Recorded: hooks, notes, CRDs of crds/).
	Recorded int `json:"recorded,omitempty"`
}

// String returns "3 to change, 1 to create, 1 to prune" (with ", 1 with
// field-manager conflicts (deploy needs --force-conflicts)" when there
// are, and ", 2 recorded changes (hooks, notes, CRDs)" when the record
// changes), or "no changes".
func (s Summary) String() string {
	if s == (Summary{}) {
		return "no changes"
	}
	out := fmt.Sprintf("%d to change, %d to create, %d to prune", s.Change, s.Create, s.Prune)
	if s.Conflicts > 0 {
		out += fmt.Sprintf(", %d with field-manager conflicts (deploy needs --force-conflicts)", s.Conflicts)
	}
	switch {
	case s.Recorded == 1:
		out += ", 1 recorded change (hooks, notes, CRDs)"
	case s.Recorded > 1:
		out += fmt.Sprintf(", %d recorded changes (hooks, notes, CRDs)", s.Recorded)
	}
	return out
}

// Report is the result of a diff: the objects a deploy would change, create
// or prune, in apply order (the charts' sort order) with the prunes last.
type Report struct {
	Objects []ObjectDiff `json:"objects"`
	Summary Summary      `json:"summary"`
	// Hooks are the chart's hooks (helm.sh/hook) the deploy would run,
	// listed apart: they are not objects of the release.
	Hooks []Hook `json:"hooks,omitempty"`
	// Recorded are the changes to what the deployed revision records
	// besides its objects: its hooks (every event's, test hooks
	// included), its notes and the CRDs of the chart's crds/. Any of
	// them makes a new revision, as a changed object does. Absent on an
	// install (nothing is recorded yet).
	Recorded []RecordedChange `json:"recorded,omitempty"`
}

// SetRecorded sets what the record changes (see Recorded) and its count
// in the summary.
func (r *Report) SetRecorded(changes []RecordedChange) {
	r.Recorded = changes
	r.Summary.Recorded = len(changes)
}

// Hook is one hook of the rendered chart, as a diff lists it.
type Hook struct {
	// Object is "apiVersion Kind namespace/name".
	Object string `json:"object"`
	// Events are when it runs.
	Events []string `json:"events"`
	// Weight orders the hooks of one event.
	Weight int `json:"weight"`
}

// Empty reports whether the deploy would change nothing: no object and
// nothing the revision records.
func (r *Report) Empty() bool {
	return r == nil || (len(r.Objects) == 0 && len(r.Recorded) == 0)
}

// document returns r ready to marshal: never a null objects list.
func (r *Report) document() Report {
	if r == nil {
		return Report{Objects: []ObjectDiff{}}
	}
	doc := *r
	if doc.Objects == nil {
		doc.Objects = []ObjectDiff{}
	}
	return doc
}

// WriteJSON writes r as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	data, err := json.MarshalIndent(r.document(), "", "  ")
	if err != nil {
		return fmt.Errorf("encode diff as JSON: %w", err)
	}
	data = append(data, '\n')
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	return nil
}

// WriteYAML writes r as one YAML document (the JSON document's fields).
func (r *Report) WriteYAML(w io.Writer) error {
	data, err := yaml.Marshal(r.document())
	if err != nil {
		return fmt.Errorf("encode diff as YAML: %w", err)
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	return nil
}

// ANSI colours of the text rendering.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

// WriteText writes r for people: per object a header ("~ apps/v1
// Deployment ns/name", "+ ..." for a create, "- ..." for a prune; a
// changed object with field-manager conflicts gets its Note in
// parentheses), the rollout impact of a Deployment whose pod template
// changes, and the unified diff; then each recorded change ("~ hook
// batch/v1 Job ns/name", "~ notes NOTES.txt") with its diff, the hooks the
// deploy runs, and the summary line. color adds ANSI colours (for a
// terminal).
func (r *Report) WriteText(w io.Writer, color bool) error {
	var b strings.Builder
	paint := func(code, s string) string {
		if !color || s == "" {
			return s
		}
		return code + s + ansiReset
	}
	doc := r.document()
	writeDiff := func(diffText string) {
		for i, line := range strings.SplitAfter(diffText, "\n") {
			if line == "" {
				continue
			}
			text := strings.TrimSuffix(line, "\n")
			switch {
			case i < 2 && (strings.HasPrefix(text, "--- ") || strings.HasPrefix(text, "+++ ")):
				text = paint(ansiBold, text)
			case strings.HasPrefix(text, "@@"):
				text = paint(ansiCyan, text)
			case strings.HasPrefix(text, "+"):
				text = paint(ansiGreen, text)
			case strings.HasPrefix(text, "-"):
				text = paint(ansiRed, text)
			}
			b.WriteString(text)
			b.WriteByte('\n')
		}
		b.WriteByte('\n')
	}
	headColor := map[Action]string{ActionChange: ansiYellow, ActionCreate: ansiGreen, ActionPrune: ansiRed}
	for _, o := range doc.Objects {
		b.WriteString(paint(ansiBold+headColor[o.Action], o.Action.Symbol()+" "+o.Object))
		if note := o.Note(); note != "" {
			b.WriteString(" " + paint(ansiBold+ansiRed, "("+note+")"))
		}
		b.WriteByte('\n')
		if o.Rollout != nil {
			b.WriteString("  " + paint(ansiBold, o.Rollout.String()))
			b.WriteByte('\n')
		}
		writeDiff(o.Diff)
	}
	for _, c := range doc.Recorded {
		// "~ hook batch/v1 Job ml/migrate", "~ notes NOTES.txt"
		b.WriteString(paint(ansiBold+headColor[c.Action], c.Action.Symbol()+" "+c.What+" "+c.Name) + "\n")
		writeDiff(c.Diff)
	}
	if len(doc.Hooks) > 0 {
		b.WriteString(paint(ansiBold, "Hooks the deploy runs:") + "\n")
		for _, h := range doc.Hooks {
			fmt.Fprintf(&b, "  %s %s (weight %d)\n", strings.Join(h.Events, ","), h.Object, h.Weight)
		}
		b.WriteByte('\n')
	}
	b.WriteString(paint(ansiBold, doc.Summary.String()))
	b.WriteByte('\n')
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	return nil
}
