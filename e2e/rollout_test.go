//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The rollout tests deploy the built-in vllm chart as release relName: two
// replicas of one GPU each, surging one pod and never going below two
// (maxSurge 1, maxUnavailable 0), with small cpu/memory requests so that
// they fit next to the other tests on the shared cluster's untainted nodes.
const rolloutReplicas = 2

// rolloutValues are the --set flags of every rollout test's release.
var rolloutValues = []string{
	"--set", "replicaCount=" + strconv.Itoa(rolloutReplicas),
	"--set", "strategy.maxSurge=1",
	"--set", "strategy.maxUnavailable=0",
	"--set", "resources.gpu=1",
	"--set", "resources.requests.cpu=100m",
	"--set", "resources.limits.cpu=100m",
	"--set", "resources.requests.memory=128Mi",
	"--set", "resources.limits.memory=128Mi",
	"--set", "shm.enabled=false",
}

// rolloutFault is a bad revision 2 and what its diagnosis must say.
type rolloutFault struct {
	name   string
	args   []string
	reason string
	check  func(t *testing.T, f *rollout.Diagnosis)
}

var rolloutFaults = []rolloutFault{
	{
		name:   "crash",
		args:   []string{"--set", "image.tag=v0.9.1-crash"},
		reason: "CrashLoopBackOff",
		check: func(t *testing.T, f *rollout.Diagnosis) {
			assert.Equal(t, "server", f.Container)
			assert.Equal(t, int32(1), f.ExitCode)
			assert.GreaterOrEqual(t, f.RestartCount, int32(2), "--max-restarts 2")
			assert.NotEmpty(t, f.LogTail)
		},
	},
	{
		name:   "oom",
		args:   []string{"--set", "image.tag=v0.9.1-oom"},
		reason: "OOMKilled",
		check: func(t *testing.T, f *rollout.Diagnosis) {
			assert.Equal(t, "server", f.Container)
			assert.Equal(t, int32(137), f.ExitCode)
		},
	},
	{
		name: "pullerr",
		args: []string{"--set", "image.tag=v0.9.1-pullerr"},
		// The pull verdict decides on either reason, whichever the pod
		// shows at the observation that decides (ErrImagePull, then
		// ImagePullBackOff between retries): it depends on timing.
		reason: "ImagePullBackOff|ErrImagePull",
		check: func(t *testing.T, f *rollout.Diagnosis) {
			assert.Equal(t, "server", f.Container)
			assert.Equal(t, rollout.VerdictImagePull, f.Verdict)
			assert.Contains(t, f.Message, "vllm/vllm-openai:v0.9.1-pullerr")
		},
	},
	{
		// No node has 16 GPUs. The preflight would refuse it (exit 2):
		// skip it to see the watcher's verdict.
		name:   "unschedulable",
		args:   []string{"--set", "resources.gpu=16", "--unschedulable-timeout", "5s", "--skip-preflight"},
		reason: "Unschedulable",
		check: func(t *testing.T, f *rollout.Diagnosis) {
			assert.Contains(t, f.Message, "Insufficient nvidia.com/gpu")
			assert.Contains(t, f.Message, "unschedulable for 5s")
		},
	},
}

// rolloutArgs are the arguments of a deploy of the vllm chart as relName.
// --surge-policy strict: a cluster too full for the surge pod refuses the
// deploy rather than silently switching to maxUnavailable 1.
func rolloutArgs(args ...string) []string {
	base := []string{"deploy", relName, "vllm", "--progress", "plain", "--timeout", "2m", "--surge-policy", "strict"}
	return append(append(base, rolloutValues...), args...)
}

// rolloutDeploy runs a deploy of the vllm chart and waits for it.
func (f *relFixture) rolloutDeploy(t *testing.T, args ...string) relRun {
	t.Helper()
	return f.run(t, rolloutArgs(args...)...)
}

