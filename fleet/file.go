package fleet

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// OnFailure is what a fleet deploy does with the targets it already
// changed when a target fails.
type OnFailure string

// The onFailure policies.
const (
	// RollbackFleet rolls every target this run changed back to its
	// revision before the run (the default).
	RollbackFleet OnFailure = "rollback-fleet"
	// RollbackTarget restores only the failed target (its deploy's own
	// automatic rollback does it); the targets already changed stay.
	RollbackTarget OnFailure = "rollback-target"
	// Stop starts no new target and leaves every target as it is (the
	// failed target's own automatic rollback still runs).
	Stop OnFailure = "stop"
)

// ReservedName is no target's name: the fleet's own progress lines go
// under it.
const ReservedName = "fleet"

// DefaultGateTimeout bounds the gate command between two waves.
const DefaultGateTimeout = 10 * time.Minute

// File is a parsed, validated fleet file.
type File struct {
	// Path is the fleet file's path, absolute.
	Path string
	// Release is the release name, the same in every target.
	Release string
	// Chart is the chart source (any CHART deploy accepts; "": the
	// built-in default chart) and Version its version constraint.
	Chart, Version string
	// Values are the shared values files (absolute paths) and Set the
	// shared --set values (Helm syntax), applied before a target's own.
	Values []string
	Set    []string
	// Targets are the targets, in file order.
	Targets []TargetSpec
	// Waves are the target names of each wave, in order.
	Waves [][]string
	// Policy is how the waves run.
	Policy Policy
}

// TargetSpec is one target of a fleet file: where the release is
// deployed and its own values overlays.
type TargetSpec struct {
	Name string `json:"name"`
	// Context is the kubeconfig context.
	Context string `json:"context"`
	// Namespace is the release namespace ("": the context's).
	Namespace string `json:"namespace,omitempty"`
	// Values (absolute paths) and Set are applied after the shared ones.
	Values []string `json:"values,omitempty"`
	Set    []string `json:"set,omitempty"`
	// Line is where the target is defined in the file.
	Line int `json:"-"`
}

// Policy is how a fleet deploy runs its waves.
type Policy struct {
	// MaxParallel bounds the targets of a wave deployed at once (0: the
	// wave's size).
	MaxParallel int `json:"maxParallel,omitempty"`
	// Soak is how long a finished wave stays under watch, every verdict
	// applied, before the next one starts (0: none).
	Soak time.Duration `json:"-"`
	// Gate is a shell command run between two waves; a non-zero exit
	// fails the fleet.
	Gate string `json:"gate,omitempty"`
	// OnFailure is what happens to the changed targets when one fails.
	OnFailure OnFailure `json:"onFailure"`
}

// Problem is one thing wrong with a fleet file: where and what.
type Problem struct {
	Line int
	// Field is the field's path, e.g. targets[1].context.
	Field   string
	Message string
}

// FileError reports an invalid fleet file (exit code 2): every problem
// found, with its line.
type FileError struct {
	Path     string
	Problems []Problem
	// Err is an error reading or decoding the file as a whole.
	Err error
}

func (e *FileError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("fleet file %s: %v", e.Path, e.Err)
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = fmt.Sprintf("%s:%d: %s: %s", e.Path, p.Line, p.Field, p.Message)
	}
	return "invalid fleet file:\n  " + strings.Join(lines, "\n  ")
}

// Unwrap returns the read or decode error.
func (e *FileError) Unwrap() error { return e.Err }

// ExitCode is 2: invalid input, nothing applied.
func (e *FileError) ExitCode() int { return exitcode.Invalid }

// MaxFileBytes caps a fleet file: a few targets, waves and a policy (its
// values files are read with charts.MaxValuesFileBytes each).
const MaxFileBytes = 1 << 20

// Load reads (at most MaxFileBytes: a larger or endless file, such as
// /dev/zero, is refused at once) and parses the fleet file at path.
func Load(path string) (*File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	data, err := charts.ReadFileCapped(abs, MaxFileBytes)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	return Parse(abs, data)
}

// Parse parses and validates a fleet file's content; path (absolute)
// names it in errors and is where relative values files are found.
// Unknown keys, wrong types, duplicate or unknown target names, a target
// in no wave or in two are errors naming file, line and field.
func Parse(path string, data []byte) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &FileError{Path: path, Err: fmt.Errorf("not YAML: %w", err)}
	}
	p := &parser{path: path, dir: filepath.Dir(path), f: &File{Path: path}}
	if len(doc.Content) == 0 {
		p.add(1, "(file)", "empty: want a mapping with release, targets and waves")
	} else {
		p.root(doc.Content[0])
	}
	if len(p.problems) > 0 {
		return nil, &FileError{Path: path, Problems: p.problems}
	}
	if p.f.Policy.OnFailure == "" {
		p.f.Policy.OnFailure = RollbackFleet
	}
	return p.f, nil
}

