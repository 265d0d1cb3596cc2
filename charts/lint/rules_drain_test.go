package lint

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/charts"
)

// graceField is the good Deployment's terminationGracePeriodSeconds.
const graceField = "spec.template.spec.terminationGracePeriodSeconds"

// setPreStop sets container i's preStop hook.
func setPreStop(u *unstructured.Unstructured, i int, hook map[string]any) {
	ctr(u, i)["lifecycle"] = map[string]any{"preStop": hook}
}

func execHook(cmd ...any) map[string]any {
	return map[string]any{"exec": map[string]any{"command": cmd}}
}

func setGrace(u *unstructured.Unstructured, seconds int64) {
	podSpec(u)["terminationGracePeriodSeconds"] = seconds
}

// chartDrainHook is the built-in chart's drain hook as rendered (its
// program shortened: VL017 reads only its first line and arguments).
func chartDrainHook(delay, seconds string) map[string]any {
	return execHook("python3", "-c", drainHookMarker+": HOST DELAY SECONDS\nimport sys\n", "127.0.0.1", delay, seconds)
}

// drainRuleTests are the TestRules cases of VL017.
func drainRuleTests() []ruleTest {
	return []ruleTest{
		{name: "VL017 quiet without a hook or --shutdown-timeout", rule: "VL017"},
		{name: "VL017 fires on a 60s sleep action with the default 30s grace", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, map[string]any{"sleep": map[string]any{"seconds": int64(60)}})
			},
			want: []string{graceField}},
		{name: "VL017 quiet on a 30s sleep action with the default 30s grace", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, map[string]any{"sleep": map[string]any{"seconds": int64(30)}})
			}},
		{name: "VL017 fires on a sleep action plus --shutdown-timeout beyond the grace", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, map[string]any{"sleep": map[string]any{"seconds": int64(15)}})
				setArgs(u, "--model", "Qwen/Qwen3-0.6B", "--shutdown-timeout", "45")
				setGrace(u, 59)
			},
			want: []string{graceField}},
		{name: "VL017 quiet on a sleep action plus --shutdown-timeout exactly the grace", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, map[string]any{"sleep": map[string]any{"seconds": int64(15)}})
				setArgs(u, "--model", "Qwen/Qwen3-0.6B", "--shutdown-timeout=45")
				setGrace(u, 60)
			},
		},
		{name: "VL017 fires on --shutdown-timeout alone beyond the default grace", rule: "VL017",
			edit: func(u *unstructured.Unstructured) { setArgs(u, "--shutdown-timeout", "120") },
			want: []string{graceField}},
		{name: "VL017 ignores --shutdown-timeout of a container that is not vLLM", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				ctr(u, 0)["image"] = "ghcr.io/example/gateway:1.0"
				setArgs(u, "--shutdown-timeout", "120")
			}},
		{name: "VL017 fires on an exec of /bin/sleep 90", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, execHook("/bin/sleep", "90"))
				setGrace(u, 60)
			},
			want: []string{graceField}},
		{name: "VL017 fires on sleep 2m (a coreutils suffix)", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, execHook("sleep", "2m"))
				setGrace(u, 119)
			},
			want: []string{graceField}},
		{name: "VL017 fires on sh -c 'sleep 45 && kill -TERM 1'", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, execHook("/bin/sh", "-c", "sleep 45 && kill -TERM 1"))
			},
			want: []string{graceField}},
		{name: "VL017 quiet on a shell script it cannot time", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, execHook("/bin/sh", "-c", "curl -s localhost:8000/drain; sleep 600"))
			}},
		{name: "VL017 quiet on sleep infinity (no bound to check)", rule: "VL017",
			edit: func(u *unstructured.Unstructured) { setPreStop(u, 0, execHook("sleep", "infinity")) }},
		{name: "VL017 quiet on an HTTP hook", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, map[string]any{"httpGet": map[string]any{"path": "/drain", "port": int64(8000)}})
			}},
		{name: "VL017 fires on the chart's drain hook (10 + 120) with a 60s grace", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, chartDrainHook("10", "120"))
				setGrace(u, 60)
			},
			want: []string{graceField}},
		{name: "VL017 quiet on the chart's drain hook (10 + 120) with a 130s grace", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, chartDrainHook("10", "120"))
				setGrace(u, 130)
			}},
		{name: "VL017 fires on the chart's drain hook plus --shutdown-timeout", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, chartDrainHook("10", "120"))
				setArgs(u, "--model", "Qwen/Qwen3-0.6B", "--shutdown-timeout", "30")
				setGrace(u, 130)
			},
			want: []string{graceField}},
		{name: "VL017 fires on a sidecar's hook too, naming its container", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				addSidecar(u, map[string]any{"name": "proxy", "image": "nginx:1.27",
					"lifecycle": map[string]any{"preStop": execHook("sleep", "40")}})
			},
			want: []string{graceField}},
		{name: "VL017 fires on a grace period of 0 with any hook", rule: "VL017",
			edit: func(u *unstructured.Unstructured) {
				setPreStop(u, 0, map[string]any{"sleep": map[string]any{"seconds": int64(1)}})
				setGrace(u, 0)
			},
			want: []string{graceField}},
		{name: "VL017 fires on the leader template of a LeaderWorkerSet", rule: "VL017",
			yaml: `
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: good, namespace: inference}
spec:
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        terminationGracePeriodSeconds: 20
        containers:
          - name: server
            image: vllm/vllm-openai:v0.18.0
            args: [--shutdown-timeout, "30"]
            lifecycle: {preStop: {sleep: {seconds: 10}}}
    workerTemplate:
      spec:
        terminationGracePeriodSeconds: 20
        containers:
          - name: server
            image: vllm/vllm-openai:v0.18.0
            args: [--headless]
`,
			want: []string{"spec.leaderWorkerTemplate.leaderTemplate.spec.terminationGracePeriodSeconds"}},
		{name: "VL017 fires on a bare Pod", rule: "VL017",
			yaml: `
apiVersion: v1
kind: Pod
metadata: {name: good, namespace: inference}
spec:
  terminationGracePeriodSeconds: 5
  containers:
    - name: server
      image: vllm/vllm-openai:v0.11.0
      lifecycle: {preStop: {exec: {command: [sh, -c, "sleep 10s; echo done"]}}}
`,
			want: []string{"spec.terminationGracePeriodSeconds"}},
	}
}