// rolloutInstall deploys the good revision 1 and returns its result.
func (f *relFixture) rolloutInstall(t *testing.T, args ...string) *release.Result {
	t.Helper()
	r := f.rolloutDeploy(t, append(args, "-o", "json")...)
	require.Equal(t, 0, r.code, "revision 1\n%s", r)
	res := result(t, r)
	require.Equal(t, 1, res.Revision)
	require.Equal(t, storage.StatusDeployed, res.Status)
	require.Len(t, res.ReplicaSets, 1)
	return res
}

// readyDelay returns a values file setting the simulated readiness delay
// of the pods.
func readyDelay(t *testing.T, d time.Duration) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ready-delay.yaml")
	require.NoError(t, os.WriteFile(path, []byte("podAnnotations:\n  sim.vllmctl.io/ready-delay: "+d.String()+"\n"), 0o644))
	return []string{"-f", path}
}

// readyWatch counts the Ready, non-terminating pods matching a label
// selector with an informer (every change, not samples) and records the
// fewest seen while armed.
type readyWatch struct {
	mu      sync.Mutex
	last    int
	min     int
	armed   bool
	updates int
	store   cache.Store
	cancel  context.CancelFunc
	done    chan struct{}
}

// watchReady starts a readyWatch of the pods matching selector and arms it
// once want pods are Ready.
func (f *relFixture) watchReady(t *testing.T, selector string, want int) *readyWatch {
	t.Helper()
	pods := f.client.CoreV1().Pods(f.namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return pods.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, f.client), &corev1.Pod{}, 0, cache.Indexers{})
	w := &readyWatch{store: inf.GetStore(), done: make(chan struct{})}
	update := func(any) { w.update() }
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    update,
		UpdateFunc: func(_, obj any) { update(obj) },
		DeleteFunc: update,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.done)
		inf.RunWithContext(ctx)
	}()
	t.Cleanup(w.stop)
	eventually(t, 60*time.Second, "pods "+selector+" Ready", func(context.Context) (bool, error) {
		if !inf.HasSynced() {
			return false, nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.last != want {
			return false, nil
		}
		w.armed, w.min = true, w.last
		return true, nil
	})
	return w
}

