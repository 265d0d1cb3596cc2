package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release"
)

// TestModelConfigFlagRefusesUnusableFiles: a --model-config that is no
// readable config.json (missing, a directory, a device, too large, binary,
// not a decoder's) is exit 2 naming the flag before anything runs, for
// deploy and diff alike.
func TestModelConfigFlagRefusesUnusableFiles(t *testing.T) {
	const chart = "../../charts/testdata/charts/handwritten"
	dir := t.TempDir()
	binary := filepath.Join(dir, "binary.json")
	require.NoError(t, os.WriteFile(binary, []byte{0x7f, 'E', 'L', 'F', 0, 1, 2, 0x1b, '['}, 0o600))
	huge := filepath.Join(dir, "huge.json")
	require.NoError(t, os.WriteFile(huge, make([]byte, 2<<20), 0o600))
	notModel := filepath.Join(dir, "tokenizer.json")
	require.NoError(t, os.WriteFile(notModel, []byte(`{"version": "1.0"}`), 0o600))
	for name, file := range map[string]string{
		"missing":     filepath.Join(dir, "nope.json"),
		"directory":   dir,
		"device":      "/dev/zero",
		"too large":   huge,
		"binary":      binary,
		"not a model": notModel,
	} {
		for _, op := range []string{"deploy", "diff"} {
			t.Run(op+" "+name, func(t *testing.T) {
				_, stderr, code := runTemplateCLI(t, op, "chat", chart, "--model-config", file)
				require.Equal(t, ExitInvalid, code, stderr)
				assert.Contains(t, stderr, "--model-config "+file)
			})
		}
	}
}

// TestDiffProgressSanitizes: diff's stderr warnings (the render's, the
// model-fit preflight's, which quote the chart's --model) carry no
// terminal escape sequences; the fit and skip notes are not printed.
func TestDiffProgressSanitizes(t *testing.T) {
	var b strings.Builder
	p := diffProgress(&b)
	p(release.ProgressEvent{Phase: release.PhasePreflight, Status: "warning", Message: "model fit of Deployment/ns/x (container vllm, evil\x1b]0;owned\x07): tight"})
	p(release.ProgressEvent{Phase: release.PhasePreflight, Status: release.StatusModelFit, Message: "fits"})
	assert.NotContains(t, b.String(), "\x1b")
	assert.NotContains(t, b.String(), "\x07")
	assert.Contains(t, b.String(), "warning: model fit of Deployment/ns/x")
	assert.NotContains(t, b.String(), "fits")
}
