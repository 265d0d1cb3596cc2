//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vllmctl/vllmctl/release/storage"
)

// The grouped-release tests deploy the built-in vllm chart with
// multiNode.nodes=2: each of the 2 engine replicas is a group of 2 pods,
// one per node (gpu-node-1 and gpu-node-2), a StatefulSet chat-g0 and
// chat-g1. One GPU per pod; tensor parallel 1 × pipeline parallel 2 = 2
// nodes × 1 GPU.
var groupValues = []string{
	"--set", "replicaCount=2",
	"--set", "multiNode.nodes=2",
	"--set", "resources.gpu=1",
	"--set", "model.tensorParallelSize=1",
	"--set", "extraArgs={--pipeline-parallel-size=2}",
	"--set", "resources.requests.cpu=100m",
	"--set", "resources.limits.cpu=100m",
	"--set", "resources.requests.memory=128Mi",
	"--set", "resources.limits.memory=128Mi",
	"--set", "shm.enabled=false",
}

var groupNames = []string{"chat-g0", "chat-g1"}

// deployGroups runs `vllmctl deploy chat vllm` with the group values and
// args, -o json.
func (f *relFixture) deployGroups(t *testing.T, args ...string) relRun {
	t.Helper()
	all := append([]string{"deploy", relName, "vllm", "--progress", "plain", "--timeout", "2m", "-o", "json"}, groupValues...)
	return f.run(t, append(all, args...)...)
}

// groupPods returns the pods of StatefulSet name, by name.
func (f *relFixture) groupPods(t *testing.T, name string) map[string]corev1.Pod {
	t.Helper()
	list, err := f.client.CoreV1().Pods(f.namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if o := metav1.GetControllerOf(&p); o != nil && o.Kind == "StatefulSet" && o.Name == name {
			out[p.Name] = p
		}
	}
	return out
}