func (w *readyWatch) update() {
	n := 0
	for _, obj := range w.store.List() {
		if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp == nil && podReady(p) {
			n++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = n
	w.updates++
	if w.armed {
		w.min = min(w.min, n)
	}
}

// stop ends the watch.
func (w *readyWatch) stop() {
	w.cancel()
	<-w.done
}

// assertKept stops the watch and checks that never fewer than
// replicas - maxUnavailable (= replicas) pods were Ready since it was armed.
func (w *readyWatch) assertKept(t *testing.T, what string) {
	t.Helper()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%s: fewest Ready %d (%d changes seen)", what, w.min, w.updates)
	assert.GreaterOrEqual(t, w.min, rolloutReplicas, "%s: fewest Ready pods during the episode (%d changes seen)", what, w.updates)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// hashSelector selects the pods of one ReplicaSet of the release.
func hashSelector(rs storage.ReplicaSetRef) string {
	return "app.kubernetes.io/instance=" + relName + ",pod-template-hash=" + rs.PodTemplateHash
}

// releaseSelector selects every pod of the release.
const releaseSelector = "app.kubernetes.io/instance=" + relName

// assertServing waits until the Deployment has rolled out to rs (and only
// rs): the ReplicaSet with rs's pod-template-hash is the Deployment's
// current one, with every replica Ready, and no other ReplicaSet has pods.
func (f *relFixture) assertServing(t *testing.T, rs storage.ReplicaSetRef) {
	t.Helper()
	f.assertServingWith(t, rs, rolloutReplicas, releaseSelector)
}

// assertServingWith is assertServing for a Deployment of replicas pods
// whose pods selector selects.
func (f *relFixture) assertServingWith(t *testing.T, rs storage.ReplicaSetRef, replicas int32, selector string) {
	t.Helper()
	var why string
	err := kwait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, relName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := d.Status
		if st.ObservedGeneration < d.Generation || st.Replicas != replicas || st.UpdatedReplicas != replicas ||
			st.ReadyReplicas != replicas || st.AvailableReplicas != replicas {
			why = "Deployment status " + deploymentStatus(d.Status)
			return false, nil
		}
		cur, err := f.client.AppsV1().ReplicaSets(f.namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cur.Labels["pod-template-hash"] != rs.PodTemplateHash {
			return false, nil
		}
		if cur.Annotations[cluster.RevisionAnnotation] != d.Annotations[cluster.RevisionAnnotation] {
			why = "ReplicaSet " + rs.Name + " is not the Deployment's current revision"
			return false, nil
		}
		if ptr.Deref(cur.Spec.Replicas, -1) != replicas || cur.Status.ReadyReplicas != replicas {
			why = "ReplicaSet " + rs.Name + " not scaled up and Ready"
			return false, nil
		}
		pods, err := f.client.CoreV1().Pods(f.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Labels["pod-template-hash"] != rs.PodTemplateHash {
				why = "pod " + p.Name + " of another ReplicaSet remains"
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "ReplicaSet %s (pod-template-hash %s) serving: %s", rs.Name, rs.PodTemplateHash, why)
}

func deploymentStatus(st appsv1.DeploymentStatus) string {
	return "replicas " + strconv.Itoa(int(st.Replicas)) + ", updated " + strconv.Itoa(int(st.UpdatedReplicas)) +
		", ready " + strconv.Itoa(int(st.ReadyReplicas)) + ", available " + strconv.Itoa(int(st.AvailableReplicas))
}

// assertRolledBack checks the records after revision 2 failed and was
// rolled back: 1 superseded, 2 failed with reason, 3 deployed "Rollback to
// 1" running revision 1's pod template. It returns revision 3.
func (f *relFixture) assertRolledBack(t *testing.T, rev1 *release.Result, reason string) *storage.Release {
	t.Helper()
	revs := f.history(t)
	require.Len(t, revs, 3)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusFailed, storage.StatusDeployed}, statuses(revs))
	if assert.NotNil(t, revs[1].Failure, "revision 2's diagnosis is recorded") {
		assertReason(t, reason, revs[1].Failure.Reason)
	}
	assert.Contains(t, revs[1].Description, "rolled back to 1")
	rb := revs[2]
	assert.Equal(t, "Rollback to 1", rb.Description)
	assert.Equal(t, 1, rb.RollbackOf)
	require.Len(t, rb.ReplicaSets, 1)
	assert.Equal(t, rev1.ReplicaSets[0].Name, rb.ReplicaSets[0].Name, "revision 1's ReplicaSet is reused")
	assert.Equal(t, rev1.ReplicaSets[0].PodTemplateHash, rb.ReplicaSets[0].PodTemplateHash)
	return rb
}

// assertReason checks a diagnosis' reason against want, which may list
// the reasons it may be, separated by "|".
func assertReason(t *testing.T, want, got string) {
	t.Helper()
	assert.Contains(t, strings.Split(want, "|"), got, "reason")
}

// assertBadRevision checks the result document of the failed revision 2.
func assertBadRevision(t *testing.T, res *release.Result, rev1 *release.Result, fault rolloutFault) {
	t.Helper()
	assert.Equal(t, 2, res.Revision)
	assert.Equal(t, storage.StatusFailed, res.Status)
	require.Len(t, res.ReplicaSets, 1)
	bad := res.ReplicaSets[0]
	assert.NotEqual(t, rev1.ReplicaSets[0].PodTemplateHash, bad.PodTemplateHash, "revision 2 has a ReplicaSet of its own")
	require.NotNil(t, res.Failure, "diagnosis")
	fl := res.Failure
	assertReason(t, fault.reason, fl.Reason)
	assert.Equal(t, "deployment/"+relName, fl.Object)
	assert.True(t, strings.HasPrefix(fl.Pod, bad.Name+"-"), "pod %q belongs to the new ReplicaSet %s", fl.Pod, bad.Name)
	fault.check(t, fl)
}

// TestRolloutFaultRollsBack: every fault class of a bad revision 2 is
// caught, diagnosed and rolled back to revision 1, whose pods keep serving
// throughout (never fewer Ready than replicas - maxUnavailable).
func TestRolloutFaultRollsBack(t *testing.T) {
	shareCluster(t, 4)
	for _, fault := range rolloutFaults {
		t.Run(fault.name, func(t *testing.T) {
			f := newRelFixture(t)
			rev1 := f.rolloutInstall(t)
			old := f.watchReady(t, hashSelector(rev1.ReplicaSets[0]), rolloutReplicas)

			start := time.Now()
			r := f.rolloutDeploy(t, append(fault.args, "-o", "json")...)
			took := time.Since(start)
			require.Equal(t, 3, r.code, "%s", r)
			t.Logf("%s: exit 3 after %s", fault.name, took.Round(100*time.Millisecond))
			res := result(t, r)
			assertBadRevision(t, res, rev1, fault)
			assert.Equal(t, 1, res.RolledBackTo)
			assert.Contains(t, r.stderr, "rolled back to revision 1")
			assert.Contains(t, r.stderr, relName+"#3 done: deployed: Rollback to 1")

			f.assertRolledBack(t, rev1, fault.reason)
			f.assertServing(t, rev1.ReplicaSets[0])
			old.assertKept(t, "revision 1's pods")
		})
	}
}

// TestRolloutFaultNoRollback: with --no-rollback the bad revision is
// recorded failed, nothing else is written, and revision 1's pods still
// serve next to the bad one.
func TestRolloutFaultNoRollback(t *testing.T) {
	shareCluster(t, 4)
	ctx := context.Background()
	for _, fault := range rolloutFaults {
		t.Run(fault.name, func(t *testing.T) {
			f := newRelFixture(t)
			rev1 := f.rolloutInstall(t)
			old := f.watchReady(t, hashSelector(rev1.ReplicaSets[0]), rolloutReplicas)

			r := f.rolloutDeploy(t, append(fault.args, "--no-rollback", "-o", "json")...)
			require.Equal(t, 4, r.code, "%s", r)
			res := result(t, r)
			assertBadRevision(t, res, rev1, fault)
			assert.Zero(t, res.RolledBackTo)
			assert.NotContains(t, r.stderr, "uninstall", "an upgrade has a revision to go back to")

			revs := f.history(t)
			require.Len(t, revs, 2, "no new revision")
			assert.Equal(t, []storage.Status{storage.StatusDeployed, storage.StatusFailed}, statuses(revs))
			if assert.NotNil(t, revs[1].Failure) {
				assertReason(t, fault.reason, revs[1].Failure.Reason)
			}
			assert.Equal(t, rev1.ReplicaSets, revs[0].ReplicaSets)

			// The Deployment is left on revision 2's template; revision 1's
			// ReplicaSet keeps its replicas.
			bad, err := f.client.AppsV1().ReplicaSets(f.namespace).Get(ctx, res.ReplicaSets[0].Name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, int32(1), ptr.Deref(bad.Spec.Replicas, -1), "the surge pod of revision 2 is left")
			good, err := f.client.AppsV1().ReplicaSets(f.namespace).Get(ctx, rev1.ReplicaSets[0].Name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, int32(rolloutReplicas), ptr.Deref(good.Spec.Replicas, -1))
			assert.Equal(t, int32(rolloutReplicas), good.Status.ReadyReplicas)
			old.assertKept(t, "revision 1's pods")
		})
	}
}

// TestRolloutFirstInstallFails: a failed install has nothing to roll back
// to: exit 4, its objects are left for inspection, and the error says how to
// remove them.
func TestRolloutFirstInstallFails(t *testing.T) {
	shareCluster(t, 4)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"rollback on", nil},
		{"no rollback", []string{"--no-rollback"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRelFixture(t)
			r := f.rolloutDeploy(t, append(tc.args, "--set", "image.tag=v0.9.1-crash", "-o", "json")...)
			require.Equal(t, 4, r.code, "%s", r)
			res := result(t, r)
			assert.Equal(t, 1, res.Revision)
			assert.Equal(t, storage.StatusFailed, res.Status)
			assert.Zero(t, res.RolledBackTo)
			if assert.NotNil(t, res.Failure) {
				assert.Equal(t, "CrashLoopBackOff", res.Failure.Reason)
			}
			assert.Equal(t, []storage.Status{storage.StatusFailed}, statuses(f.history(t)))

			uninstall := "vllmctl uninstall " + relName + " -n " + f.namespace
			assert.Contains(t, r.stderr, "left in place")
			assert.Contains(t, r.stderr, uninstall, "the error says how to remove what the install left")

			_, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, relName, metav1.GetOptions{})
			require.NoError(t, err, "the Deployment is left")
			_, err = f.client.CoreV1().Services(f.namespace).Get(ctx, relName, metav1.GetOptions{})
			require.NoError(t, err, "the Service is left")

			// The advertised command works.
			u := f.run(t, "uninstall", relName)
			require.Equal(t, 0, u.code, "%s", u)
			f.gone(t, "Deployment", relName)
			_, err = f.client.CoreV1().Services(f.namespace).Get(ctx, relName, metav1.GetOptions{})
			assert.True(t, apierrors.IsNotFound(err), "Service deleted: %v", err)
		})
	}
}

