package fleet

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

const validFleet = `release: qwen
chart: vllm
version: 1.2.0
values: [common.yaml]
set: [image.tag=v1]
targets:
  - name: a
    context: local-a
    namespace: inference
    values: [a.yaml]
    set: [replicas=2]
  - name: b
    context: local-b
waves:
  - [a]
  - [b]
policy:
  maxParallel: 2
  soak: 30s
  gate: "true"
  onFailure: stop
`

func TestParseValid(t *testing.T) {
	f, err := Parse("/fleets/prod.yaml", []byte(validFleet))
	require.NoError(t, err)
	assert.Equal(t, "qwen", f.Release)
	assert.Equal(t, "vllm", f.Chart)
	assert.Equal(t, "1.2.0", f.Version)
	assert.Equal(t, []string{"/fleets/common.yaml"}, f.Values)
	assert.Equal(t, []string{"image.tag=v1"}, f.Set)
	require.Len(t, f.Targets, 2)
	assert.Equal(t, TargetSpec{Name: "a", Context: "local-a", Namespace: "inference",
		Values: []string{"/fleets/a.yaml"}, Set: []string{"replicas=2"}, Line: 7}, f.Targets[0])
	assert.Equal(t, [][]string{{"a"}, {"b"}}, f.Waves)
	assert.Equal(t, Policy{MaxParallel: 2, Soak: 30 * time.Second, Gate: "true", OnFailure: Stop}, f.Policy)
}

func TestParseDefaults(t *testing.T) {
	f, err := Parse("/f.yaml", []byte("release: r\ntargets: [{name: a, context: c}]\nwaves: [[a]]\n"))
	require.NoError(t, err)
	assert.Equal(t, RollbackFleet, f.Policy.OnFailure)
	assert.Zero(t, f.Policy.MaxParallel)
	assert.Zero(t, f.Policy.Soak)
}

