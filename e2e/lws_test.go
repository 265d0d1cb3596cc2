//go:build e2e

// This file owns the e2e tests of LeaderWorkerSet releases: the built-in
// vllm chart with multiNode.controller=leaderworkerset deployed, upgraded
// and rolled back against the real LWS controller (lws_controller_test.go).

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// lwsValues are the group values (groups_test.go) with a LeaderWorkerSet:
// 2 groups of 2 pods (a leader and a worker), one GPU per pod.
var lwsValues = append(append([]string(nil), groupValues...), "--set", "multiNode.controller=leaderworkerset")

// deployLWS runs `vllmctl deploy chat vllm` with the LWS values and args,
// -o json.
func (f *relFixture) deployLWS(t *testing.T, args ...string) relRun {
	t.Helper()
	all := append([]string{"deploy", relName, "vllm", "--progress", "plain", "--timeout", "2m", "-o", "json"}, lwsValues...)
	return f.run(t, append(all, args...)...)
}

// leaderWorkerSet reads the release's LeaderWorkerSet, chat.
func (f *relFixture) leaderWorkerSet(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	dyn, err := dynamic.NewForConfig(f.cfg)
	require.NoError(t, err)
	gvr := schema.GroupVersionResource{Group: wait.LeaderWorkerSetGroup, Version: "v1", Resource: "leaderworkersets"}
	lws, err := dyn.Resource(gvr).Namespace(f.namespace).Get(context.Background(), relName, metav1.GetOptions{})
	require.NoError(t, err, "leaderworkerset %s", relName)
	return lws
}

// lwsPods returns the LeaderWorkerSet's pods, by name.
func (f *relFixture) lwsPods(t *testing.T) map[string]corev1.Pod {
	t.Helper()
	list, err := f.client.CoreV1().Pods(f.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "leaderworkerset.sigs.k8s.io/name=" + relName})
	require.NoError(t, err)
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// lwsRevision is the LeaderWorkerSet's current template revision: its
// leader StatefulSet's label.
func (f *relFixture) lwsRevision(t *testing.T) string {
	t.Helper()
	return f.statefulSet(t, relName).Labels[wait.LeaderWorkerSetRevisionLabel]
}

// requireLWSOn asserts that the LeaderWorkerSet rolled out on its current
// revision, with 4 pods (2 groups of 2), every one Ready, not being
// deleted, of that revision and of image tag; it returns the revision.
func (f *relFixture) requireLWSOn(t *testing.T, tag string) string {
	t.Helper()
	lws := f.leaderWorkerSet(t)
	done, msg, err := wait.LeaderWorkerSetRolledOut(lws)
	require.NoError(t, err)
	assert.True(t, done, "leaderworkerset rolled out: %s", msg)
	rev := f.lwsRevision(t)
	require.NotEmpty(t, rev, "the leader StatefulSet names the revision")
	pods := f.lwsPods(t)
	names := make([]string, 0, len(pods))
	for n := range pods {
		names = append(names, n)
	}
	sort.Strings(names)
	assert.Equal(t, []string{"chat-0", "chat-0-1", "chat-1", "chat-1-1"}, names)
	for _, p := range pods {
		assert.True(t, podIsReady(&p), "pod %s Ready", p.Name)
		assert.Nil(t, p.DeletionTimestamp, "pod %s not being deleted", p.Name)
		assert.Equal(t, rev, p.Labels[wait.LeaderWorkerSetRevisionLabel], "pod %s revision", p.Name)
		require.NotEmpty(t, p.Spec.Containers)
		assert.Contains(t, p.Spec.Containers[0].Image, ":"+tag, "pod %s image", p.Name)
	}
	// The leader StatefulSet and each group's worker StatefulSet are of
	// that revision too: none is left behind.
	sets, err := f.client.AppsV1().StatefulSets(f.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "leaderworkerset.sigs.k8s.io/name=" + relName})
	require.NoError(t, err)
	setNames := []string{}
	for _, s := range sets.Items {
		setNames = append(setNames, s.Name)
		assert.Equal(t, rev, s.Labels[wait.LeaderWorkerSetRevisionLabel], "StatefulSet %s revision", s.Name)
		assert.Nil(t, s.DeletionTimestamp, "StatefulSet %s not being deleted", s.Name)
	}
	sort.Strings(setNames)
	assert.Equal(t, []string{"chat", "chat-0", "chat-1"}, setNames, "the leader StatefulSet and a worker StatefulSet per group")
	return rev
}