// TestRolloutSlowButHealthy: pods that take longer to become Ready than a
// crash takes to be caught are no failure.
func TestRolloutSlowButHealthy(t *testing.T) {
	shareCluster(t, 4)
	const delay = 8 * time.Second
	for _, tc := range []struct {
		name    string
		upgrade bool
		// least is the shortest the rollout can take: the pods of an
		// install start together, an upgrade replaces them one at a time.
		least time.Duration
	}{
		{"install", false, delay},
		{"upgrade", true, 2 * delay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRelFixture(t)
			var want []storage.Status
			var serving *readyWatch
			if tc.upgrade {
				f.rolloutInstall(t)
				serving = f.watchReady(t, releaseSelector, rolloutReplicas)
				want = append(want, storage.StatusSuperseded)
			}
			want = append(want, storage.StatusDeployed)

			r := f.rolloutDeploy(t, append(readyDelay(t, delay), "--set", "image.tag=v0.11.1", "-o", "json")...)
			require.Equal(t, 0, r.code, "%s", r)
			res := result(t, r)
			assert.Equal(t, storage.StatusDeployed, res.Status)
			assert.Nil(t, res.Failure)
			assert.GreaterOrEqual(t, res.DurationSeconds, tc.least.Seconds()-1, "the wait lasted the ready delays")
			assert.NotContains(t, r.stderr, "failed", "no false verdict")
			assert.NotContains(t, r.stderr, "rollback")
			assert.Equal(t, want, statuses(f.history(t)))
			require.Len(t, res.ReplicaSets, 1)
			f.assertServing(t, res.ReplicaSets[0])
			if serving != nil {
				serving.assertKept(t, "the release's pods")
			}
			t.Logf("%s with ready-delay %s: %.1fs", tc.name, delay, res.DurationSeconds)
		})
	}
}

