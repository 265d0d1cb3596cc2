package storage

import (
	"go/build"
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
