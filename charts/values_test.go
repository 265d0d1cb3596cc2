package charts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
)

// valuesFlagCases are renders of the built-in chart with each of Helm 4's
// values flags vllmctl added to -f/--set/--set-string, alone and together
// (to check the order: files, --set-json, --set, --set-string, --set-file,
// --set-literal).
func valuesFlagCases(t *testing.T) []struct {
	name string
	opts RenderOptions
} {
	dir := t.TempDir()
	file := filepath.Join(dir, "model.txt")
	require.NoError(t, os.WriteFile(file, []byte("Qwen/from-a-file"), 0o644))
	args := filepath.Join(dir, "args.txt")
	require.NoError(t, os.WriteFile(args, []byte("--max-num-seqs=8\n"), 0o644))
	vf := filepath.Join(dir, "values.yaml")
	require.NoError(t, os.WriteFile(vf, []byte("model: {name: from-values-file}\nreplicaCount: 2\n"), 0o644))
	return []struct {
		name string
		opts RenderOptions
	}{
		{"set-json key", RenderOptions{SetJSON: []string{`extraArgs=["--enable-prefix-caching","--max-num-seqs=4"]`, `replicaCount=3`}}},
		{"set-json object", RenderOptions{SetJSON: []string{`{"env":[{"name":"A","value":"1,2"}],"model":{"maxModelLen":4096}}`}}},
		{"set-file", RenderOptions{SetFile: []string{"model.name=" + file, "podAnnotations.args=" + args}}},
		{"set-literal", RenderOptions{SetLiteral: []string{`model.name=a,b={c}\d`, `podAnnotations.x=[1]`}}},
		{"order", RenderOptions{
			ValueFiles: []string{vf},
			SetJSON:    []string{`model={"name":"json","maxModelLen":1024}`, `replicaCount=4`},
			Set:        []string{"model.name=set", "model.servedModelName=set"},
			SetString:  []string{"model.servedModelName=string", "podAnnotations.a=string"},
			SetFile:    []string{"podAnnotations.a=" + file, "podAnnotations.b=" + file},
			SetLiteral: []string{"podAnnotations.b=literal"},
		}},
	}
}

// TestValuesFlagsMatchHelmTemplate renders with --set-json, --set-file and
// --set-literal (alone and with the other values flags) with vllmctl and
// with the real `helm template`: the same objects.
func TestValuesFlagsMatchHelmTemplate(t *testing.T) {
	bin := helmBin(t)
	for _, tc := range valuesFlagCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.ReleaseName, opts.Namespace = "flags", "ml"
			ch, err := Load("vllm")
			require.NoError(t, err)
			ours, err := Render(ch, opts)
			require.NoError(t, err)

			stdout, stderr, err := runHelmTemplate(t, bin, "vllm", opts)
			require.NoError(t, err, "helm template: %s", stderr)
			theirs, err := parseObjects(map[string]string{"helm template output": stdout})
			require.NoError(t, err)
			want, got := comparable(t, theirs), comparable(t, withHooks(ours))
			require.Equal(t, keys(want), keys(got), "the same objects")
			for _, k := range keys(want) {
				assert.Equal(t, want[k], got[k], k)
			}
		})
	}
}

// TestUserValuesMatchHelmMergeValues compares UserValues with Helm 4's own
// values.Options.MergeValues on the same flags (no binary needed).
func TestUserValuesMatchHelmMergeValues(t *testing.T) {
	for _, tc := range valuesFlagCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			ours, err := UserValues(tc.opts)
			require.NoError(t, err)
			helmOpts := values.Options{ValueFiles: tc.opts.ValueFiles, Values: tc.opts.Set, StringValues: tc.opts.SetString,
				FileValues: tc.opts.SetFile, JSONValues: tc.opts.SetJSON, LiteralValues: tc.opts.SetLiteral}
			theirs, err := helmOpts.MergeValues(getter.Providers{})
			require.NoError(t, err)
			assert.Equal(t, theirs, ours)
		})
	}
}

// TestValuesFlagErrors: a bad entry of each flag is an *InputError (exit
// code 2) naming the flag and the argument, never quoting its value.
func TestValuesFlagErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-file")
	tests := []struct {
		name       string
		opts       RenderOptions
		wantSource string
		want       []string
		secret     string
	}{
		{"set-json bad JSON", RenderOptions{SetJSON: []string{`token=[s3cr3tvalue`}}, "--set-json", []string{"argument 1", "token"}, "s3cr3tvalue"},
		{"set-json bad object", RenderOptions{SetJSON: []string{`{"token": s3cr3tvalue}`}}, "--set-json", []string{"argument 1", "not a valid JSON object"}, "s3cr3tvalue"},
		{"set-json no value", RenderOptions{SetJSON: []string{`a=1`, `key`}}, "--set-json", []string{"argument 2", "key"}, ""},
		{"set-file missing", RenderOptions{SetFile: []string{"model.name=" + missing}}, "--set-file", []string{missing, "argument 1", "no such file"}, ""},
		{"set-file no path", RenderOptions{SetFile: []string{"key"}}, "--set-file", []string{"argument 1", "key"}, ""},
		{"set-literal no value", RenderOptions{SetLiteral: []string{"a.b.s3cr3tvalue"}}, "--set-literal", []string{"argument 1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := UserValues(tt.opts)
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tt.wantSource, ie.Source)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			if tt.secret != "" {
				assert.NotContains(t, err.Error(), tt.secret)
			}
			// Helm refuses it too.
			_, herr := (&values.Options{FileValues: tt.opts.SetFile, JSONValues: tt.opts.SetJSON, LiteralValues: tt.opts.SetLiteral}).MergeValues(getter.Providers{})
			assert.Error(t, herr, "helm accepts it")
		})
	}
}