// progressLog is a child's stderr, readable while the child writes it.
type progressLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (p *progressLog) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Write(b)
}

func (p *progressLog) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

// running is a vllmctl process started in the background.
type running struct {
	cmd    *exec.Cmd
	stdout *bytes.Buffer
	stderr *progressLog
	cancel context.CancelFunc
}

// start starts vllmctl args without waiting for it.
func (f *relFixture) start(t *testing.T, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	cmd, stdout, _ := f.command(ctx, args...)
	stderr := &progressLog{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	p := &running{cmd: cmd, stdout: stdout, stderr: stderr, cancel: cancel}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return p
}

// waitProgress waits until the process has printed a line containing each
// of marks, in order.
func (p *running) waitProgress(t *testing.T, marks ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := p.stderr.String()
		rest, ok := s, true
		for _, m := range marks {
			i := strings.Index(rest, m)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(m):]
		}
		if ok {
			return
		}
		require.True(t, time.Now().Before(deadline), "progress %q not printed; stderr:\n%s", marks, s)
		time.Sleep(50 * time.Millisecond)
	}
}

// progressEvents are the --progress json events of stderr, in order.
func progressEvents(stderr string) []release.ProgressEvent {
	var out []release.ProgressEvent
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var ev release.ProgressEvent
		if strings.HasPrefix(sc.Text(), "{") && json.Unmarshal(sc.Bytes(), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out
}

// waitEvent waits until the process has printed a --progress json event
// that match accepts (what names it), and returns the first one.
func (p *running) waitEvent(t *testing.T, what string, match func(release.ProgressEvent) bool) release.ProgressEvent {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := p.stderr.String()
		for _, ev := range progressEvents(s) {
			if match(ev) {
				return ev
			}
		}
		require.True(t, time.Now().Before(deadline), "progress event %s not printed; stderr:\n%s", what, s)
		time.Sleep(50 * time.Millisecond)
	}
}

