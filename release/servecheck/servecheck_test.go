package servecheck

import (
	"context"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/podhttp"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

func TestResolveServeCheck(t *testing.T) {
	on, off := true, false
	builtin := storage.Chart{Name: "vllm", Builtin: true}
	other := storage.Chart{Name: "mine"}
	model := map[string]any{"name": "Qwen/Qwen3-0.6B", "servedModelName": ""}
	builtinValues := func(sc map[string]any) map[string]any {
		return map[string]any{"model": model, "serveCheck": sc}
	}
	defaults := map[string]any{"enabled": true, "model": "", "prompt": "Say hello", "maxTokens": float64(4), "timeout": "60s", "port": float64(0)}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for dk, dv := range defaults {
			m[dk] = dv
		}
		m[k] = v
		return m
	}
	for _, tc := range []struct {
		name   string
		chart  storage.Chart
		values map[string]any
		opts   Options
		// want nil: the check is off; wantErr: the field the error names.
		want    *Config
		wantErr string
	}{
		{name: "built-in defaults", chart: builtin, values: builtinValues(defaults),
			want: &Config{Spec: wait.ServeSpec{Model: "Qwen/Qwen3-0.6B", Prompt: "Say hello", MaxTokens: 4, Timeout: time.Minute}}},
		{name: "served model name wins over the model", chart: builtin,
			values: map[string]any{"model": map[string]any{"name": "a/b", "servedModelName": "chat"}, "serveCheck": defaults},
			want:   &Config{Spec: wait.ServeSpec{Model: "chat", Prompt: "Say hello", MaxTokens: 4, Timeout: time.Minute}}},
		{name: "serveCheck.model wins", chart: builtin, values: builtinValues(with("model", "other")),
			want: &Config{Spec: wait.ServeSpec{Model: "other", Prompt: "Say hello", MaxTokens: 4, Timeout: time.Minute}}},
		{name: "built-in record of before the check: on, defaults", chart: builtin, values: map[string]any{"model": model},
			want: &Config{Spec: wait.ServeSpec{Model: "Qwen/Qwen3-0.6B", Timeout: wait.DefaultServeTimeout}}},
		{name: "values turn it off", chart: builtin, values: builtinValues(with("enabled", false))},
		{name: "--serve-check=false", chart: builtin, values: builtinValues(defaults), opts: Options{Enabled: &off}},
		{name: "--serve-check wins over the values", chart: builtin, values: builtinValues(with("enabled", false)), opts: Options{Enabled: &on},
			want: &Config{Spec: wait.ServeSpec{Model: "Qwen/Qwen3-0.6B", Prompt: "Say hello", MaxTokens: 4, Timeout: time.Minute}}},
		{name: "--serve-check-timeout wins over the values", chart: builtin, values: builtinValues(with("timeout", "2m")), opts: Options{Timeout: 5 * time.Second},
			want: &Config{Spec: wait.ServeSpec{Model: "Qwen/Qwen3-0.6B", Prompt: "Say hello", MaxTokens: 4, Timeout: 5 * time.Second}}},
		{name: "port", chart: builtin, values: builtinValues(with("port", 8080)),
			want: &Config{Port: 8080, Spec: wait.ServeSpec{Model: "Qwen/Qwen3-0.6B", Prompt: "Say hello", MaxTokens: 4, Timeout: time.Minute}}},
		{name: "another chart: off", chart: other, values: map[string]any{"model": model}},
		{name: "another chart's own serveCheck key is left alone", chart: other, values: map[string]any{"serveCheck": "yes please"}},
		{name: "another chart asks in its values", chart: other, values: map[string]any{"serveCheck": map[string]any{"enabled": true, "model": "m"}},
			want: &Config{Spec: wait.ServeSpec{Model: "m", Timeout: wait.DefaultServeTimeout}}},
		{name: "another chart with --serve-check: any listed model", chart: other, values: map[string]any{}, opts: Options{Enabled: &on},
			want: &Config{Spec: wait.ServeSpec{Timeout: wait.DefaultServeTimeout}}},
		{name: "timeout 0", chart: builtin, values: builtinValues(with("timeout", "0s")), wantErr: "serveCheck.timeout"},
		{name: "timeout negative", chart: builtin, values: builtinValues(with("timeout", "-5s")), wantErr: "serveCheck.timeout"},
		{name: "timeout huge", chart: builtin, values: builtinValues(with("timeout", "1000h")), wantErr: "serveCheck.timeout"},
		{name: "timeout not a duration", chart: builtin, values: builtinValues(with("timeout", "soon")), wantErr: "serveCheck.timeout"},
		{name: "timeout a number", chart: builtin, values: builtinValues(with("timeout", float64(60))), wantErr: "serveCheck.timeout"},
		{name: "enabled a string", chart: builtin, values: builtinValues(with("enabled", "yes")), wantErr: "serveCheck.enabled"},
		{name: "maxTokens a string", chart: builtin, values: builtinValues(with("maxTokens", "4")), wantErr: "serveCheck.maxTokens"},
		{name: "maxTokens fractional", chart: builtin, values: builtinValues(with("maxTokens", 2.5)), wantErr: "serveCheck.maxTokens"},
		{name: "maxTokens too many", chart: builtin, values: builtinValues(with("maxTokens", float64(1e9))), wantErr: "serveCheck.maxTokens"},
		{name: "model a list", chart: builtin, values: builtinValues(with("model", []any{"a"})), wantErr: "serveCheck.model"},
		{name: "port out of range", chart: builtin, values: builtinValues(with("port", float64(70000))), wantErr: "serveCheck.port"},
		{name: "unknown key", chart: builtin, values: builtinValues(with("modle", "x")), wantErr: "serveCheck.modle"},
		{name: "not a map", chart: builtin, values: map[string]any{"serveCheck": "on"}, wantErr: "serveCheck"},
		{name: "another chart that asks: its keys are checked", chart: other,
			values: map[string]any{"serveCheck": map[string]any{"enabled": true, "timeout": 5}}, wantErr: "serveCheck.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.chart, tc.values, tc.opts)
			if tc.wantErr != "" {
				require.Error(t, err)
				var ie *InputError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, tc.wantErr, ie.Field)
				assert.Contains(t, err.Error(), tc.wantErr+":")
				assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestValidateTimeout(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{time.Second, true}, {time.Hour, true}, {0, false}, {-time.Second, false}, {time.Hour + 1, false}} {
		err := ValidateTimeout("--serve-check-timeout", tc.d)
		if tc.ok {
			assert.NoError(t, err, tc.d)
			continue
		}
		require.Error(t, err, tc.d)
		assert.Contains(t, err.Error(), "--serve-check-timeout")
	}
}

// TestServeTargets: the pods a serve check takes are the Ready,
// non-terminating pods the release's Services select, of the revision's
// ReplicaSets and ControllerRevisions: a multi-node group's leader (the
// Service selects pod-index 0), not its workers nor an old revision's
// pods; each with its container port named http.
func TestServeTargets(t *testing.T) {
	svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "chat"},
		"spec":     map[string]any{"selector": map[string]any{"app": "chat", "apps.kubernetes.io/pod-index": "0"}}}}
	sts := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "chat-g0"},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "chat"}}}}}
	pod := func(name, index, rev string, ready, deleting bool, ports ...corev1.ContainerPort) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml",
				Labels:          map[string]string{"app": "chat", "apps.kubernetes.io/pod-index": index, "controller-revision-hash": rev},
				OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "chat-g0"}}},
			Spec:   corev1.PodSpec{NodeName: "gpu-node-1", Containers: []corev1.Container{{Name: "vllm", Ports: ports}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		if deleting {
			now := metav1.Now()
			p.DeletionTimestamp = &now
			p.Finalizers = []string{"test"}
		}
		return p
	}
	http := corev1.ContainerPort{Name: "http", ContainerPort: 8000}
	client := fake.NewClientset(
		pod("chat-g0-0", "0", "chat-g0-new", true, false, corev1.ContainerPort{Name: "metrics", ContainerPort: 9090}, http),
		pod("chat-g0-1", "1", "chat-g0-new", true, false, http), // a worker: not selected
		pod("old-0", "0", "chat-g0-old", true, false, http),     // the old revision's leader
		pod("slow-0", "0", "chat-g0-new", false, false, http),   // not Ready
		pod("gone-0", "0", "chat-g0-new", true, true, http),     // terminating
		pod("bare-0", "0", "chat-g0-new", true, false),          // no port declared
	)
	e := Pods{Client: client, Namespace: "ml"}
	rec := &storage.Release{Name: "chat", Revision: 2,
		ControllerRevisions: []storage.ControllerRevisionRef{{StatefulSet: "chat-g0", Name: "chat-g0-new", Hash: "new"}}}
	nodes := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "chat-nodes"},
		"spec":     map[string]any{"clusterIP": "None", "selector": map[string]any{"app": "chat"}}}}
	objs := []*unstructured.Unstructured{svc, nodes, sts}
	ctx := context.Background()

	targets, owners, err := e.Targets(ctx, rec, objs, &Config{}, Scope{})
	require.NoError(t, err)
	assert.Equal(t, []wait.ServeTarget{{Pod: "bare-0", Port: podhttp.DefaultPort, Node: "gpu-node-1"}, {Pod: "chat-g0-0", Port: 8000, Node: "gpu-node-1"}}, targets)
	assert.Equal(t, "statefulset/chat-g0", owners["chat-g0-0"])

	live, _, err := e.Targets(ctx, rec, objs, &Config{Port: 8080}, Scope{Live: true})
	require.NoError(t, err)
	assert.Equal(t, []wait.ServeTarget{{Pod: "bare-0", Port: 8080, Node: "gpu-node-1"}, {Pod: "chat-g0-0", Port: 8080, Node: "gpu-node-1"},
		{Pod: "old-0", Port: 8080, Node: "gpu-node-1"}}, live, "test: whatever the Services select now")

	canary, _, err := e.Targets(ctx, rec, objs, &Config{}, Scope{Pods: []string{"chat-g0-0", "chat-g0-1"}})
	require.NoError(t, err)
	assert.Equal(t, []wait.ServeTarget{{Pod: "chat-g0-0", Port: 8000, Node: "gpu-node-1"}}, canary, "a canary group: its leader")

	_, _, err = e.Targets(ctx, rec, objs, &Config{}, Scope{Pods: []string{"missing"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pod ml/missing")

	// Only a headless Service, or none: every pod it (or the workloads)
	// selects.
	headless, _, err := e.Targets(ctx, rec, []*unstructured.Unstructured{nodes, sts}, &Config{}, Scope{})
	require.NoError(t, err)
	assert.Len(t, headless, 3, "leader and worker of the new revision, with ports or not: %+v", headless)
	none, _, err := e.Targets(ctx, rec, []*unstructured.Unstructured{sts}, &Config{}, Scope{})
	require.NoError(t, err)
	assert.Len(t, none, 3, "leader and worker of the new revision, with ports or not: %+v", none)
}

// TestClipKeepsRunesWhole: a value quoted in an error is cut on a rune
// boundary, never into invalid UTF-8.
func TestClipKeepsRunesWhole(t *testing.T) {
	assert.Equal(t, "abc", clip("abc", 3))
	assert.Equal(t, "ab…", clip("abcd", 2))
	got := clip("aé€", 3) // a (1 byte), é (2), € (3): 3 bytes end inside €
	assert.Equal(t, "aé…", got)
	assert.True(t, utf8.ValidString(got))
	assert.Equal(t, "…", clip("€€", 2))
}