func TestParseErrors(t *testing.T) {
	base := "release: r\ntargets:\n  - name: a\n    context: c\n  - name: b\n    context: d\n"
	tests := []struct {
		name string
		doc  string
		want []Problem
	}{
		{"unknown top-level key", base + "waves: [[a, b]]\nbogus: 1\n",
			[]Problem{{8, "bogus", "unknown key (want one of chart, policy, release, set, targets, values, version, waves)"}}},
		{"unknown target key", "release: r\ntargets:\n  - name: a\n    context: c\n    kontext: x\nwaves: [[a]]\n",
			[]Problem{{5, "targets[0].kontext", "unknown key (want one of context, name, namespace, set, values)"}}},
		{"unknown policy key", base + "waves: [[a, b]]\npolicy:\n  parallel: 2\n",
			[]Problem{{9, "policy.parallel", "unknown key (want one of gate, maxParallel, onFailure, soak)"}}},
		{"target in no wave", base + "waves: [[a]]\n",
			[]Problem{{5, "targets.b", "in no wave: every target belongs to exactly one wave"}}},
		{"target in two waves", base + "waves:\n  - [a, b]\n  - [b]\n",
			[]Problem{{9, "waves[1][0]", `"b": already in waves[0]`}}},
		{"unknown target in a wave", base + "waves:\n  - [a, b, c]\n",
			[]Problem{{8, "waves[0][2]", `"c": no such target`}}},
		{"duplicate target", "release: r\ntargets:\n  - {name: a, context: c}\n  - {name: a, context: d}\nwaves: [[a]]\n",
			[]Problem{{4, "targets[1].name", `"a": duplicate target name (first at line 3)`}}},
		{"same place twice", "release: r\ntargets:\n  - {name: a, context: c}\n  - {name: b, context: c}\nwaves: [[a, b]]\n",
			[]Problem{{4, "targets[1]", `context "c" namespace "": the same place as target "a"`}}},
		{"missing required", "chart: vllm\n",
			[]Problem{{1, "release", "required"}, {1, "targets", "required"}, {1, "waves", "required"}}},
		{"missing context", "release: r\ntargets:\n  - name: a\nwaves: [[a]]\n",
			[]Problem{{3, "targets[0].context", "required"}}},
		{"bad onFailure", base + "waves: [[a, b]]\npolicy: {onFailure: undo}\n",
			[]Problem{{8, "policy.onFailure", `"undo": want rollback-fleet, rollback-target or stop`}}},
		{"bad maxParallel", base + "waves: [[a, b]]\npolicy:\n  maxParallel: 0\n",
			[]Problem{{9, "policy.maxParallel", `want a whole number of 1 or more, got a scalar "0"`}}},
		{"bad soak", base + "waves: [[a, b]]\npolicy:\n  soak: forever\n",
			[]Problem{{9, "policy.soak", `"forever": want a duration such as 5m or 90s`}}},
		{"bad set", base + "waves: [[a, b]]\nset: [novalue]\n",
			[]Problem{{8, "set[0]", `"novalue": want key=value (Helm --set syntax)`}}},
		{"values not a list", base + "waves: [[a, b]]\nvalues: common.yaml\n",
			[]Problem{{8, "values", `want a list of strings, got a scalar "common.yaml"`}}},
		{"reserved target name", "release: r\ntargets: [{name: fleet, context: c}]\nwaves: [[fleet]]\n",
			[]Problem{{2, "targets[0].name", `"fleet": reserved: the fleet's own progress lines are prefixed [fleet]`}}},
		{"bad release name", "release: Bad_Name\ntargets: [{name: a, context: c}]\nwaves: [[a]]\n", nil},
		{"duplicate key", base + "waves: [[a, b]]\nrelease: s\n",
			[]Problem{{8, "release", "duplicate key"}}},
		{"empty wave", base + "waves:\n  - [a, b]\n  - []\n",
			[]Problem{{9, "waves[1]", "want a non-empty list of target names, got a list"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("/f.yaml", []byte(tt.doc))
			var fe *FileError
			require.True(t, errors.As(err, &fe), "error %v", err)
			assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
			if tt.want != nil {
				assert.Equal(t, tt.want, fe.Problems)
			} else {
				require.NotEmpty(t, fe.Problems)
				assert.Equal(t, 1, fe.Problems[0].Line)
			}
			assert.Contains(t, err.Error(), "/f.yaml:")
		})
	}
}

func TestParseNotYAML(t *testing.T) {
	_, err := Parse("/f.yaml", []byte("release: [\n"))
	assert.ErrorContains(t, err, "fleet file /f.yaml: not YAML")
	assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
}

func TestLoadRelativeValues(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fleet.yaml")
	require.NoError(t, os.WriteFile(path, []byte("release: r\nvalues: [v.yaml, /abs.yaml]\ntargets: [{name: a, context: c, values: [sub/a.yaml]}]\nwaves: [[a]]\n"), 0o600))
	f, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "v.yaml"), "/abs.yaml"}, f.Values)
	assert.Equal(t, []string{filepath.Join(dir, "sub/a.yaml")}, f.Targets[0].Values)
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
}

// TestLoadRefusesHugeFiles: a fleet file is read at most MaxFileBytes: a
// larger one, or an endless one such as /dev/zero, is refused at once
// (exit 2, naming the file and the cap) instead of being read whole; a
// directory is refused too.
func TestLoadRefusesHugeFiles(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.yaml")
	require.NoError(t, os.WriteFile(huge, append([]byte(validFleet+"# "), make([]byte, MaxFileBytes)...), 0o600))
	atCap := filepath.Join(dir, "at-cap.yaml")
	pad := make([]byte, MaxFileBytes-len(validFleet)-2)
	for i := range pad {
		pad[i] = 'x'
	}
	require.NoError(t, os.WriteFile(atCap, append([]byte(validFleet+"# "), pad...), 0o600))

	_, err := Load(atCap)
	require.NoError(t, err, "a file of exactly the cap is read")

	for _, tc := range []struct{ name, path, want string }{
		{"over the cap", huge, "larger than the cap of 1 MiB"},
		{"endless", "/dev/zero", "larger than the cap of 1 MiB"},
		{"a directory", dir, "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.path)
			require.Error(t, err)
			assert.ErrorContains(t, err, "fleet file "+tc.path+": ")
			assert.ErrorContains(t, err, tc.want)
			assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
		})
	}
}