func (f *relFixture) statefulSet(t *testing.T, name string) *appsv1.StatefulSet {
	t.Helper()
	sts, err := f.client.AppsV1().StatefulSets(f.namespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return sts
}

// requireGroupOn asserts that StatefulSet name rolled out on the
// ControllerRevision want: current == update == want, every pod on it and
// Ready, none left on another revision.
func (f *relFixture) requireGroupOn(t *testing.T, name string, want storage.ControllerRevisionRef) {
	t.Helper()
	sts := f.statefulSet(t, name)
	assert.Equal(t, want.Name, sts.Status.UpdateRevision, "%s update revision", name)
	assert.Equal(t, want.Name, sts.Status.CurrentRevision, "%s current revision", name)
	assert.Equal(t, int32(2), sts.Status.ReadyReplicas, "%s ready", name)
	pods := f.groupPods(t, name)
	require.Len(t, pods, 2, "%s pods", name)
	for _, p := range pods {
		assert.Equal(t, want.Name, p.Labels[appsv1.ControllerRevisionHashLabelKey], "pod %s revision", p.Name)
		assert.Nil(t, p.DeletionTimestamp, "pod %s", p.Name)
	}
}

// groupRevision returns the ControllerRevision a record holds for name.
func groupRevision(t *testing.T, rec *storage.Release, name string) storage.ControllerRevisionRef {
	t.Helper()
	for _, cr := range rec.ControllerRevisions {
		if cr.StatefulSet == name {
			return cr
		}
	}
	require.Failf(t, "no ControllerRevision", "revision %d records none for %s: %+v", rec.Revision, name, rec.ControllerRevisions)
	return storage.ControllerRevisionRef{}
}

// leaderWatch samples, at every change of a pod in the namespace, whether
// each group's leader (pod index 0) is Ready, and records the moments when
// no group's leader was: a grouped rollout must never take every group
// down at once.
type leaderWatch struct {
	mu      sync.Mutex
	ready   map[string]bool // group -> leader Ready
	samples int
	allDown []string
	stop    chan struct{}
}

func (f *relFixture) watchLeaders(t *testing.T) *leaderWatch {
	t.Helper()
	lw := &leaderWatch{ready: map[string]bool{}, stop: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(f.client, 0, informers.WithNamespace(f.namespace))
	inf := factory.Core().V1().Pods().Informer()
	note := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Labels["apps.kubernetes.io/pod-index"] != "0" {
			return
		}
		o := metav1.GetControllerOf(p)
		if o == nil || o.Kind != "StatefulSet" {
			return
		}
		lw.mu.Lock()
		defer lw.mu.Unlock()
		lw.ready[o.Name] = podIsReady(p) && p.DeletionTimestamp == nil
		lw.samples++
		up := 0
		for _, r := range lw.ready {
			if r {
				up++
			}
		}
		if len(lw.ready) == len(groupNames) && up == 0 {
			lw.allDown = append(lw.allDown, fmt.Sprintf("%s after pod %s changed", time.Now().Format(time.RFC3339Nano), p.Name))
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    note,
		UpdateFunc: func(_, obj any) { note(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok && p.Labels["apps.kubernetes.io/pod-index"] == "0" {
				q := p.DeepCopy()
				now := metav1.Now()
				q.DeletionTimestamp = &now
				note(q)
			}
		},
	})
	require.NoError(t, err)
	factory.Start(lw.stop)
	factory.WaitForCacheSync(lw.stop)
	t.Cleanup(func() { lw.close() })
	return lw
}

func (lw *leaderWatch) close() {
	select {
	case <-lw.stop:
	default:
		close(lw.stop)
	}
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podUIDs(pods map[string]corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"="+string(p.UID))
	}
	sort.Strings(out)
	return out
}

// TestGroupedReleaseRollsOutGroupByGroup: install, a healthy upgrade wave
// by wave (a group's leader always Ready), a crash-looping upgrade caught
// in the first group and rescued (no pod left on the bad revision, the
// second group untouched, exit 3), and rollback --to-revision 1.
func TestGroupedReleaseRollsOutGroupByGroup(t *testing.T) {
	f := newRelFixture(t)

	// Install: both groups at once.
	r := f.deployGroups(t)
	require.Equal(t, 0, r.code, "install\n%s", r)
	res := result(t, r)
	require.Len(t, res.ControllerRevisions, 2, "install result: %+v", res)
	revs := f.history(t)
	require.Len(t, revs, 1)
	rev1 := map[string]storage.ControllerRevisionRef{}
	for _, name := range groupNames {
		rev1[name] = groupRevision(t, revs[0], name)
		f.requireGroupOn(t, name, rev1[name])
	}
	svc, err := f.client.CoreV1().Services(f.namespace).Get(context.Background(), relName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "0", svc.Spec.Selector["apps.kubernetes.io/pod-index"], "the Service selects leaders only")

	// A healthy upgrade goes group by group: never both leaders down.
	lw := f.watchLeaders(t)
	r = f.deployGroups(t, "--set", "image.tag=v0.9.2")
	require.Equal(t, 0, r.code, "healthy upgrade\n%s", r)
	lw.close()
	assert.Contains(t, r.stderr, "wave 1 of 2: group(s) chat-g0")
	assert.Contains(t, r.stderr, "wave 2 of 2: group(s) chat-g1")
	lw.mu.Lock()
	assert.Empty(t, lw.allDown, "both groups' leaders not Ready at once (%d samples)", lw.samples)
	assert.Greater(t, lw.samples, 4, "the leaders were sampled throughout")
	lw.mu.Unlock()
	revs = f.history(t)
	require.Len(t, revs, 2)
	rev2 := map[string]storage.ControllerRevisionRef{}
	for _, name := range groupNames {
		rev2[name] = groupRevision(t, revs[1], name)
		assert.NotEqual(t, rev1[name].Hash, rev2[name].Hash, "%s: a new revision", name)
		f.requireGroupOn(t, name, rev2[name])
	}
	// The first wave is Ready before the second starts: its wave line is
	// printed after the first group's wait ended.
	wave2 := strings.Index(r.stderr, "wave 2 of 2")
	require.Positive(t, wave2)

	// A crash-looping upgrade: caught in the first group, rolled back,
	// every pod back on revision 2's ControllerRevision, nothing left for
	// a person to delete; the second group is never touched.
	g1Before := podUIDs(f.groupPods(t, "chat-g1"))
	r = f.deployGroups(t, "--set", "image.tag=v0.9.2-crash")
	require.Equal(t, 3, r.code, "crash upgrade\n%s", r)
	res = result(t, r)
	require.NotNil(t, res.Failure)
	assert.Equal(t, "CrashLoopBackOff", res.Failure.Reason, "%+v", res.Failure)
	assert.Contains(t, res.Failure.Object, "chat-g0")
	assert.Contains(t, res.Failure.Pod, "chat-g0-")
	assert.Equal(t, 2, res.RolledBackTo)
	assert.NotContains(t, r.stderr, "wave 2 of 2", "the second wave never starts")
	// The groups' own controller replaces their crashing pods once the
	// template is restored (Parallel, maxUnavailable 100%); the rescue
	// evicts whatever it left (TestKubectlUndoVersusRescue shows where
	// it does not).
	for _, name := range groupNames {
		f.requireGroupOn(t, name, rev2[name])
	}
	assert.Equal(t, g1Before, podUIDs(f.groupPods(t, "chat-g1")), "chat-g1's pods untouched")
	revs = f.history(t)
	require.Len(t, revs, 4)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusFailed, storage.StatusDeployed}, statuses(revs))
	assert.Equal(t, rev2["chat-g0"].Hash, groupRevision(t, revs[3], "chat-g0").Hash)

	// rollback --to-revision 1 after the good upgrade.
	r = f.run(t, "rollback", relName, "--to-revision", "1", "-o", "json", "--progress", "plain", "--timeout", "2m")
	require.Equal(t, 0, r.code, "rollback\n%s", r)
	revs = f.history(t)
	last := revs[len(revs)-1]
	for _, name := range groupNames {
		got := groupRevision(t, last, name)
		assert.Equal(t, rev1[name].Hash, got.Hash, "%s back on revision 1's template", name)
		f.requireGroupOn(t, name, got)
	}

	// history and status show the ControllerRevisions.
	r = f.run(t, "history", relName)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout, rev1["chat-g0"].Hash)
	r = f.run(t, "status", relName, "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	requireSchemaValid(t, "status", r.stdout)
	assert.Regexp(t, `"rolledOut": *true`, r.stdout)
	assert.NotRegexp(t, `"rolledOut": *false`, r.stdout)
}

