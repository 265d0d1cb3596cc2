package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/wait"
)

// schemaDir holds the JSON Schemas of the -o json documents (docs/schema).
const schemaDir = "../../docs/schema"

// compileSchema compiles docs/schema/<name>.schema.json (and the shared
// common.schema.json it refers to).
func compileSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	path, err := filepath.Abs(filepath.Join(schemaDir, name+".schema.json"))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	sch, err := c.Compile(path)
	require.NoError(t, err, "schema %s", name)
	return sch
}

// requireValid checks that doc is exactly one JSON document valid against
// the schema name.
func requireValid(t *testing.T, name, doc string) {
	t.Helper()
	require.NoError(t, validateDoc(t, compileSchema(t, name), doc), "document:\n%s", doc)
}

// validateDoc decodes one JSON document (numbers kept exact) and validates
// it against sch.
func validateDoc(t *testing.T, sch *jsonschema.Schema, doc string) error {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), "one JSON document:\n%s", doc)
	require.False(t, dec.More(), "exactly one JSON document:\n%s", doc)
	return sch.Validate(v)
}

// history and list on the fakes' record store.
func (f *releaseFakes) recordCommands() map[string]func(g *GlobalOptions) *cobra.Command {
	return map[string]func(g *GlobalOptions) *cobra.Command{
		"history": func(g *GlobalOptions) *cobra.Command {
			return historyCommand(&historyOptions{g: g, loc: time.UTC})
		},
		"list": func(g *GlobalOptions) *cobra.Command {
			return listCommand(&listOptions{g: g, loc: time.UTC})
		},
		"wait": newWaitCommand,
	}
}

// runAny runs args[0] among the release and record commands of the fakes.
func (f *releaseFakes) runAny(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	build, ok := f.commands()[args[0]]
	if !ok {
		build = f.recordCommands()[args[0]]
	}
	require.NotNil(t, build, "command %s", args[0])
	return runRecordCommand(t, f.factory(), build, args...)
}

// anyCode accepts any exit code of a step.
const anyCode = -1