// A LeaderWorkerSet release against the real LWS controller: installed
// (its 2 groups of 2 pods rolled out), upgraded (image tag), and a crashing
// upgrade caught (the controller recreates the crashing group at each
// restart: no CrashLoopBackOff ever shows), rolled back to the previous
// template, every group back on it and nothing left stuck.
func TestLWSRelease(t *testing.T) {
	lwsBin(t) // skipped (failed in CI) before any work without it
	f := newRelFixture(t)
	useLWS(t, f.env)

	start := time.Now()
	r := f.deployLWS(t)
	require.Equal(t, exitcode.OK, r.code, "install\n%s", r)
	t.Logf("install: %s", time.Since(start).Round(time.Millisecond))
	assert.Contains(t, r.stderr, "leaderworkerset.leaderworkerset.x-k8s.io/chat", "the watcher follows the LeaderWorkerSet")
	rev1 := f.requireLWSOn(t, "v0.11.0")

	start = time.Now()
	r = f.deployLWS(t, "--set", "image.tag=v0.9.2")
	require.Equal(t, exitcode.OK, r.code, "healthy upgrade\n%s", r)
	t.Logf("healthy upgrade: %s", time.Since(start).Round(time.Millisecond))
	rev2 := f.requireLWSOn(t, "v0.9.2")
	assert.NotEqual(t, rev1, rev2, "a new template revision")
	assert.Len(t, f.history(t), 2)

	start = time.Now()
	r = f.deployLWS(t, "--set", "image.tag=v0.9.2-crash")
	t.Logf("crash upgrade and rollback: %s", time.Since(start).Round(time.Millisecond))
	require.Equal(t, 3, r.code, "crash upgrade\n%s", r)
	res := result(t, r)
	require.NotNil(t, res.Failure, "%s", r)
	assert.Equal(t, "leaderworkerset.leaderworkerset.x-k8s.io/chat", res.Failure.Object, "%+v", res.Failure)
	assert.Equal(t, string(rollout.VerdictGroupRecreated), string(res.Failure.Verdict), "%+v", res.Failure)
	assert.Equal(t, "RecreateGroup", res.Failure.Reason, "%+v", res.Failure)
	assert.Contains(t, res.Failure.Pod, "chat-", "%+v", res.Failure)
	assert.Equal(t, int32(1), res.Failure.ExitCode, "the crash's exit code: %+v", res.Failure)
	assert.NotEmpty(t, res.Failure.LogTail, "the log read at the termination: %+v", res.Failure)
	assert.Equal(t, 2, res.RolledBackTo)

	// Every group back on revision 2's template: the rollback re-applied
	// it and waited for the LeaderWorkerSet; nothing is left on the bad
	// revision and nothing stays stuck.
	eventually(t, 30*time.Second, "the LeaderWorkerSet settles on the previous template", func(ctx context.Context) (bool, error) {
		done, _, err := wait.LeaderWorkerSetRolledOut(f.leaderWorkerSet(t))
		return done && err == nil, nil
	})
	assert.Equal(t, rev2, f.requireLWSOn(t, "v0.9.2"), "back on revision 2's template")
	hist := f.history(t)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusFailed, storage.StatusDeployed}, statuses(hist))
	require.Len(t, hist, 4)
	require.NotNil(t, hist[2].Failure)
	assert.Equal(t, res.Failure.Object, hist[2].Failure.Object, "the record names the LeaderWorkerSet")
	t.Logf("crash upgrade:\n%s", r.stderr)
}