// TestKubectlUndoVersusRescue records the failure vllmctl's rescue exists
// for, with the same crash-looping upgrade left in place (--no-rollback)
// and then `kubectl rollout undo`:
//
//   - a StatefulSet with the default policies (OrderedReady, one pod at a
//     time): the template is the old one again, but the crash-looping pod
//     stays on the bad revision (kubernetes#67250); vllmctl's rollback
//     evicts it and the set rolls out;
//   - the built-in chart's groups (podManagementPolicy Parallel,
//     maxUnavailable 100%): the controller replaces the crashing pods of
//     the group itself once the template is restored, and the test
//     records that too.
func TestKubectlUndoVersusRescue(t *testing.T) {
	kubectl := os.Getenv("KUBECTL_BIN")
	require.NotEmpty(t, kubectl, "KUBECTL_BIN is not set: run make e2e (or KUBECTL_BIN=$(hack/build-devcluster.sh)/kubectl)")
	for _, tc := range []struct {
		name   string
		sts    string
		deploy func(f *relFixture, t *testing.T, args ...string) relRun
		crash  []string
		stuck  bool
	}{
		{
			name: "default StatefulSet", sts: relName, stuck: true,
			deploy: func(f *relFixture, t *testing.T, args ...string) relRun {
				return f.run(t, append([]string{"deploy", relName, "testdata/stschart", "--progress", "plain", "--timeout", "2m", "-o", "json"}, args...)...)
			},
			crash: []string{"--set", "tag=v1-crash"},
		},
		{
			name: "built-in chart group", sts: "chat-g0", stuck: false,
			deploy: (*relFixture).deployGroups,
			crash:  []string{"--set", "image.tag=v0.9.2-crash"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRelFixture(t)
			r := tc.deploy(f, t)
			require.Equal(t, 0, r.code, "install\n%s", r)
			good := groupRevision(t, f.history(t)[0], tc.sts)

			r = tc.deploy(f, t, append(tc.crash, "--no-rollback")...)
			require.Equal(t, 4, r.code, "crash upgrade without rollback\n%s", r)
			bad := groupRevision(t, f.history(t)[1], tc.sts)
			require.NotEqual(t, good.Name, bad.Name)

			out, err := exec.Command(kubectl, "--kubeconfig", f.kubeconfig, "-n", f.namespace, "rollout", "undo", "statefulset/"+tc.sts).CombinedOutput()
			require.NoError(t, err, "kubectl rollout undo: %s", out)
			eventually(t, 30*time.Second, "the undo's template observed", func(ctx context.Context) (bool, error) {
				sts := f.statefulSet(t, tc.sts)
				return sts.Status.ObservedGeneration >= sts.Generation && sts.Status.UpdateRevision == good.Name, nil
			})
			onBad := func() int {
				n := 0
				for _, p := range f.groupPods(t, tc.sts) {
					if p.Labels[appsv1.ControllerRevisionHashLabelKey] == bad.Name {
						n++
					}
				}
				return n
			}
			if !tc.stuck {
				eventually(t, 60*time.Second, "kubectl's undo replaces the group's crashing pods", func(ctx context.Context) (bool, error) {
					sts := f.statefulSet(t, tc.sts)
					return onBad() == 0 && sts.Status.CurrentRevision == good.Name && sts.Status.ReadyReplicas == 2, nil
				})
				return
			}
			// For 20 s the crash-looping pod stays on the bad revision.
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				require.Positive(t, onBad(), "kubectl's undo replaced every crashing pod: the StatefulSet was not stuck")
				time.Sleep(time.Second)
			}
			sts := f.statefulSet(t, tc.sts)
			t.Logf("20 s after kubectl rollout undo: currentRevision %s, updateRevision %s, ready %d/2, %d pod(s) on %s",
				sts.Status.CurrentRevision, sts.Status.UpdateRevision, sts.Status.ReadyReplicas, onBad(), bad.Name)
			// Its status may even name the good revision current: only
			// the ready count and the pod's label tell the truth.
			assert.Less(t, sts.Status.ReadyReplicas, int32(2))

			// vllmctl's rollback rescues it: no manual step.
			r = f.run(t, "rollback", relName, "--to-revision", "1", "--progress", "plain", "--timeout", "2m")
			require.Equal(t, 0, r.code, "rollback\n%s", r)
			assert.Contains(t, r.stderr, "evicted")
			sts = f.statefulSet(t, tc.sts)
			assert.Equal(t, good.Name, sts.Status.CurrentRevision)
			assert.Equal(t, good.Name, sts.Status.UpdateRevision)
			assert.Equal(t, int32(2), sts.Status.ReadyReplicas)
			assert.Zero(t, onBad())
		})
	}
}

