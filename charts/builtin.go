package charts

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// builtinFS holds the built-in charts, one top-level directory each. The
// "all:" prefix keeps files starting with "_" (templates/_helpers.tpl) and
// ".". It is read-only.
//
//go:embed all:vllm
var builtinFS embed.FS

// BuiltinCharts returns the names of the built-in charts, sorted.
func BuiltinCharts() []string {
	entries, err := fs.ReadDir(builtinFS, ".")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// IsBuiltin reports whether name is the name of a built-in chart.
func IsBuiltin(name string) bool {
	return slices.Contains(BuiltinCharts(), name)
}

// loadBuiltin loads the built-in chart name from the embedded files the way
// Helm's directory loader would load its directory: .helmignore applies and
// templates/.* files are skipped.
func loadBuiltin(name string) (*chart.Chart, error) {
	files, err := readChartFS(builtinFS, name)
	if err != nil {
		return nil, fmt.Errorf("built-in chart %s: %w", name, err)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("built-in chart %s: %w", name, err)
	}
	return ch, nil
}

// readChartFS reads the files of the chart in directory dir of fsys, with
// names relative to dir, honouring dir/.helmignore like Helm's DirLoader.
func readChartFS(fsys fs.FS, dir string) ([]*archive.BufferedFile, error) {
	rules := &ignoreRules{}
	if data, err := fs.ReadFile(fsys, path.Join(dir, ".helmignore")); err == nil {
		if err := rules.parse(data); err != nil {
			return nil, fmt.Errorf(".helmignore: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	rules.addDefaults()

	var files []*archive.BufferedFile
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if rel == "" {
			return nil
		}
		if rules.ignore(rel, d.IsDir()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		data = bytes.TrimPrefix(data, []byte{0xEF, 0xBB, 0xBF})
		files = append(files, &archive.BufferedFile{Name: rel, Data: data})
		return nil
	})
	return files, err
}

// ignoreRules implements the .helmignore semantics of Helm's pkg/ignore
// (which this package does not import): blank lines and # comments are
// skipped, "!" negates, a trailing "/" matches directories only, a leading
// "/" or any "/" matches the whole relative path, otherwise the base name.
type ignoreRules struct {
	patterns []ignorePattern
}

type ignorePattern struct {
	rule    string
	negate  bool
	mustDir bool
	full    bool // match the whole path rather than the base name
}

func (r *ignoreRules) parse(data []byte) error {
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		if err := r.add(string(bytes.TrimPrefix(s.Bytes(), []byte{0xEF, 0xBB, 0xBF}))); err != nil {
			return err
		}
	}
	return s.Err()
}

// addDefaults adds Helm's default rule: hidden files under templates/.
func (r *ignoreRules) addDefaults() { _ = r.add(`templates/.?*`) }

func (r *ignoreRules) add(rule string) error {
	rule = strings.TrimSpace(rule)
	if rule == "" || strings.HasPrefix(rule, "#") {
		return nil
	}
	if strings.Contains(rule, "**") {
		return fmt.Errorf("rule %q: double-star (**) syntax is not supported", rule)
	}
	if _, err := path.Match(rule, "abc"); err != nil {
		return fmt.Errorf("rule %q: %w", rule, err)
	}
	p := ignorePattern{}
	if after, ok := strings.CutPrefix(rule, "!"); ok {
		p.negate = true
		rule = after
	}
	if after, ok := strings.CutSuffix(rule, "/"); ok {
		p.mustDir = true
		rule = after
	}
	if after, ok := strings.CutPrefix(rule, "/"); ok {
		p.full = true
		rule = after
	} else if strings.Contains(rule, "/") {
		p.full = true
	}
	p.rule = rule
	r.patterns = append(r.patterns, p)
	return nil
}

func (r *ignoreRules) ignore(name string, isDir bool) bool {
	if name == "" || name == "." || name == "./" {
		return false
	}
	for _, p := range r.patterns {
		subject := name
		if !p.full {
			subject = path.Base(name)
		}
		ok, _ := path.Match(p.rule, subject)
		if p.negate {
			if p.mustDir && !isDir {
				return true
			}
			if !ok {
				return true
			}
			continue
		}
		if p.mustDir && !isDir {
			continue
		}
		if ok {
			return true
		}
	}
	return false
}