// A LeaderWorkerSet upgrade whose log names a cause no restart cures
// (fault-gpumem: CUDA out of memory) fails at its first termination, before
// the LWS controller recreates the group: verdict KnownCause, cause
// gpu-oom, the log read while the pod existed; rolled back.
func TestLWSKnownCauseRolledBack(t *testing.T) {
	lwsBin(t) // skipped (failed in CI) before any work without it
	f := newRelFixture(t)
	useLWS(t, f.env)
	r := f.deployLWS(t)
	require.Equal(t, exitcode.OK, r.code, "install\n%s", r)
	rev1 := f.requireLWSOn(t, "v0.11.0")

	start := time.Now()
	r = f.deployLWS(t, "--set", "image.tag=v0.9.2-fault-gpumem")
	t.Logf("gpu-oom upgrade and rollback: %s", time.Since(start).Round(time.Millisecond))
	require.Equal(t, 3, r.code, "gpu-oom upgrade\n%s", r)
	res := result(t, r)
	require.NotNil(t, res.Failure, "%s", r)
	assert.Equal(t, string(rollout.VerdictKnownCause), string(res.Failure.Verdict), "%+v", res.Failure)
	assert.Equal(t, vllmcause.CauseGPUOOM, res.Failure.Cause, "%+v", res.Failure)
	assert.Equal(t, "leaderworkerset.leaderworkerset.x-k8s.io/chat", res.Failure.Object)
	assert.Contains(t, res.Failure.Evidence, "CUDA out of memory", "%+v", res.Failure)
	assert.NotEmpty(t, res.Failure.LogTail, "%+v", res.Failure)
	assert.Equal(t, 1, res.RolledBackTo)
	eventually(t, 30*time.Second, "the LeaderWorkerSet settles on the previous template", func(ctx context.Context) (bool, error) {
		done, _, err := wait.LeaderWorkerSetRolledOut(f.leaderWorkerSet(t))
		return done && err == nil, nil
	})
	assert.Equal(t, rev1, f.requireLWSOn(t, "v0.11.0"), "back on revision 1's template")
}

// TestDiagnoseLWSPod diagnoses the failing pods of a LeaderWorkerSet
// release left failed (--no-rollback), made by a chart whose pods carry no
// vllmctl labels (a copy of the built-in chart without
// app.kubernetes.io/managed-by on its pod templates, its Chart.yaml
// mapping kept): the leader (its StatefulSet is the LeaderWorkerSet's) and
// a worker (its StatefulSet is the leader pod's) are followed up to the
// LeaderWorkerSet, the release's object, so the hints quote the chart's
// values path beside the flag. The controller recreates a crashing group,
// so diagnose is retried until the pod it reads has failed.
func TestDiagnoseLWSPod(t *testing.T) {
	lwsBin(t)
	f := newRelFixture(t)
	useLWS(t, f.env)
	chart := filepath.Join(t.TempDir(), "vllm")
	require.NoError(t, os.CopyFS(chart, os.DirFS(filepath.Join("..", "charts", "vllm"))))
	helpers := filepath.Join(chart, "templates", "_helpers.tpl")
	tpl, err := os.ReadFile(helpers)
	require.NoError(t, err)
	unlabelled := strings.Replace(string(tpl), "app.kubernetes.io/managed-by: vllmctl\n", "", 1)
	require.NotEqual(t, string(tpl), unlabelled, "the pod labels name vllmctl")
	require.NoError(t, os.WriteFile(helpers, []byte(unlabelled), 0o600))
	deploy := func(args ...string) relRun {
		all := append([]string{"deploy", relName, chart, "--progress", "plain", "--timeout", "2m", "-o", "json"}, lwsValues...)
		return f.run(t, append(all, args...)...)
	}
	r := deploy()
	require.Equal(t, exitcode.OK, r.code, "install\n%s", r)
	pods := f.lwsPods(t)
	require.NotEmpty(t, pods)
	for _, p := range pods {
		require.NotContains(t, p.Labels, "app.kubernetes.io/managed-by", "pod %s carries no vllmctl label", p.Name)
	}

	r = deploy("--set", "image.tag=v0.11.1-fault-kvcache", "--no-rollback")
	require.Equal(t, 4, r.code, "failed, not rolled back\n%s", r)
	res := result(t, r)
	require.NotNil(t, res.Failure, r.stdout)
	// The group the rolling update reached first: its leader chat-<g> and
	// its worker chat-<g>-1.
	leader := res.Failure.Pod
	if parts := strings.Split(leader, "-"); len(parts) == 3 {
		leader = strings.Join(parts[:2], "-")
	}
	require.Regexp(t, `^chat-\d+$`, leader, "the failed pod %q is a group's", res.Failure.Pod)
	for _, pod := range []string{leader, leader + "-1"} {
		var last relRun
		err := kwait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			last = f.run(t, "diagnose", pod, "-o", "json")
			return last.code == 0 && strings.Contains(last.stdout, `"kv-cache"`), nil
		})
		require.NoError(t, err, "diagnose %s names kv-cache; last:\n%s", pod, last)
		var d map[string]any
		require.NoError(t, json.Unmarshal([]byte(last.stdout), &d), last.stdout)
		hints, _ := json.Marshal(d["hints"])
		assert.Contains(t, string(hints), "--max-model-len", "%s: the flag to change", pod)
		assert.Contains(t, string(hints), "model.maxModelLen", "%s: the chart's values path, from the release's record", pod)
	}
}