// TestDefaultStatefulSetCrashIsRescued: the automatic rollback of a
// crash-looping upgrade of a StatefulSet with the default policies ends
// with every pod on the old revision, where kubectl's undo stays stuck.
func TestDefaultStatefulSetCrashIsRescued(t *testing.T) {
	f := newRelFixture(t)
	deploy := func(args ...string) relRun {
		return f.run(t, append([]string{"deploy", relName, "testdata/stschart", "--progress", "plain", "--timeout", "2m", "-o", "json"}, args...)...)
	}
	r := deploy()
	require.Equal(t, 0, r.code, "install\n%s", r)
	good := groupRevision(t, f.history(t)[0], relName)
	r = deploy("--set", "tag=v1-crash")
	require.Equal(t, 3, r.code, "crash upgrade\n%s", r)
	res := result(t, r)
	require.NotNil(t, res.Failure)
	assert.Equal(t, "CrashLoopBackOff", res.Failure.Reason)
	assert.Contains(t, r.stderr, "evicted")
	sts := f.statefulSet(t, relName)
	assert.Equal(t, good.Name, sts.Status.CurrentRevision)
	assert.Equal(t, good.Name, sts.Status.UpdateRevision)
	assert.Equal(t, int32(2), sts.Status.ReadyReplicas)
	for _, p := range f.groupPods(t, relName) {
		assert.Equal(t, good.Name, p.Labels[appsv1.ControllerRevisionHashLabelKey], "pod %s", p.Name)
	}
}

