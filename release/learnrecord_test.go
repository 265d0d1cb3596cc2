package release_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// TestLearnRecord: the Secrets of a record's manifest and of its hooks are
// learnt; a manifest that does not parse is named in the error, and the
// others are learnt all the same.
func TestLearnRecord(t *testing.T) {
	secret := func(name, value string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + name + "\nstringData:\n  k: " + value + "\n"
	}
	rec := &storage.Release{Name: "chat", Revision: 3, Manifest: secret("main", "main-value-1"),
		Hooks: []storage.Hook{{Name: "h", Kind: "Secret", Manifest: secret("h", "hook-value-2")}}}
	red := diff.NewRedactor()
	require.NoError(t, release.LearnRecord(red, rec))
	assert.Equal(t, "a (redacted) b (redacted)", red.Line("a main-value-1 b hook-value-2"))

	rec.Manifest = "kind: [unclosed\n"
	red = diff.NewRedactor()
	err := release.LearnRecord(red, rec)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "release chat revision 3: its manifest, read for its Secrets")
	assert.Equal(t, "(redacted)", red.Line("hook-value-2"), "the hook's Secret is learnt all the same")

	assert.NoError(t, release.LearnRecord(nil, rec), "the nil Redactor learns nothing")
}