// wait waits for the process to exit.
func (p *running) wait(t *testing.T) relRun {
	t.Helper()
	code := exitCodeOf(t, p.cmd.Wait())
	p.cancel()
	return relRun{stdout: p.stdout.String(), stderr: p.stderr.String(), code: code}
}

// waitMarks are the progress lines after which a deploy is waiting for the
// rollout of revision 2: its ReplicaSet recorded, then the watcher's view.
var waitMarks = []string{relName + "#2 apply: apps/v1 Deployment", relName + "#2 replicaset:", "deployment/" + relName + ": "}

// TestRolloutInterrupted: SIGINT while a bad (or merely slow) revision
// rolls out stops the wait and still rolls back to revision 1: exit 3,
// consistent records, revision 1 serving throughout.
func TestRolloutInterrupted(t *testing.T) {
	shareCluster(t, 4)
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		// --max-restarts 100: only the interrupt can end this rollout.
		{"crashing", func(*testing.T) []string {
			return []string{"--set", "image.tag=v0.9.1-crash", "--max-restarts", "100"}
		}},
		{"slow", func(t *testing.T) []string { return append(readyDelay(t, time.Minute), "--set", "image.tag=v0.11.1") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRelFixture(t)
			rev1 := f.rolloutInstall(t)
			old := f.watchReady(t, hashSelector(rev1.ReplicaSets[0]), rolloutReplicas)

			p := f.start(t, rolloutArgs(append(tc.args(t), "-o", "json")...)...)
			p.waitProgress(t, waitMarks...)
			time.Sleep(time.Second)
			require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
			r := p.wait(t)

			require.Equal(t, 3, r.code, "%s", r)
			res := result(t, r)
			assert.Equal(t, 2, res.Revision)
			assert.Equal(t, storage.StatusFailed, res.Status)
			assert.Equal(t, 1, res.RolledBackTo)
			if assert.NotNil(t, res.Failure) {
				assert.Equal(t, "Interrupted", res.Failure.Reason)
			}
			assert.Contains(t, r.stderr, relName+"#3 done: deployed: Rollback to 1")
			f.assertRolledBack(t, rev1, "Interrupted")
			f.assertServing(t, rev1.ReplicaSets[0])
			assert.Empty(t, pendingRecords(t, f), "no lock left behind")
			old.assertKept(t, "revision 1's pods")
		})
	}
}

func pendingRecords(t *testing.T, f *relFixture) []*storage.Release {
	t.Helper()
	p, err := storage.Pending(context.Background(), f.store, relName)
	require.NoError(t, err)
	return p
}