func TestPreStopSeconds(t *testing.T) {
	tests := []struct {
		name string
		hook map[string]any
		want int64
		ok   bool
	}{
		{"sleep action", map[string]any{"sleep": map[string]any{"seconds": int64(15)}}, 15, true},
		{"sleep action as a float (JSON)", map[string]any{"sleep": map[string]any{"seconds": 15.0}}, 15, true},
		{"sleep action without seconds", map[string]any{"sleep": map[string]any{}}, 0, false},
		{"exec sleep", execHook("sleep", "20"), 20, true},
		{"exec /usr/bin/sleep 1.5 rounds up", execHook("/usr/bin/sleep", "1.5"), 2, true},
		{"exec sleep 1h", execHook("sleep", "1h"), 3600, true},
		{"exec sleep of two arguments", execHook("sleep", "1", "2"), 0, false},
		{"exec sleep infinity", execHook("sleep", "infinity"), 0, false},
		{"exec sleep -5", execHook("sleep", "-5"), 0, false},
		{"sh -c sleep", execHook("sh", "-c", "sleep 25"), 25, true},
		{"bash -c exec sleep then more", execHook("/bin/bash", "-c", "  exec sleep 5m\n"), 300, true},
		{"sh -c sleep; more", execHook("/bin/sh", "-c", "sleep 7; nginx -s quit"), 7, true},
		{"sh -c sleepy (another program)", execHook("sh", "-c", "sleepy 7"), 0, false},
		{"sh -c not starting with sleep", execHook("sh", "-c", "echo; sleep 7"), 0, false},
		{"the chart's drain hook", chartDrainHook("10", "120"), 130, true},
		{"the chart's drain hook, arguments not numbers", chartDrainHook("10", "$(X)"), 0, false},
		{"another python program", execHook("python3", "-c", "import time; time.sleep(5)", "a", "1", "2"), 0, false},
		{"an HTTP hook", map[string]any{"httpGet": map[string]any{"path": "/"}}, 0, false},
		{"an empty exec", execHook(), 0, false},
		// Edited hooks and extreme numbers: capped, never overflowing, never negative.
		{"the chart's drain hook, huge arguments (capped, no overflow)", chartDrainHook("9223372036854775807", "99999999999999999999"), 2 * maxSeconds, true},
		{"the chart's drain hook, a negative delay", chartDrainHook("-10", "120"), 0, false},
		{"the chart's drain hook, a float", chartDrainHook("1.5", "120"), 0, false},
		{"sleep action of a huge float (capped)", map[string]any{"sleep": map[string]any{"seconds": 1e30}}, maxSeconds, true},
		{"sleep action negative", map[string]any{"sleep": map[string]any{"seconds": int64(-5)}}, 0, false},
		{"sleep action of MaxInt64 (capped)", map[string]any{"sleep": map[string]any{"seconds": int64(math.MaxInt64)}}, maxSeconds, true},
		{"exec sleep 1e9", execHook("sleep", "1e9"), 1e9, true},
		{"exec sleep 1e18 (capped)", execHook("sleep", "1e18"), maxSeconds, true},
		{"exec sleep 1e400 (out of range)", execHook("sleep", "1e400"), 0, false},
		{"exec sleep 1m30s (not one number)", execHook("sleep", "1m30s"), 0, false},
		{"exec sleep inf", execHook("sleep", "inf"), 0, false},
		{"exec sleep NaN", execHook("sleep", "NaN"), 0, false},
		{"sh -c sleep 1m30s (not recognised)", execHook("sh", "-c", "sleep 1m30s"), 0, false},
		{"sh -c sleep 99999999999d (capped)", execHook("sh", "-c", "sleep 99999999999d"), maxSeconds, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := container{raw: map[string]any{"lifecycle": map[string]any{"preStop": tt.hook}}}
			got, what, ok := preStopSeconds(c)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
			if ok {
				assert.NotEmpty(t, what)
			}
		})
	}
	_, _, ok := preStopSeconds(container{raw: map[string]any{}})
	assert.False(t, ok, "no lifecycle")
}