// TestSchemaOutputs runs the commands with -o json on the fake cluster,
// one scenario after the other on the same release (deploy, an upgrade
// that fails and is rolled back, an explicit rollback, a wait, ...), and
// validates each document against its schema under docs/schema.
func TestSchemaOutputs(t *testing.T) {
	f := newReleaseFakes()
	failOnce := failFirst(wait.OutcomeFailed)
	steps := []struct {
		name     string
		args     []string
		script   func() // sets the waiter's script before the run
		schema   string
		wantCode int
		check    func(t *testing.T, doc map[string]any)
	}{
		{name: "deploy install", args: deployArgs("-o", "json"), schema: "result"},
		{name: "deploy upgrade", args: deployArgs("--set", "image.tag=v0.11.1", "-o", "json"), schema: "result",
			check: func(t *testing.T, doc map[string]any) {
				require.Contains(t, doc, "preflight")
			}},
		{name: "deploy dry run", args: deployArgs("--set", "image.tag=v0.12.0", "--dry-run", "-o", "json"), schema: "result",
			check: func(t *testing.T, doc map[string]any) {
				require.Equal(t, true, doc["dryRun"])
			}},
		{name: "deploy failed, rolled back", args: deployArgs("--set", "image.tag=crash", "-o", "json"), schema: "result", wantCode: ExitRolledBack,
			script: func() { f.waiter.Script = failOnce },
			check: func(t *testing.T, doc map[string]any) {
				require.Equal(t, "failed", doc["status"])
				require.Contains(t, doc, "failure")
				require.Contains(t, doc, "rolledBackTo")
			}},
		{name: "deploy failed, no rollback", args: deployArgs("--set", "image.tag=crash2", "--no-rollback", "-o", "json"), schema: "result", wantCode: ExitFailed,
			script: func() {
				f.waiter.Script = releasetest.FailKind("Deployment", wait.OutcomeFailed, "Progress deadline exceeded")
			},
			check: func(t *testing.T, doc map[string]any) {
				require.Equal(t, "failed", doc["status"])
				require.Contains(t, doc, "failure")
				require.NotContains(t, doc, "rolledBackTo")
			}},
		{name: "wait failed", args: []string{"wait", "chat", "-o", "json"}, schema: "result", wantCode: ExitFailed,
			check: func(t *testing.T, doc map[string]any) {
				require.Contains(t, doc, "failure")
			}},
		{name: "rollback", args: []string{"rollback", "chat", "-o", "json"}, schema: "result",
			script: func() { f.waiter.Script = nil },
			check: func(t *testing.T, doc map[string]any) {
				require.Equal(t, "deployed", doc["status"])
				require.Contains(t, doc, "rolledBackTo")
			}},
		{name: "wait healthy", args: []string{"wait", "chat", "-o", "json"}, schema: "result"},
		{name: "status", args: []string{"status", "chat", "-o", "json"}, schema: "status"},
		{name: "history", args: []string{"history", "chat", "-o", "json"}, schema: "history",
			check: func(t *testing.T, doc map[string]any) {
				require.NotEmpty(t, doc["rows"])
			}},
		{name: "list", args: []string{"list", "-o", "json"}, schema: "list"},
		{name: "list empty namespace", args: []string{"list", "-n", "empty", "-o", "json"}, schema: "list"},
		{name: "diff", args: append(append([]string{"diff", "chat"}, small...), "--set", "image.tag=v0.13.0", "-o", "json"), schema: "diff", wantCode: ExitChanges},
		// The fake cluster runs no pods: the canary's outcome may vary, its
		// report is what is checked.
		{name: "deploy canary", args: deployArgs("--set", "image.tag=v0.14.0", "--set", "replicaCount=2", "--canary", "1",
			"--canary-hold", "0s", "--canary-gate", "true", "-o", "json"), schema: "result", wantCode: anyCode,
			check: func(t *testing.T, doc map[string]any) {
				require.Contains(t, doc, "canary")
			}},
		{name: "history with a canary", args: []string{"history", "chat", "-o", "json"}, schema: "history"},
		{name: "uninstall keep history", args: []string{"uninstall", "chat", "--keep-history", "-o", "json"}, schema: "uninstall"},
		{name: "history after uninstall", args: []string{"history", "chat", "-o", "json"}, schema: "history"},
		{name: "deploy again", args: deployArgs("-o", "json"), schema: "result"},
		{name: "uninstall", args: []string{"uninstall", "chat", "-o", "json"}, schema: "uninstall",
			check: func(t *testing.T, doc map[string]any) {
				require.Contains(t, doc, "deletedRecords")
			}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.script != nil {
				s.script()
			}
			stdout, stderr, code := f.runAny(t, s.args...)
			if s.wantCode != anyCode {
				require.Equal(t, s.wantCode, code, "stderr: %s", stderr)
			}
			requireValid(t, s.schema, stdout)
			if s.check != nil {
				var doc any
				require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
				m, ok := doc.(map[string]any)
				if !ok {
					m = map[string]any{"rows": doc}
				}
				s.check(t, m)
			}
		})
	}
}

// TestSchemaRejects shows the schemas can fail: a real deploy document
// with an unknown field, a wrong type, a status outside the enum or a
// required field missing is rejected.
func TestSchemaRejects(t *testing.T) {
	f := newReleaseFakes()
	stdout, stderr, code := f.run(t, deployArgs("-o", "json")...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	result := compileSchema(t, "result")
	require.NoError(t, validateDoc(t, result, stdout), "the unchanged document is valid")

	history := compileSchema(t, "history")
	tests := []struct {
		name   string
		schema *jsonschema.Schema
		edit   func(doc map[string]any) any
	}{
		{"unknown field", result, func(d map[string]any) any { d["newField"] = "x"; return d }},
		{"unknown field in a ReplicaSet", result, func(d map[string]any) any {
			d["replicaSets"].([]any)[0].(map[string]any)["extra"] = 1
			return d
		}},
		{"revision as a string", result, func(d map[string]any) any { d["revision"] = "1"; return d }},
		{"status outside the enum", result, func(d map[string]any) any { d["status"] = "done"; return d }},
		{"required field missing", result, func(d map[string]any) any { delete(d, "release"); return d }},
		{"replicaSets null", result, func(d map[string]any) any { d["replicaSets"] = nil; return d }},
		{"failure without reason", result, func(d map[string]any) any { d["failure"] = map[string]any{"cause": "gpu-oom"}; return d }},
		{"history row with a bad status", history, func(d map[string]any) any {
			return []any{map[string]any{"revision": 1, "updated": "2026-03-01T10:00:00Z", "status": "exploded",
				"chart": "vllm-0.1.0", "appVersion": "v1", "description": "x", "replicaSets": []any{}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc map[string]any
			require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
			edited, err := json.Marshal(tt.edit(doc))
			require.NoError(t, err)
			require.Error(t, validateDoc(t, tt.schema, string(edited)), "document:\n%s", edited)
		})
	}
}