// TestGroupedReleaseRefusals: a group that cannot have one node per pod
// (3 pods per group, 2 untainted GPU nodes) is refused by the strict
// preflight, and bad multi-node values by the chart's schema and rules:
// exit 2, nothing applied, nothing recorded.
func TestGroupedReleaseRefusals(t *testing.T) {
	f := newRelFixture(t)
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"gang does not fit", []string{"--set", "multiNode.nodes=3", "--set", "extraArgs={--pipeline-parallel-size=3}", "--surge-policy", "strict"}, "chat-g0"},
		{"gang does not fit, auto policy", []string{"--set", "multiNode.nodes=3", "--set", "extraArgs={--pipeline-parallel-size=3}"}, "gang does not fit"},
		{"nodes 0", []string{"--set", "multiNode.nodes=0"}, "multiNode.nodes"},
		{"nodes huge", []string{"--set", "multiNode.nodes=100000000000"}, "multiNode.nodes"},
		{"nodes not a number", []string{"--set-string", "multiNode.nodes=two"}, "multiNode.nodes"},
		{"unknown controller", []string{"--set", "multiNode.controller=ray"}, "multiNode.controller"},
		{"autoscaling a group", []string{"--set", "autoscaling.enabled=true"}, "autoscaling"},
		{"max-unavailable not a count", []string{"--max-unavailable", "lots"}, "max-unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.deployGroups(t, tc.args...)
			require.Equal(t, 2, r.code, "%s", r)
			assert.Contains(t, r.stderr, tc.says)
			assert.Empty(t, f.history(t), "no record")
			list, err := f.client.AppsV1().StatefulSets(f.namespace).List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			assert.Empty(t, list.Items, "nothing applied")
			svcs, err := f.client.CoreV1().Services(f.namespace).List(context.Background(), metav1.ListOptions{})
			require.NoError(t, err)
			assert.Empty(t, svcs.Items, "nothing applied")
		})
	}
}

// TestGroupedReleaseCanary: --canary 1 holds the first group under watch,
// runs the gate with that group's pods, then the second wave follows; a
// gate that refuses rolls the first group back and never touches the
// second.
func TestGroupedReleaseCanary(t *testing.T) {
	f := newRelFixture(t)
	r := f.deployGroups(t)
	require.Equal(t, 0, r.code, "install\n%s", r)
	rev1 := groupRevision(t, f.history(t)[0], "chat-g1")

	gate := `case "$VLLMCTL_CANARY_PODS" in "chat-g0-0 chat-g0-1") exit 0;; *) echo "pods: $VLLMCTL_CANARY_PODS"; exit 1;; esac`
	r = f.deployGroups(t, "--set", "image.tag=v0.9.2", "--canary", "1", "--canary-hold", "2s", "--canary-gate", gate)
	require.Equal(t, 0, r.code, "canary upgrade\n%s", r)
	res := result(t, r)
	require.NotNil(t, res.Canary)
	assert.Equal(t, storage.CanaryPromoted, res.Canary.Outcome, "%+v", res.Canary)
	assert.Equal(t, []string{"chat-g0-0", "chat-g0-1"}, res.Canary.Pods)
	require.NotNil(t, res.Canary.Gate)
	assert.True(t, res.Canary.Gate.Passed())
	hold := strings.Index(r.stderr, "canary: holding")
	wave2 := strings.Index(r.stderr, "wave 2 of 2")
	require.Positive(t, hold, "%s", r.stderr)
	assert.Greater(t, wave2, hold, "the second wave starts after the hold")
	revs := f.history(t)
	for _, name := range groupNames {
		f.requireGroupOn(t, name, groupRevision(t, revs[1], name))
	}

	// A gate that refuses: the canary group goes back, the other group is
	// untouched.
	g1Before := podUIDs(f.groupPods(t, "chat-g1"))
	rev2 := groupRevision(t, revs[1], "chat-g0")
	r = f.deployGroups(t, "--set", "image.tag=v0.9.3", "--canary", "1", "--canary-hold", "1s", "--canary-gate", "echo no; exit 7")
	require.Equal(t, 3, r.code, "refused canary\n%s", r)
	res = result(t, r)
	require.NotNil(t, res.Failure)
	assert.Equal(t, "CanaryGateFailed", res.Failure.Reason)
	assert.Equal(t, "statefulset/chat-g0", res.Failure.Object)
	assert.NotContains(t, r.stderr, "wave 2 of 2")
	f.requireGroupOn(t, "chat-g0", rev2)
	assert.Equal(t, g1Before, podUIDs(f.groupPods(t, "chat-g1")))
	assert.NotEqual(t, rev1.Hash, groupRevision(t, f.history(t)[3], "chat-g1").Hash)
}

