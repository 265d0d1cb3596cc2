package diff

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/secretdata"
)

// minLineValue is the shortest Secret value a Redactor looks for in
// lines: shorter ones ("true", "1", "admin") are too common to tell apart
// from ordinary text and would withhold every line.
const minLineValue = 6

// Withheld replaces a line a Redactor cannot clean (it still holds a
// fragment of a value): the one marker, as for a value.
const Withheld = Redacted

// Redactor is the one redactor every error, progress line and result
// document of an operation passes through: it knows the values of every
// Secret the operation rendered or read from a record (AddObjects), and
// replaces them in text. A line that still holds a fragment of a value
// (any gramLen consecutive bytes of one, e.g. a value cut short) is
// withheld whole. It is safe for concurrent use; the nil Redactor changes
// nothing.
type Redactor struct {
	mu     sync.RWMutex
	values []string // longest first
	known  map[string]bool
}

// NewRedactor returns an empty Redactor.
func NewRedactor() *Redactor { return &Redactor{known: map[string]bool{}} }

// AddObjects learns the values of the Secrets among objs, in every form a
// message could echo (as written, decoded, encoded).
func (r *Redactor) AddObjects(objs ...*unstructured.Unstructured) {
	if r == nil {
		return
	}
	r.AddValues(secretdata.Values(objs...)...)
}

// AddValues learns values to withhold.
func (r *Redactor) AddValues(values ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := false
	for _, v := range values {
		if len(v) < minLineValue || r.known[v] {
			continue
		}
		for _, form := range append([]string{v}, escapedForms(v)...) {
			if !r.known[form] {
				r.known[form] = true
				r.values = append(r.values, form)
			}
		}
		changed = true
	}
	if changed {
		sort.SliceStable(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	}
}

// escapedForms are the other ways a document can spell v: JSON's escapes
// (with and without its HTML escapes of <, > and &), and YAML's
// single-quoted form, which doubles a quote.
func escapedForms(v string) []string {
	var forms []string
	add := func(f string) {
		if f != v && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	if b, err := json.Marshal(v); err == nil {
		add(string(b[1 : len(b)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) == nil {
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		add(string(b[1 : len(b)-1]))
	}
	add(strings.ReplaceAll(v, "'", "''"))
	return forms
}

// Line returns s with every known value replaced by "(redacted)", or
// Withheld when a fragment of one remains.
func (r *Redactor) Line(s string) string {
	out, _ := r.clean(s)
	return out
}

// clean is Line, also reporting whether s changed.
func (r *Redactor) clean(s string) (string, bool) {
	if r == nil || s == "" {
		return s, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.values) == 0 || !leaks(s, r.values) {
		return s, false
	}
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, Redacted)
	}
	if leaks(s, r.values) {
		return Withheld, true
	}
	return s, true
}

// Lines cleans each of lines (a copy; nil stays nil).
func (r *Redactor) Lines(lines []string) []string {
	if lines == nil {
		return nil
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = r.Line(l)
	}
	return out
}

// Text cleans s line by line: a line that still holds a fragment of a
// value is withheld, the other lines are kept.
func (r *Redactor) Text(s string) string {
	if r == nil || s == "" {
		return s
	}
	return strings.Join(r.Lines(strings.Split(s, "\n")), "\n")
}

// Err returns err when its message holds no known value, else an error
// with the cleaned message and err's exit code (it does not unwrap to
// err, so the value cannot be reached through it).
func (r *Redactor) Err(err error) error {
	if err == nil {
		return nil
	}
	msg, changed := r.clean(err.Error())
	if !changed {
		return err
	}
	return &redactedLineError{msg: msg, code: exitcode.Of(err)}
}

type redactedLineError struct {
	msg  string
	code int
}

func (e *redactedLineError) Error() string { return e.msg }

// ExitCode is the original error's.
func (e *redactedLineError) ExitCode() int { return e.code }