// TestDrainGraceExtremes: huge hooks, grace periods and --shutdown-timeout
// values neither overflow into a negative need (a silenced finding) nor
// panic; a negative grace period is read as 0.
func TestDrainGraceExtremes(t *testing.T) {
	tests := []struct {
		name  string
		grace any
		hook  map[string]any
		args  []any
		want  int
	}{
		{"huge drain hook arguments", int64(180), chartDrainHook("9223372036854775807", "9223372036854775807"), nil, 1},
		{"huge hook and huge --shutdown-timeout", int64(180), execHook("sleep", "1e18"), []any{"--shutdown-timeout", "1e300"}, 1},
		{"huge grace covers a huge hook", int64(math.MaxInt64), execHook("sleep", "1e18"), nil, 0},
		{"grace as a huge float", 1e300, chartDrainHook("10", "120"), nil, 0},
		{"negative grace", int64(-1), execHook("sleep", "1"), nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := good(t)
			setPreStop(u, 0, tt.hook)
			if tt.args != nil {
				setArgs(u, append([]any{"--model", "Qwen/Qwen3-0.6B"}, tt.args...)...)
			}
			require.NoError(t, unstructured.SetNestedField(u.Object, tt.grace, "spec", "template", "spec", "terminationGracePeriodSeconds"))
			got := byRule(Run([]*unstructured.Unstructured{u}, Options{Namespace: "inference"}), "VL017")
			assert.Len(t, got, tt.want, "%v", got)
		})
	}
}