// TestGroupedReleaseInterrupted: a grouped upgrade interrupted (SIGINT)
// while its first wave loads is rolled back like a failed one: exit 130,
// the first group back on revision 1's ControllerRevision, the second
// never touched, no lock left; then kill -9 mid-wave leaves a pending
// record that --force-unlock takes over, and the same deploy completes
// both waves.
func TestGroupedReleaseInterrupted(t *testing.T) {
	f := newRelFixture(t)
	r := f.deployGroups(t)
	require.Equal(t, 0, r.code, "install\n%s", r)
	rev1 := map[string]storage.ControllerRevisionRef{}
	for _, name := range groupNames {
		rev1[name] = groupRevision(t, f.history(t)[0], name)
	}
	g1 := podUIDs(f.groupPods(t, "chat-g1"))

	slow := []string{"deploy", relName, "vllm", "--progress", "plain", "--timeout", "2m", "-o", "json"}
	slow = append(append(slow, groupValues...), "--set", "image.tag=v0.9.5", "--set-string", `podAnnotations.sim\.vllmctl\.io/ready-delay=60s`)
	p := f.start(t, slow...)
	p.waitProgress(t, "wave 1 of 2", "statefulset/chat-g0: ")
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	r = p.wait(t)
	require.Equal(t, 3, r.code, "interrupted, rolled back: %s", r)
	assert.NotContains(t, r.stderr, "wave 2 of 2")
	for _, name := range groupNames {
		f.requireGroupOn(t, name, rev1[name])
	}
	assert.Equal(t, g1, podUIDs(f.groupPods(t, "chat-g1")), "chat-g1 untouched")
	assert.Empty(t, pendingRecords(t, f), "no lock left behind")

	// kill -9 once the second wave is under way: the pending record is
	// left; --force-unlock takes it over and the deploy completes.
	fast := append(slices.Clone(slow[:len(slow)-2]), "--set-string", `podAnnotations.sim\.vllmctl\.io/ready-delay=1s`)
	p = f.start(t, fast...)
	p.waitProgress(t, "wave 2 of 2")
	require.NoError(t, p.cmd.Process.Kill())
	_ = p.cmd.Wait()
	require.NotEmpty(t, pendingRecords(t, f), "a killed deploy leaves its lock: %v\n%s", statuses(f.history(t)), p.stderr.String())
	r = f.run(t, append(fast, "--force-unlock")...)
	require.Equal(t, 0, r.code, "deploy after kill -9\n%s", r)
	last := f.history(t)
	rec := last[len(last)-1]
	assert.Equal(t, storage.StatusDeployed, rec.Status)
	for _, name := range groupNames {
		f.requireGroupOn(t, name, groupRevision(t, rec, name))
		assert.NotEqual(t, rev1[name].Hash, groupRevision(t, rec, name).Hash)
	}
	assert.Empty(t, pendingRecords(t, f))
}

