package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDiffRecordedSettingJSON: a change to a setting vllmctl reads back
// from the record (serveCheck) is a recorded change of what "values",
// which diff -o json reports as diff.schema.json describes it.
func TestDiffRecordedSettingJSON(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs("--set", "serveCheck.timeout=30s")...)
	require.Equal(t, ExitOK, code, stderr)
	stdout, stderr, code := f.run(t, append([]string{"diff", "chat"}, append(small, "--set", "serveCheck.timeout=45s", "-o", "json")...)...)
	assert.Equal(t, ExitChanges, code, stderr)
	requireValid(t, "diff", stdout)
	var rep struct {
		Recorded []map[string]any `json:"recorded"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	require.Len(t, rep.Recorded, 1, stdout)
	assert.Equal(t, "values", rep.Recorded[0]["what"])
	assert.Equal(t, "serveCheck", rep.Recorded[0]["name"])
}