type parser struct {
	path, dir string
	f         *File
	problems  []Problem
}

func (p *parser) add(line int, field, format string, args ...any) {
	p.problems = append(p.problems, Problem{Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// mapping walks the keys of a mapping node: each known key's value goes
// to its handler; unknown and duplicate keys are problems.
func (p *parser) mapping(n *yaml.Node, field string, handlers map[string]func(*yaml.Node, string)) map[string]*yaml.Node {
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, field, "want a mapping, got %s", kindName(n))
		return nil
	}
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := join(field, k.Value)
		if _, dup := seen[k.Value]; dup {
			p.add(k.Line, name, "duplicate key")
			continue
		}
		seen[k.Value] = k
		h, ok := handlers[k.Value]
		if !ok {
			known := make([]string, 0, len(handlers))
			for key := range handlers {
				known = append(known, key)
			}
			slices.Sort(known)
			p.add(k.Line, name, "unknown key (want one of %s)", strings.Join(known, ", "))
			continue
		}
		h(v, name)
	}
	return seen
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "null"
	}
	return "a scalar " + strconv.Quote(n.Value)
}

// str decodes a string scalar.
func (p *parser) str(n *yaml.Node, field string, out *string) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.add(n.Line, field, "want a string, got %s", kindName(n))
		return
	}
	*out = n.Value
}

// strs decodes a list of strings.
func (p *parser) strs(n *yaml.Node, field string, out *[]string) {
	if n.Kind != yaml.SequenceNode {
		p.add(n.Line, field, "want a list of strings, got %s", kindName(n))
		return
	}
	for i, c := range n.Content {
		var s string
		p.str(c, fmt.Sprintf("%s[%d]", field, i), &s)
		*out = append(*out, s)
	}
}

// values decodes values files, relative to the fleet file.
func (p *parser) values(n *yaml.Node, field string, out *[]string) {
	var files []string
	p.strs(n, field, &files)
	for i, f := range files {
		if f == "" {
			p.add(n.Content[i].Line, fmt.Sprintf("%s[%d]", field, i), "empty path")
			continue
		}
		if !filepath.IsAbs(f) {
			f = filepath.Join(p.dir, f)
		}
		*out = append(*out, f)
	}
}

// sets decodes --set values: each key=value.
func (p *parser) sets(n *yaml.Node, field string, out *[]string) {
	var sets []string
	p.strs(n, field, &sets)
	for i, s := range sets {
		if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
			p.add(n.Content[i].Line, fmt.Sprintf("%s[%d]", field, i), "%q: want key=value (Helm --set syntax)", s)
			continue
		}
		*out = append(*out, s)
	}
}

func (p *parser) root(n *yaml.Node) {
	f := p.f
	var targetsNode, wavesNode *yaml.Node
	seen := p.mapping(n, "", map[string]func(*yaml.Node, string){
		"release": func(v *yaml.Node, field string) {
			p.str(v, field, &f.Release)
			if f.Release != "" {
				if problem := charts.ReleaseNameProblem(f.Release); problem != "" {
					p.add(v.Line, field, "%q: %s", f.Release, problem)
				}
			}
		},
		"chart":   func(v *yaml.Node, field string) { p.str(v, field, &f.Chart) },
		"version": func(v *yaml.Node, field string) { p.str(v, field, &f.Version) },
		"values":  func(v *yaml.Node, field string) { p.values(v, field, &f.Values) },
		"set":     func(v *yaml.Node, field string) { p.sets(v, field, &f.Set) },
		"targets": func(v *yaml.Node, field string) { targetsNode = v; p.targets(v, field) },
		"waves":   func(v *yaml.Node, field string) { wavesNode = v },
		"policy":  func(v *yaml.Node, field string) { p.policy(v, field) },
	})
	if seen == nil {
		return
	}
	for _, required := range []string{"release", "targets", "waves"} {
		if _, ok := seen[required]; !ok {
			p.add(n.Line, required, "required")
		}
	}
	if wavesNode != nil && targetsNode != nil {
		p.waves(wavesNode, "waves")
	}
}

