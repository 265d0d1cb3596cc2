package storage

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/vllmctl/vllmctl"

// moduleDeps returns the packages of the module that the package in dir
// imports, directly or not (its tests' imports left out).
func moduleDeps(t *testing.T, dir string) map[string]bool {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	deps := map[string]bool{}
	var walk func(dir string)
	walk = func(dir string) {
		pkg, err := build.ImportDir(dir, 0)
		require.NoError(t, err, dir)
		for _, imp := range pkg.Imports {
			if (imp != module && !strings.HasPrefix(imp, module+"/")) || deps[imp] {
				continue
			}
			deps[imp] = true
			walk(filepath.Join(root, strings.TrimPrefix(imp, module)))
		}
	}
	walk(dir)
	return deps
}

// TestImportsNoWatcher: the record's format does not live in the rollout
// watcher (docs/architecture.md): release/storage depends on package
// wait neither directly nor through another package; the failure and the
// serve check it records are internal/rollout's types.
func TestImportsNoWatcher(t *testing.T) {
	deps := moduleDeps(t, ".")
	assert.True(t, deps[module+"/internal/rollout"], "the record's types: %v", deps)
	assert.False(t, deps[module+"/wait"], "release/storage imports the watcher: %v", deps)
}

// TestNothingBelowReleaseImportsIt: the packages under release/ are the
// layers below the engine (docs/architecture.md): none imports package
// release, directly or not; release/releasetest, its test fakes, is the
// one package above it there.
func TestNothingBelowReleaseImportsIt(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	var dirs []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == root {
			return err
		}
		if d.Name() == "releasetest" || d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if _, err := build.ImportDir(path, 0); err == nil {
			dirs = append(dirs, path)
		}
		return nil
	}))
	rel := func(dir string) string { r, _ := filepath.Rel(root, dir); return "release/" + r }
	var names []string
	for _, dir := range dirs {
		names = append(names, rel(dir))
		assert.False(t, moduleDeps(t, dir)[module+"/release"], "%s imports package release", rel(dir))
	}
	assert.Subset(t, names, []string{"release/canary", "release/servecheck", "release/groups", "release/analysis", "release/cluster", "release/storage"})
}