// TestReuseValues follows Helm 4's (*Upgrade).reuseValues
// (helm.sh/helm/v4/pkg/action/upgrade.go): --reuse-values coalesces the
// new values over the previous user values and renders on the previous
// computed values (the old chart's defaults); --reset-then-reuse-values
// renders on the new chart's defaults; --reset-values ignores the
// previous values; a first install (no Previous) has none.
func TestReuseValues(t *testing.T) {
	ch, err := Load("vllm")
	require.NoError(t, err)
	old := *ch
	old.Values = copyValueMap(ch.Values)
	old.Values["image"].(map[string]any)["tag"] = "v0.10.0" // the old chart's default
	prevOpts := RenderOptions{ReleaseName: "r", Namespace: "ml", Set: []string{"replicaCount=3", "model.name=old/model"}}
	prevRender, err := Render(&old, prevOpts)
	require.NoError(t, err)
	prev := &PreviousValues{Revision: 1, User: prevRender.UserValues, Computed: prevRender.Values}

	render := func(opts RenderOptions) *Rendered {
		t.Helper()
		opts.ReleaseName, opts.Namespace, opts.IsUpgrade = "r", "ml", true
		opts.Set = append(opts.Set, "model.servedModelName=new")
		r, err := Render(ch, opts)
		require.NoError(t, err)
		return r
	}
	wantUser := map[string]any{"replicaCount": int64(3), "model": map[string]any{"name": "old/model", "servedModelName": "new"}}

	r := render(RenderOptions{ReuseValues: true, Previous: prev})
	assert.Equal(t, wantUser, r.UserValues)
	assert.Equal(t, "v0.10.0", r.Values["image"].(map[string]any)["tag"], "--reuse-values keeps the old chart's default")
	assert.Empty(t, r.Warnings)

	r = render(RenderOptions{ResetThenReuseValues: true, Previous: prev})
	assert.Equal(t, wantUser, r.UserValues)
	assert.Equal(t, "v0.11.0", r.Values["image"].(map[string]any)["tag"], "--reset-then-reuse-values takes the new default")

	r = render(RenderOptions{ReuseValues: true, ResetThenReuseValues: true, Previous: prev})
	assert.Equal(t, "v0.10.0", r.Values["image"].(map[string]any)["tag"], "--reuse-values wins")

	r = render(RenderOptions{ReuseValues: true, ResetValues: true, Previous: prev})
	assert.Equal(t, map[string]any{"model": map[string]any{"servedModelName": "new"}}, r.UserValues, "--reset-values wins")

	r = render(RenderOptions{ReuseValues: true})
	assert.Equal(t, map[string]any{"model": map[string]any{"servedModelName": "new"}}, r.UserValues, "nothing to reuse")

	// A record without computed values: the new defaults, with a warning.
	r = render(RenderOptions{ReuseValues: true, Previous: &PreviousValues{Revision: 1, User: prev.User}})
	assert.Equal(t, wantUser, r.UserValues)
	assert.Equal(t, "v0.11.0", r.Values["image"].(map[string]any)["tag"])
	require.Len(t, r.Warnings, 1)
	assert.True(t, strings.Contains(r.Warnings[0], "keeps no computed values"), r.Warnings[0])

	// The previous values are not changed by the render.
	assert.Equal(t, map[string]any{"replicaCount": int64(3), "model": map[string]any{"name": "old/model"}}, prev.User)
}

// TestValuesFileCaps: a values file or a --set-file file larger than
// MaxValuesFileBytes (an endless /dev/zero included) is an *InputError
// naming the flag, the file and the cap, read no further than the cap;
// a binary --set-file file is one naming the flag and the file.
func TestValuesFileCaps(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.txt")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("a", MaxValuesFileBytes+1)), 0o644))
	atCap := filepath.Join(dir, "at-cap.txt")
	require.NoError(t, os.WriteFile(atCap, []byte(strings.Repeat("a", MaxValuesFileBytes)), 0o644))
	binary := filepath.Join(dir, "model.bin")
	require.NoError(t, os.WriteFile(binary, []byte{0x7f, 'E', 'L', 'F', 0, 1, 2}, 0o644))
	latin1 := filepath.Join(dir, "latin1.txt")
	require.NoError(t, os.WriteFile(latin1, []byte("caf\xe9"), 0o644))
	cases := []struct {
		name string
		opts RenderOptions
		// says is in the error ("" for none).
		says string
	}{
		{name: "set-file /dev/zero", opts: RenderOptions{SetFile: []string{"a=/dev/zero"}}, says: "--set-file /dev/zero: argument 1: file too large: larger than the cap of 5 MiB"},
		{name: "set-file over the cap", opts: RenderOptions{SetFile: []string{"a=" + big}}, says: "--set-file " + big + ": argument 1: file too large"},
		{name: "set-file at the cap", opts: RenderOptions{SetFile: []string{"a=" + atCap}}},
		{name: "values file /dev/zero", opts: RenderOptions{ValueFiles: []string{"/dev/zero"}}, says: "values file /dev/zero: file too large: larger than the cap of 5 MiB"},
		{name: "set-file binary", opts: RenderOptions{SetFile: []string{"a=" + binary}}, says: "--set-file " + binary + ": argument 1: a binary file: control character U+007F at byte 0"},
		{name: "set-file not UTF-8", opts: RenderOptions{SetFile: []string{"a=" + latin1}}, says: "--set-file " + latin1 + ": argument 1: not UTF-8 text (byte 3)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := UserValues(tc.opts)
			if tc.says == "" {
				require.NoError(t, err)
				return
			}
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, 2, ie.ExitCode())
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}