func TestDrainGraceMessage(t *testing.T) {
	u := good(t)
	setPreStop(u, 0, chartDrainHook("10", "120"))
	setArgs(u, "--model", "Qwen/Qwen3-0.6B", "--shutdown-timeout", "30")
	got := byRule(Run([]*unstructured.Unstructured{u}, Options{Namespace: "inference"}), "VL017")
	require.Len(t, got, 1)
	msg := got[0].Message
	for _, want := range []string{
		`container "server"`,
		"10s delay + at most 120s",
		"--shutdown-timeout",
		"160s in all",
		"terminationGracePeriodSeconds is 30s (unset: Kubernetes' default)",
		"at least 160",
		"drain.delaySeconds + drain.seconds",
	} {
		assert.Contains(t, msg, want)
	}
	assert.Equal(t, SeverityError, got[0].Severity)
}

// TestBuiltinChartDrain lints the built-in chart's drain settings: the
// defaults (hook 10 + 120 s, grace 180 s) pass, with the engine's flag
// too (+ 30 s); a grace period too short for them is VL017 on every pod
// template that drains: the Deployment's, each group's StatefulSet, the
// LeaderWorkerSet's leader and worker templates.
func TestBuiltinChartDrain(t *testing.T) {
	chart := filepath.Join("..", "vllm")
	multinode := filepath.Join("..", "..", "charts", "testdata", "values", "multinode.yaml")
	tests := []struct {
		name  string
		files []string
		set   []string
		want  []string // "Object Field" of the VL017 findings
	}{
		{name: "defaults"},
		{name: "engine flag with the default grace", set: []string{"drain.engineFlag=true"}},
		{name: "grace 60", set: []string{"terminationGracePeriodSeconds=60"},
			want: []string{"Deployment inference/qwen " + graceField}},
		{name: "grace exactly delay + seconds", set: []string{"terminationGracePeriodSeconds=130"}},
		{name: "engine flag needs its seconds too", set: []string{"terminationGracePeriodSeconds=130", "drain.engineFlag=true"},
			want: []string{"Deployment inference/qwen " + graceField}},
		{name: "longer drain than the grace", set: []string{"drain.seconds=600"},
			want: []string{"Deployment inference/qwen " + graceField}},
		{name: "drain off, grace 0", set: []string{"drain.enabled=false", "terminationGracePeriodSeconds=0"}},
		{name: "multi-node StatefulSets", files: []string{multinode}, set: []string{"terminationGracePeriodSeconds=60"},
			want: []string{"StatefulSet inference/qwen-g0 " + graceField, "StatefulSet inference/qwen-g1 " + graceField}},
		{name: "multi-node LeaderWorkerSet", files: []string{multinode},
			set: []string{"terminationGracePeriodSeconds=60", "multiNode.controller=leaderworkerset"},
			want: []string{
				"LeaderWorkerSet inference/qwen spec.leaderWorkerTemplate.leaderTemplate.spec.terminationGracePeriodSeconds",
				"LeaderWorkerSet inference/qwen spec.leaderWorkerTemplate.workerTemplate.spec.terminationGracePeriodSeconds",
			}},
		{name: "multi-node LeaderWorkerSet defaults", files: []string{multinode}, set: []string{"multiNode.controller=leaderworkerset"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := charts.Load(chart)
			require.NoError(t, err)
			r, err := charts.RenderContext(context.Background(), ch, charts.RenderOptions{ReleaseName: "qwen", Namespace: lintNamespace, ValueFiles: tt.files, Set: tt.set})
			require.NoError(t, err)
			var got []string
			for _, f := range byRule(Run(r.Objects, Options{Namespace: lintNamespace}), "VL017") {
				got = append(got, f.Object+" "+f.Field)
				assert.True(t, strings.Contains(f.Message, "drain hook"), "names the chart's hook: %s", f.Message)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
