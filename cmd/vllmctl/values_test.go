package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/release/storage"
)

// builtinChartDir is the source directory of the built-in vllm chart.
const builtinChartDir = "../../charts/vllm"

// TestTemplateValuesFlagsMatchHelm runs `vllmctl template` and `helm
// template` with each of --set-json, --set-file and --set-literal, and all
// of the values flags together: the same objects.
func TestTemplateValuesFlagsMatchHelm(t *testing.T) {
	bin := os.Getenv("HELM_BIN")
	if bin == "" {
		t.Skip("HELM_BIN is not set: run with HELM_BIN=$(hack/install-helm.sh)")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "name.txt")
	require.NoError(t, os.WriteFile(file, []byte("org/from-file\n"), 0o644))
	vf := filepath.Join(dir, "v.yaml")
	require.NoError(t, os.WriteFile(vf, []byte("replicaCount: 2\nmodel: {name: from-values}\n"), 0o644))
	cases := map[string][]string{
		"--set-json":    {"--set-json", `extraArgs=["--a","--b=1,2"]`, "--set-json", `{"model":{"maxModelLen":2048}}`},
		"--set-file":    {"--set-file", "model.name=" + file},
		"--set-literal": {"--set-literal", `model.servedModelName=x,y={z}\w`},
		"all, in Helm's order": {"-f", vf, "--set-json", `replicaCount=5`, "--set", "model.name=set,replicaCount=3",
			"--set-string", "podAnnotations.a=s", "--set-file", "podAnnotations.a=" + file, "--set-literal", "model.name=lit"},
	}
	home := t.TempDir()
	for name, flags := range cases {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"template", "flags", builtinChartDir, "-n", "ml"}, flags...)
			ours, stderr, code := runTemplateCLI(t, args...)
			require.Equal(t, ExitOK, code, stderr)
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home,
				"KUBECONFIG="+filepath.Join(home, "kubeconfig"))
			theirs, err := cmd.Output()
			require.NoError(t, err, "helm %s", strings.Join(args, " "))
			assert.Equal(t, decodeStream(t, string(theirs)), decodeStream(t, ours))
		})
	}
}

// TestValuesFlagsRefused: a bad entry of each new flag is exit 2, naming
// the flag and the entry (its position, keys or file), never its value.
func TestValuesFlagsRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.txt")
	tests := []struct {
		name   string
		flags  []string
		want   []string
		secret string
	}{
		{"--set-json", []string{"--set-json", "a=1", "--set-json", `hfToken={"s3cr3t-token`}, []string{"--set-json", "argument 2", "hfToken"}, "s3cr3t-token"},
		{"--set-json object", []string{"--set-json", `{"hfToken": s3cr3t-token}`}, []string{"--set-json", "argument 1", "not a valid JSON object"}, "s3cr3t-token"},
		{"--set-file missing", []string{"--set-file", "model.name=" + missing}, []string{"--set-file", missing, "no such file"}, ""},
		{"--set-literal", []string{"--set-literal", "model.name"}, []string{"--set-literal", "argument 1", "model.name"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, cmd := range []string{"template", "lint"} {
				args := []string{cmd}
				if cmd == "template" {
					args = append(args, "r")
				}
				_, stderr, code := runTemplateCLI(t, append(args, tt.flags...)...)
				assert.Equal(t, ExitInvalid, code, stderr)
				for _, w := range tt.want {
					assert.Contains(t, stderr, w)
				}
				if tt.secret != "" {
					assert.NotContains(t, stderr, tt.secret)
				}
			}
		})
	}
}

// recordOf returns the record of revision rev of release chat in ml.
func recordOf(t *testing.T, f *releaseFakes, rev int) *storage.Release {
	t.Helper()
	r, err := f.store.InNamespace("ml").Get(context.Background(), "chat", rev)
	require.NoError(t, err)
	return r
}

// chartCopy copies the built-in chart's directory to a temporary one, with
// image.tag's default set to tag.
func chartCopy(t *testing.T, dir, tag string) {
	t.Helper()
	require.NoError(t, os.CopyFS(dir, os.DirFS(builtinChartDir)))
	setDefaultTag(t, dir, tag)
}

func setDefaultTag(t *testing.T, dir, tag string) {
	t.Helper()
	path := filepath.Join(dir, "values.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var re = "  tag: "
	lines := strings.Split(string(data), "\n")
	found := false
	for i, l := range lines {
		if strings.HasPrefix(l, re) && !found {
			lines[i], found = re+tag, true
		}
	}
	require.True(t, found)
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644))
}