func (p *parser) targets(n *yaml.Node, field string) {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.add(n.Line, field, "want a non-empty list of targets, got %s", kindName(n))
		return
	}
	names := map[string]int{}
	places := map[string]string{}
	for i, c := range n.Content {
		tf := fmt.Sprintf("%s[%d]", field, i)
		t := TargetSpec{Line: c.Line}
		seen := p.mapping(c, tf, map[string]func(*yaml.Node, string){
			"name":      func(v *yaml.Node, field string) { p.str(v, field, &t.Name) },
			"context":   func(v *yaml.Node, field string) { p.str(v, field, &t.Context) },
			"namespace": func(v *yaml.Node, field string) { p.str(v, field, &t.Namespace) },
			"values":    func(v *yaml.Node, field string) { p.values(v, field, &t.Values) },
			"set":       func(v *yaml.Node, field string) { p.sets(v, field, &t.Set) },
		})
		if seen == nil {
			continue
		}
		for _, required := range []string{"name", "context"} {
			if _, ok := seen[required]; !ok {
				p.add(c.Line, join(tf, required), "required")
			}
		}
		if k := seen["name"]; k != nil && t.Name != "" {
			if problem := targetNameProblem(t.Name); problem != "" {
				p.add(k.Line, join(tf, "name"), "%q: %s", t.Name, problem)
			}
			if first, dup := names[t.Name]; dup {
				p.add(k.Line, join(tf, "name"), "%q: duplicate target name (first at line %d)", t.Name, first)
			} else {
				names[t.Name] = k.Line
			}
		}
		if t.Context != "" {
			place := t.Context + "/" + t.Namespace
			if other, dup := places[place]; dup {
				p.add(c.Line, tf, "context %q namespace %q: the same place as target %q", t.Context, t.Namespace, other)
			} else {
				places[place] = t.Name
			}
		}
		if t.Namespace != "" {
			if problems := validation.IsDNS1123Label(t.Namespace); len(problems) > 0 {
				p.add(seen["namespace"].Line, join(tf, "namespace"), "%q: %s", t.Namespace, strings.Join(problems, "; "))
			}
		}
		p.f.Targets = append(p.f.Targets, t)
	}
}

// targetNameProblem checks a target name: letters, digits, '-', '_' and
// '.' (it prefixes progress lines and is an environment value).
func targetNameProblem(name string) string {
	if name == ReservedName {
		return "reserved: the fleet's own progress lines are prefixed [" + ReservedName + "]"
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return "want letters, digits, '-', '_' or '.'"
		}
	}
	return ""
}

func (p *parser) waves(n *yaml.Node, field string) {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.add(n.Line, field, "want a non-empty list of waves (lists of target names), got %s", kindName(n))
		return
	}
	known := map[string]bool{}
	for _, t := range p.f.Targets {
		known[t.Name] = true
	}
	in := map[string]string{}
	for i, w := range n.Content {
		wf := fmt.Sprintf("%s[%d]", field, i)
		if w.Kind != yaml.SequenceNode || len(w.Content) == 0 {
			p.add(w.Line, wf, "want a non-empty list of target names, got %s", kindName(w))
			p.f.Waves = append(p.f.Waves, nil)
			continue
		}
		var wave []string
		for j, c := range w.Content {
			cf := fmt.Sprintf("%s[%d]", wf, j)
			var name string
			p.str(c, cf, &name)
			switch {
			case name == "":
			case !known[name]:
				p.add(c.Line, cf, "%q: no such target", name)
			case in[name] != "":
				p.add(c.Line, cf, "%q: already in %s", name, in[name])
			default:
				in[name] = wf
				wave = append(wave, name)
			}
		}
		p.f.Waves = append(p.f.Waves, wave)
	}
	for _, t := range p.f.Targets {
		if t.Name != "" && in[t.Name] == "" {
			p.add(t.Line, "targets."+t.Name, "in no wave: every target belongs to exactly one wave")
		}
	}
}

func (p *parser) policy(n *yaml.Node, field string) {
	pol := &p.f.Policy
	p.mapping(n, field, map[string]func(*yaml.Node, string){
		"maxParallel": func(v *yaml.Node, field string) {
			i, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || err != nil || i < 1 {
				p.add(v.Line, field, "want a whole number of 1 or more, got %s", kindName(v))
				return
			}
			pol.MaxParallel = i
		},
		"soak": func(v *yaml.Node, field string) {
			var s string
			p.str(v, field, &s)
			if s == "" {
				return
			}
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				p.add(v.Line, field, "%q: want a duration such as 5m or 90s", s)
				return
			}
			pol.Soak = d
		},
		"gate": func(v *yaml.Node, field string) { p.str(v, field, &pol.Gate) },
		"onFailure": func(v *yaml.Node, field string) {
			var s string
			p.str(v, field, &s)
			switch o := OnFailure(s); o {
			case RollbackFleet, RollbackTarget, Stop:
				pol.OnFailure = o
			default:
				if s != "" || v.Kind == yaml.ScalarNode {
					p.add(v.Line, field, "%q: want rollback-fleet, rollback-target or stop", s)
				}
			}
		},
	})
}

// Target returns the target named name.
func (f *File) Target(name string) (TargetSpec, error) {
	for _, t := range f.Targets {
		if t.Name == name {
			return t, nil
		}
	}
	return TargetSpec{}, errors.New("fleet file " + f.Path + ": no target " + strconv.Quote(name))
}