// TestGroupedReleaseSurge: --max-surge 1 on a grouped upgrade first adds a
// temporary group on the new revision, so that a group's leader always
// serves beside the one being replaced (never fewer Ready leaders than
// groups), and deletes it once the upgrade ended; a crashing revision
// fails in the surge group itself, before any group is touched, and the
// surge group is deleted too.
func TestGroupedReleaseSurge(t *testing.T) {
	f := newRelFixture(t)
	r := f.deployGroups(t)
	require.Equal(t, 0, r.code, "install\n%s", r)

	// Count Ready leaders (pod index 0) of every StatefulSet, surge
	// groups included, at every pod change.
	var mu sync.Mutex
	ready := map[string]bool{}
	minReady, samples, synced := 99, 0, false
	stop := make(chan struct{})
	factory := informers.NewSharedInformerFactoryWithOptions(f.client, 0, informers.WithNamespace(f.namespace))
	inf := factory.Core().V1().Pods().Informer()
	note := func(obj any, gone bool) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Labels["apps.kubernetes.io/pod-index"] != "0" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		ready[p.Name] = !gone && p.DeletionTimestamp == nil && podIsReady(p)
		n := 0
		for _, r := range ready {
			if r {
				n++
			}
		}
		if synced {
			samples++
			if n < minReady {
				t.Logf("%s: %d Ready leader(s) after pod %s changed: %v", time.Now().Format("15:04:05.000"), n, p.Name, ready)
			}
			minReady = min(minReady, n)
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { note(obj, false) },
		UpdateFunc: func(_, obj any) { note(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			note(obj, true)
		},
	})
	require.NoError(t, err)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	// The handlers may not have seen the whole initial list yet: seed
	// the leaders from the synced store.
	for _, obj := range inf.GetStore().List() {
		note(obj, false)
	}
	mu.Lock()
	synced = true
	mu.Unlock()

	r = f.deployGroups(t, "--set", "image.tag=v0.9.2", "--max-surge", "1")
	close(stop)
	require.Equal(t, 0, r.code, "surge upgrade\n%s", r)
	assert.Contains(t, r.stderr, "temporary group(s) chat-g0-surge")
	mu.Lock()
	assert.GreaterOrEqual(t, minReady, 2, "Ready leaders never fewer than the groups (%d samples)", samples)
	mu.Unlock()
	sts, err := f.client.AppsV1().StatefulSets(f.namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, s := range sts.Items {
		names = append(names, s.Name)
	}
	assert.ElementsMatch(t, groupNames, names, "the surge group is gone")
	revs := f.history(t)
	for _, name := range groupNames {
		f.requireGroupOn(t, name, groupRevision(t, revs[1], name))
	}

	// A crashing revision fails in the surge group: no group touched.
	before := map[string][]string{}
	for _, name := range groupNames {
		before[name] = podUIDs(f.groupPods(t, name))
	}
	r = f.deployGroups(t, "--set", "image.tag=v0.9.2-crash", "--max-surge", "1")
	require.Equal(t, 3, r.code, "crashing surge upgrade\n%s", r)
	res := result(t, r)
	require.NotNil(t, res.Failure)
	assert.Equal(t, "statefulset/chat-g0-surge", res.Failure.Object)
	assert.NotContains(t, r.stderr, "wave 1 of 2", "no group touched")
	for _, name := range groupNames {
		assert.Equal(t, before[name], podUIDs(f.groupPods(t, name)), "%s untouched", name)
		f.requireGroupOn(t, name, groupRevision(t, revs[1], name))
	}
	eventually(t, 60*time.Second, "the surge group and its pods are gone", func(ctx context.Context) (bool, error) {
		_, err := f.client.AppsV1().StatefulSets(f.namespace).Get(ctx, "chat-g0-surge", metav1.GetOptions{})
		return err != nil && len(f.groupPods(t, "chat-g0-surge")) == 0, nil
	})
}
