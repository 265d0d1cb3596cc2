package charts

import (
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
	"helm.sh/helm/v4/pkg/ignore"
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
// names relative to dir, honouring dir/.helmignore (and Helm's default
// rules) with Helm's own pkg/ignore, as Helm's DirLoader does.
func readChartFS(fsys fs.FS, dir string) ([]*archive.BufferedFile, error) {
	rules := ignore.Empty()
	if data, err := fs.ReadFile(fsys, path.Join(dir, ignore.HelmIgnore)); err == nil {
		r, err := ignore.Parse(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ignore.HelmIgnore, err)
		}
		rules = r
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	rules.AddDefaults()

	var files []*archive.BufferedFile
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if rel == "" {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if rules.Ignore(rel, fi) {
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