// TestDeployReuseValues checks --reuse-values, --reset-then-reuse-values
// and --reset-values through the fake release engine against Helm 4's
// semantics (helm.sh/helm/v4/pkg/action/upgrade.go, (*Upgrade).reuseValues):
//
//   - --reuse-values: the new values coalesced over the current revision's
//     user-supplied values, on the current revision's computed values
//     (Helm: chart.Values = CoalesceValues(current.Chart, current.Config)),
//     so a default the new chart changed is not taken;
//   - --reset-then-reuse-values: the same user values, on the new chart's
//     defaults;
//   - --reset-values wins over both; on a first install they do nothing.
//
// The record keeps the resulting user-supplied values (Helm's
// release.Config), and diff shows what deploy would do.
func TestDeployReuseValues(t *testing.T) {
	f := newReleaseFakes()
	dir := filepath.Join(t.TempDir(), "vllm")
	chartCopy(t, dir, "v0.11.0")
	deploy := func(extra ...string) {
		t.Helper()
		_, stderr, code := f.run(t, append([]string{"deploy", "chat", dir}, extra...)...)
		require.Equal(t, 0, code, "stderr: %s", stderr)
	}
	base := map[string]any{"resources": map[string]any{"gpu": float64(0)}, "shm": map[string]any{"enabled": false}}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	asJSON := func(v any) any {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		var out any
		require.NoError(t, json.Unmarshal(b, &out))
		return out
	}

	// First install: --reuse-values has nothing to reuse.
	deploy(append(small, "--set", "replicaCount=2", "--reuse-values")...)
	assert.Equal(t, with(map[string]any{"replicaCount": float64(2)}), asJSON(recordOf(t, f, 1).Values))

	// --reuse-values --set model.maxModelLen=1024: {a:1} + {b:2}.
	deploy("--reuse-values", "--set", "model.maxModelLen=1024")
	r2 := recordOf(t, f, 2)
	want := with(map[string]any{"replicaCount": float64(2), "model": map[string]any{"maxModelLen": float64(1024)}})
	assert.Equal(t, want, asJSON(r2.Values))
	assert.Contains(t, r2.Manifest, "replicas: 2")
	assert.Contains(t, r2.Manifest, "--max-model-len")

	// The chart's default changes: --reuse-values keeps the old one,
	// and diff shows that deploy would change nothing.
	setDefaultTag(t, dir, "v0.12.0")
	// (The fake cluster's live objects lack the zero fields the chart
	// renders, so every diff shows those.)
	stdout, stderr, code := f.run(t, "diff", "chat", dir, "--reuse-values")
	require.Equal(t, ExitChanges, code, stderr)
	assert.NotContains(t, stdout, "v0.12.0", "diff --reuse-values: the old default stays")
	assert.NotContains(t, stdout, "replicas: 1")
	stdout, stderr, code = f.run(t, "diff", "chat", dir, "--reset-then-reuse-values")
	require.Equal(t, ExitChanges, code, stderr)
	assert.Contains(t, stdout, "+        image: vllm/vllm-openai:v0.12.0", "diff --reset-then-reuse-values: the new default")
	assert.NotContains(t, stdout, "replicas: 1")

	deploy("--reuse-values", "--set", "model.maxModelLen=2048")
	r3 := recordOf(t, f, 3)
	want = with(map[string]any{"replicaCount": float64(2), "model": map[string]any{"maxModelLen": float64(2048)}})
	assert.Equal(t, want, asJSON(r3.Values))
	assert.Contains(t, r3.Manifest, "vllm/vllm-openai:v0.11.0", "the old chart's default")
	assert.Equal(t, "v0.11.0", r3.ComputedValues["image"].(map[string]any)["tag"])

	// --reset-then-reuse-values: the new default, the user values kept.
	deploy("--reset-then-reuse-values")
	r4 := recordOf(t, f, 4)
	assert.Equal(t, want, asJSON(r4.Values))
	assert.Contains(t, r4.Manifest, "vllm/vllm-openai:v0.12.0", "the new chart's default")
	assert.Contains(t, r4.Manifest, "replicas: 2")

	// --reset-values wins: only what is given now.
	deploy(append(small, "--reset-values", "--reuse-values")...)
	r5 := recordOf(t, f, 5)
	assert.Equal(t, base, asJSON(r5.Values))
	assert.Contains(t, r5.Manifest, "replicas: 1")
}

