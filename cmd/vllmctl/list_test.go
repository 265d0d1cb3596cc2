package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListCommand(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		golden     string // stdout golden file; "" expects no stdout
		wantCode   int
		wantStderr string
	}{
		{name: "table", args: []string{"list"}, golden: "list_table.golden"},
		{name: "alias", args: []string{"ls"}, golden: "list_table.golden"},
		{name: "all namespaces", args: []string{"list", "-A"}, golden: "list_all_table.golden"},
		{name: "json", args: []string{"list", "-A", "-o", "json"}, golden: "list_all_json.golden"},
		{name: "yaml", args: []string{"list", "--all-namespaces", "-o", "yaml"}, golden: "list_all_yaml.golden"},
		{name: "other namespace", args: []string{"list", "-n", "dev"}, golden: "list_dev_table.golden"},
		{name: "empty namespace", args: []string{"list", "-n", "empty"},
			wantStderr: "No releases found in namespace empty.\n"},
		{name: "empty namespace json", args: []string{"list", "-n", "empty", "-o", "json"}, golden: "list_empty_json.golden"},
		{name: "bad output", args: []string{"list", "-o", "wide"}, wantCode: 2,
			wantStderr: "Error: --output \"wide\": want table, json or yaml\n"},
		{name: "unexpected argument", args: []string{"list", "chat"}, wantCode: 2,
			wantStderr: "Error: unknown command \"chat\" for \"vllmctl list\"\n"},
	}
	for _, be := range recordBackends() {
		t.Run(be.name, func(t *testing.T) {
			open := be.open()
			seedRecords(t, open)
			build := func(g *GlobalOptions) *cobra.Command {
				return listCommand(&listOptions{g: g, loc: time.UTC})
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					stdout, stderr, code := runRecordCommand(t, storeFactory(open), build, tt.args...)
					assert.Equal(t, tt.wantCode, code, "stderr: %s", stderr)
					if tt.wantStderr != "" {
						assert.Equal(t, tt.wantStderr, stderr)
					} else {
						assert.Empty(t, stderr)
					}
					if tt.golden == "" {
						assert.Empty(t, stdout)
						return
					}
					assertGolden(t, tt.golden, stdout)
				})
			}
		})
	}
}

func TestListJSONIsOneDocument(t *testing.T) {
	open := recordBackends()[1].open()
	seedRecords(t, open)
	stdout, _, code := runRecordCommand(t, storeFactory(open), newListCommand, "list", "-A", "-o", "json")
	require.Equal(t, 0, code)
	var rows []map[string]any
	dec := json.NewDecoder(strings.NewReader(stdout))
	require.NoError(t, dec.Decode(&rows))
	assert.False(t, dec.More(), "exactly one JSON document")
	require.Len(t, rows, 3)
	assert.Equal(t, map[string]any{"name": "chat", "namespace": "dev", "revision": float64(1), "status": "deployed",
		"chart": "vllm-0.4.0-rc.1", "appVersion": "v0.12.0", "updated": "2026-03-02T11:11:10Z"}, rows[0])
}