// TestGetCommand prints the values, manifest and notes of a revision.
func TestGetCommand(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs("--set", "model.maxModelLen=4096")...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	_, stderr, code = f.run(t, deployArgs("--set", "image.tag=v0.11.1")...)
	require.Equal(t, 0, code, "stderr: %s", stderr)

	stdout, stderr, code := f.run(t, "get", "values", "chat")
	require.Equal(t, 0, code, stderr)
	assertGolden(t, "get_values.golden", stdout)

	stdout, _, code = f.run(t, "get", "values", "chat", "--revision", "1", "-o", "json")
	require.Equal(t, 0, code)
	assertGolden(t, "get_values_rev1_json.golden", stdout)

	stdout, _, code = f.run(t, "get", "values", "chat", "--all")
	require.Equal(t, 0, code)
	var all map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(stdout), &all))
	assert.Equal(t, "v0.11.1", all["image"].(map[string]any)["tag"])
	assert.Equal(t, "vllm/vllm-openai", all["image"].(map[string]any)["repository"], "the chart's defaults")

	stdout, _, code = f.run(t, "get", "manifest", "chat", "--revision", "1")
	require.Equal(t, 0, code)
	assert.Equal(t, recordOf(t, f, 1).Manifest, stdout, "exactly as recorded")

	stdout, _, code = f.run(t, "get", "notes", "chat")
	require.Equal(t, 0, code)
	assertGolden(t, "get_notes.golden", stdout)

	// A rollback (to revision 1) copies its target's computed values and
	// notes.
	_, stderr, code = f.run(t, "rollback", "chat")
	require.Equal(t, 0, code, stderr)
	stdout, _, code = f.run(t, "get", "values", "chat", "--all", "-o", "json")
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, `"tag": "v0.11.0"`)
	stdout, _, code = f.run(t, "get", "notes", "chat")
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, "vllm/vllm-openai:v0.11.0")

	stdout, _, code = f.run(t, "get", "hooks", "chat")
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, "---\n# Source: vllm/templates/tests/test-openai.yaml\n")
	assert.Contains(t, stdout, "helm.sh/hook: test")
	assert.Equal(t, recordOf(t, f, 1).Hooks[0].Manifest, strings.SplitN(stdout, "test-openai.yaml\n", 2)[1], "as recorded")

	// Secrets' values are withheld from get manifest and get hooks.
	sec := &storage.Release{Name: "sec", Revision: 1, Status: storage.StatusDeployed,
		Manifest: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  token: c2VjcmV0LXZhbHVl\nstringData:\n  pw: hunter2-x\n---\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: visible\n",
		Hooks: []storage.Hook{{Name: "hs", Kind: "Secret", Path: "t/templates/h.yaml", Events: []charts.HookEvent{charts.HookPreInstall},
			Manifest: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: hs\nstringData:\n  key: hook-secret-1\n"}}}
	require.NoError(t, f.store.InNamespace("ml").Create(context.Background(), sec))
	stdout, _, code = f.run(t, "get", "manifest", "sec")
	require.Equal(t, 0, code)
	assert.NotContains(t, stdout, "c2VjcmV0LXZhbHVl")
	assert.NotContains(t, stdout, "hunter2-x")
	assert.Contains(t, stdout, "token: (redacted)")
	assert.Contains(t, stdout, "k: visible")
	// A manifest in another form (JSON, as another tool may have written
	// it) is read, not searched for "kind: Secret".
	jsonSec := &storage.Release{Name: "sec-json", Revision: 1, Status: storage.StatusDeployed,
		Manifest: `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"pw": "json-secret-7"}}` + "\n"}
	require.NoError(t, f.store.InNamespace("ml").Create(context.Background(), jsonSec))
	stdout, _, code = f.run(t, "get", "manifest", "sec-json")
	require.Equal(t, 0, code)
	assert.NotContains(t, stdout, "json-secret-7")
	assert.Contains(t, stdout, "pw: (redacted)")

	stdout, _, code = f.run(t, "get", "hooks", "sec")
	require.Equal(t, 0, code)
	assert.NotContains(t, stdout, "hook-secret-1")
	assert.Contains(t, stdout, "key: (redacted)")

	// A value a template put into a Secret is Secret data: get values
	// (user-supplied and --all, YAML and JSON) and get notes withhold it,
	// in the manifest's Secret or in a hook's.
	leaky := &storage.Release{Name: "leaky", Revision: 1, Status: storage.StatusDeployed,
		Values:         map[string]any{"auth": map[string]any{"token": "hf_SuperSecret42"}, "list": []any{"x-hook-secret-9"}, "replicas": 2, "pin": int64(73519246)},
		ComputedValues: map[string]any{"auth": map[string]any{"token": "hf_SuperSecret42"}, "image": "vllm/vllm-openai"},
		Manifest:       "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  token: hf_SuperSecret42\n  pin: \"73519246\"\n",
		Hooks: []storage.Hook{{Name: "hs", Kind: "Secret", Path: "t/templates/h.yaml", Events: []charts.HookEvent{charts.HookPreInstall},
			Manifest: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: hs\ndata:\n  key: eC1ob29rLXNlY3JldC05\n"}},
		Notes: "Your token is hf_SuperSecret42.\nServing on port 8000.\n"}
	require.NoError(t, f.store.InNamespace("ml").Create(context.Background(), leaky))
	for _, args := range [][]string{{}, {"-o", "json"}, {"--all"}, {"--all", "-o", "json"}} {
		stdout, stderr, code = f.run(t, append([]string{"get", "values", "leaky"}, args...)...)
		require.Equal(t, 0, code, stderr)
		assert.NotContains(t, stdout, "SuperSecret42", args)
		assert.NotContains(t, stdout, "hook-secret", args)
		assert.NotContains(t, stdout, "73519246", args)
		assert.Contains(t, stdout, "(redacted)", args)
	}
	stdout, _, _ = f.run(t, "get", "values", "leaky")
	assert.Contains(t, stdout, "replicas: 2", "other values as recorded")
	stdout, _, code = f.run(t, "get", "notes", "leaky")
	require.Equal(t, 0, code)
	assert.Equal(t, "Your token is (redacted).\nServing on port 8000.\n", stdout)

	// A record whose manifest cannot be read cannot tell its Secrets
	// apart: nothing is printed.
	broken := &storage.Release{Name: "broken", Revision: 1, Status: storage.StatusDeployed,
		Values: map[string]any{"token": "maybe-secret-1"}, Manifest: "kind: [unclosed\n", Notes: "maybe-secret-1\n"}
	require.NoError(t, f.store.InNamespace("ml").Create(context.Background(), broken))
	for _, part := range []string{"values", "manifest", "notes"} {
		stdout, stderr, code = f.run(t, "get", part, "broken")
		assert.Equal(t, 1, code, part)
		assert.Empty(t, stdout, part)
		assert.Contains(t, stderr, "release broken revision 1", part)
		assert.NotContains(t, stderr, "maybe-secret-1", part)
	}

	// A record written before vllmctl kept computed values and notes.
	old := &storage.Release{Name: "old", Revision: 1, Status: storage.StatusDeployed, Values: map[string]any{"a": 1}, Manifest: "---\n"}
	require.NoError(t, f.store.InNamespace("ml").Create(context.Background(), old))
	stdout, stderr, code = f.run(t, "get", "values", "old", "--all")
	assert.Equal(t, ExitInvalid, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "keeps no computed values")
	stdout, stderr, code = f.run(t, "get", "notes", "old")
	assert.Equal(t, 0, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "revision 1 has no notes")

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "values", "chat", "--revision", "0"}, "--revision 0"},
		{[]string{"get", "manifest", "chat", "--revision", "-1"}, "--revision -1"},
		{[]string{"get", "notes", "chat", "--revision", "two"}, `"two"`},
		{[]string{"get", "values", "chat", "--revision", "9"}, "revision 9 of release chat not found; revisions: 1, 2, 3"},
		{[]string{"get", "manifest", "nope"}, "release nope not found in namespace ml"},
		{[]string{"get", "values", "chat", "-o", "table"}, ""},
		{[]string{"get", "values", "chat", "-o", "xml"}, `--output "xml"`},
		{[]string{"get"}, "a subcommand is required: values, manifest, hooks, notes"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, stderr, code := f.run(t, tt.args...)
			if tt.want == "" {
				assert.Equal(t, 0, code, stderr)
				return
			}
			assert.Equal(t, ExitInvalid, code, stderr)
			assert.Contains(t, stderr, tt.want)
		})
	}
}
