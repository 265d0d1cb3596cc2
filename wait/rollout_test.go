// Tests of RolloutWatcher against a fake clientset: verdicts, success,
// timeout, cancellation, other objects, watch failures.

package wait

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

const depUID = types.UID("dep-uid")

func testDeployment(image string) *appsv1.Deployment {
	labels := map[string]string{"app": "chat"}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: ns, UID: depUID, Generation: 2},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: image,
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}},
			},
		},
		// Mid-rollout: the new ReplicaSet has 1 pod, the old one 2.
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2},
	}
}

func testReplicaSet(d *appsv1.Deployment, hash, image string, replicas int32) *appsv1.ReplicaSet {
	tmpl := d.Spec.Template.DeepCopy()
	tmpl.Labels = map[string]string{"app": "chat", podTemplateHashLabel: hash}
	tmpl.Spec.Containers[0].Image = image
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "chat-" + hash, Namespace: ns, UID: types.UID("rs-" + hash), Labels: tmpl.Labels,
			Annotations:     map[string]string{deploymentRevisionAnnotKey: "2"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}},
		},
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: *tmpl},
		Status: appsv1.ReplicaSetStatus{Replicas: replicas},
	}
}

func testPod(rs *appsv1.ReplicaSet, suffix string, statuses ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: rs.Name + "-" + suffix, Namespace: ns, UID: types.UID(rs.Name + "-" + suffix), Labels: rs.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}},
		},
		Spec:   corev1.PodSpec{NodeName: "gpu-node-1", Containers: rs.Spec.Template.Spec.Containers},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: statuses},
	}
}

func testEvent(name, kind, objName string, uid types.UID, typ, reason, msg string, at time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name)},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: objName, UID: uid},
		Type:           typ, Reason: reason, Message: msg, Count: 1,
		LastTimestamp: metav1.NewTime(at),
	}
}

func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	return &unstructured.Unstructured{Object: m}
}

// harness runs a RolloutWatcher over a fake clientset and a fake clock.
type harness struct {
	t      *testing.T
	client *fake.Clientset
	clock  *testingclock.FakeClock
	d      *appsv1.Deployment
	newRS  *appsv1.ReplicaSet
	oldRS  *appsv1.ReplicaSet

	mu     sync.Mutex
	events []rollout.Event
	// idles records, for each time the run loop went idle (evaluated,
	// and waiting for news), how many events it had sent by then.
	idles  []int
	done   chan struct{}
	res    Result
	err    error
	cancel context.CancelFunc
	logs   []*corev1.PodLogOptions
	// watching counts, per resource, the watches the fake serves: an
	// object created before its informer's watch is registered (after
	// its list) would never reach the watcher, as the fake does not
	// replay from a resource version.
	watching map[string]int
}

type harnessOptions struct {
	rollout RolloutOptions
	wait    Options
	others  Waiter
	extra   []*unstructured.Unstructured
	objects []runtime.Object // besides the Deployment and its ReplicaSets
	logs    func(opts *corev1.PodLogOptions) (string, error)
	setup   func(c *fake.Clientset) // before the watcher starts
	// dyn, when set, is the watcher's dynamic client (LeaderWorkerSets).
	dyn dynamic.Interface
}

func startHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	h := &harness{t: t, clock: testingclock.NewFakeClock(t0), done: make(chan struct{})}
	h.d = testDeployment("vllm/vllm-openai:v0.9.1")
	h.newRS = testReplicaSet(h.d, "new", "vllm/vllm-openai:v0.9.1", 1)
	h.oldRS = testReplicaSet(h.d, "old", "vllm/vllm-openai:v0.9.0", 2)
	objs := append([]runtime.Object{h.d, h.newRS, h.oldRS}, o.objects...)
	h.client = fake.NewClientset(objs...)
	h.watching = map[string]int{}
	h.client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := h.client.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		h.mu.Lock()
		h.watching[a.GetResource().Resource]++
		h.mu.Unlock()
		return true, w, nil
	})
	h.client.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "log" {
			return false, nil, nil
		}
		opts := a.(k8stesting.GenericActionImpl).Value.(*corev1.PodLogOptions)
		h.mu.Lock()
		h.logs = append(h.logs, opts.DeepCopy())
		h.mu.Unlock()
		if o.logs == nil {
			return true, &runtime.Unknown{Raw: []byte("INFO starting\nTraceback (most recent call last):\nRuntimeError: Engine core initialization failed. See root cause above.\n")}, nil
		}
		s, err := o.logs(opts)
		return true, &runtime.Unknown{Raw: []byte(s)}, err
	})

	if o.setup != nil {
		o.setup(h.client)
	}
	o.rollout.Clock = h.clock
	idle := make(chan struct{})
	o.rollout.idle = func() { idle <- struct{}{} }
	w := NewRolloutWatcher(h.client, o.others, o.rollout)
	if o.dyn != nil {
		w.WithDynamicClient(o.dyn)
	}
	events := make(chan rollout.Event)
	o.wait.Events = events
	if o.wait.Namespace == "" {
		o.wait.Namespace = ns
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	t.Cleanup(cancel)
	dep := toUnstructured(t, h.d)
	dep.SetNamespace("") // as rendered: the wait's namespace applies
	in := append([]*unstructured.Unstructured{dep}, o.extra...)
	// One goroutine receives both the events and the loop's idle signals,
	// so that an idle is recorded after every event sent before it.
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case e, ok := <-events:
				if !ok {
					return
				}
				h.mu.Lock()
				h.events = append(h.events, e)
				h.mu.Unlock()
			case <-idle:
				h.mu.Lock()
				h.idles = append(h.idles, len(h.events))
				h.mu.Unlock()
			}
		}
	}()
	go func() {
		defer close(h.done)
		h.res, h.err = w.Wait(ctx, in, o.wait)
		<-collected
	}()
	return h
}

// await waits until an event satisfies pred.
func (h *harness) await(what string, pred func(rollout.Event) bool) rollout.Event {
	h.t.Helper()
	var found rollout.Event
	require.Eventually(h.t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, e := range h.events {
			if pred(e) {
				found = e
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "waiting for %s; events:\n%s", what, h.eventLines())
	return found
}

// awaitIdleAfter waits until the run loop, having sent an event that
// satisfies pred, went idle (the evaluation that sent it did not end the
// wait, and the loop waits for news), or until Wait returned (which the
// caller's check of h.running() then reports).
func (h *harness) awaitIdleAfter(what string, pred func(rollout.Event) bool) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		if !h.running() {
			return true
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		first := slices.IndexFunc(h.events, pred)
		return first >= 0 && slices.ContainsFunc(h.idles, func(sent int) bool { return sent > first })
	}, 10*time.Second, time.Millisecond, "waiting for the loop to go idle after %s; events:\n%s", what, h.eventLines())
}

func (h *harness) eventLines() string {
	var b strings.Builder
	for _, e := range h.eventsCopy() {
		b.WriteString(eventLine(e))
		if e.Rollout != nil && e.Rollout.Warning != "" {
			b.WriteString(" [warning: " + e.Rollout.Warning + "]")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (h *harness) eventsCopy() []rollout.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]rollout.Event(nil), h.events...)
}

func (h *harness) warned(substr string) func(rollout.Event) bool {
	return func(e rollout.Event) bool { return e.Rollout != nil && strings.Contains(e.Rollout.Warning, substr) }
}

// result waits for Wait to return.
func (h *harness) result() (Result, error) {
	h.t.Helper()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		h.t.Fatalf("Wait did not return; events:\n%s", h.eventLines())
	}
	return h.res, h.err
}

// running reports whether Wait is still running.
func (h *harness) running() bool {
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

func (h *harness) createPod(p *corev1.Pod) {
	h.t.Helper()
	h.awaitWatch("pods")
	_, err := h.client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	require.NoError(h.t, err)
}

func (h *harness) updatePod(p *corev1.Pod) {
	h.t.Helper()
	h.awaitWatch("pods")
	_, err := h.client.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(h.t, err)
}

func (h *harness) updateDeployment(mutate func(d *appsv1.Deployment)) {
	h.t.Helper()
	h.awaitWatch("deployments")
	d, err := h.client.AppsV1().Deployments(ns).Get(context.Background(), "chat", metav1.GetOptions{})
	require.NoError(h.t, err)
	mutate(d)
	_, err = h.client.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
	require.NoError(h.t, err)
}

func (h *harness) updateReplicaSet(name string, mutate func(rs *appsv1.ReplicaSet)) {
	h.t.Helper()
	h.awaitWatch("replicasets")
	rs, err := h.client.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(h.t, err)
	mutate(rs)
	_, err = h.client.AppsV1().ReplicaSets(ns).Update(context.Background(), rs, metav1.UpdateOptions{})
	require.NoError(h.t, err)
}

func (h *harness) createEvent(e *corev1.Event) {
	h.t.Helper()
	h.awaitWatch("events")
	_, err := h.client.CoreV1().Events(ns).Create(context.Background(), e, metav1.CreateOptions{})
	require.NoError(h.t, err)
}

// awaitWatch waits until the fake serves a watch of resource, so that
// what is created next reaches the watcher's informer.
func (h *harness) awaitWatch(resource string) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.watching[resource] > 0
	}, 10*time.Second, time.Millisecond, "waiting for a watch of %s", resource)
}

// progressed waits until the watcher has reported the new ReplicaSet
// (its pods are being watched from then on).
func (h *harness) progressed() {
	h.t.Helper()
	h.await("the new ReplicaSet", func(e rollout.Event) bool { return e.Rollout != nil && e.Rollout.NewReplicaSet == "chat-new" })
}

func rolledOut(d *appsv1.Deployment) {
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
}

func crashLoopStatus(restarts int32) corev1.ContainerStatus {
	return waiting("vllm", "CrashLoopBackOff", restarts, terminated("Error", 1, fmt.Sprintf("sim://c/%d", restarts)))
}

// requireFailure checks a failed wait's outcome, error and diagnosis.
func requireFailure(t *testing.T, res Result, err error, v rollout.Verdict) *rollout.Diagnosis {
	t.Helper()
	require.Error(t, err)
	var rfe *RolloutFailedError
	require.ErrorAs(t, err, &rfe)
	require.ErrorIs(t, err, ErrFailed)
	var nre *NotReadyError
	require.ErrorAs(t, err, &nre, "the NotReadyError is wrapped")
	assert.Equal(t, OutcomeFailed, res.Outcome)
	require.NotNil(t, res.Diagnosis)
	assert.Same(t, res.Diagnosis, rfe.Diagnosis)
	assert.Equal(t, v, res.Diagnosis.Verdict)
	assert.Equal(t, "deployment/chat", res.Diagnosis.Object)
	require.Len(t, res.Objects, 1)
	assert.Equal(t, rollout.StatusFailed, res.Objects[0].Status)
	assert.Contains(t, err.Error(), "rollout of deployment/chat failed: ")
	return res.Diagnosis
}

// TestRolloutWatcherVerdicts drives the pods of the new ReplicaSet through
// each failure class and checks the verdict and its diagnosis.
func TestRolloutWatcherVerdicts(t *testing.T) {
	cases := []struct {
		name    string
		opts    harnessOptions
		drive   func(h *harness)
		verdict rollout.Verdict
		check   func(t *testing.T, h *harness, d *rollout.Diagnosis)
	}{
		{
			name: "CrashLoopBackOff after 2 restarts, with events and the previous log",
			drive: func(h *harness) {
				p := testPod(h.newRS, "a", running("vllm", 0))
				h.createPod(p)
				h.progressed()
				p.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoopStatus(1)}
				h.updatePod(p)
				h.createEvent(testEvent("ev1", "Pod", p.Name, p.UID, "Warning", "BackOff", "Back-off restarting failed container", t0))
				h.await("the first restart", h.warned("CrashLoopBackOff (restarts 1/2)"))
				h.await("the BackOff event", h.warned("Warning BackOff: Back-off restarting failed container"))
				assert.True(h.t, h.running(), "one restart is not a verdict")
				p.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoopStatus(2)}
				h.updatePod(p)
			},
			verdict: rollout.VerdictCrashLoop,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "CrashLoopBackOff", d.Reason)
				assert.Equal(t, "chat-new-a", d.Pod)
				assert.Equal(t, "gpu-node-1", d.Node)
				assert.Equal(t, "vllm", d.Container)
				assert.Equal(t, int32(1), d.ExitCode)
				assert.Equal(t, int32(2), d.RestartCount)
				assert.Equal(t, []string{"Warning BackOff: Back-off restarting failed container"}, d.Events)
				assert.Contains(t, d.LogTail, "RuntimeError: Engine core initialization failed. See root cause above.")
				assert.Empty(t, d.LogNote)
				require.Len(t, h.logs, 3, "the first termination's log, read once; then the diagnosis: the previous log names no cause, so the current one is read too")
				assert.True(t, h.logs[0].Previous, "the first termination's log names no decisive cause")
				assert.True(t, h.logs[1].Previous)
				assert.False(t, h.logs[2].Previous)
				assert.Equal(t, int64(causeLogLines), *h.logs[1].TailLines, "more lines than shown, for the classifier")
				assert.Equal(t, causeLogBytes, *h.logs[1].LimitBytes)
				assert.Equal(t, "vllm", h.logs[1].Container)
				assert.Equal(t, vllmcause.CauseUnknown, d.Cause)
				assert.Empty(t, d.Evidence)
				assert.Contains(t, strings.Join(d.Hints, "\n"), "--previous", "the generic hints")
			},
		},
		{
			name: "CrashLoopBackOff with a known cause: the cause, its evidence and hints, in the last event too",
			opts: harnessOptions{logs: func(o *corev1.PodLogOptions) (string, error) {
				return "INFO 10-21 00:33:33 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-32B...\n" +
					"(EngineCore_DP0 pid=268) ERROR 10-21 00:34:15 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB.\n" +
					"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n", nil
			}},
			drive: func(h *harness) {
				h.createPod(testPod(h.newRS, "a", crashLoopStatus(2)))
			},
			verdict: rollout.VerdictCrashLoop,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
				assert.Equal(t, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 270.00 MiB.", d.Evidence)
				assert.Contains(t, d.Hints[0], "`--gpu-memory-utilization`")
				assert.NotContains(t, strings.Join(d.Hints, "\n"), "kubectl logs", "the cause's hints replace the generic ones")
				assert.Contains(t, d.Summary(), "CrashLoopBackOff (cause gpu-oom): pod chat-new-a")
				require.Len(t, h.logs, 1, "the previous log named the cause: nothing more is read")
				last := h.events[len(h.events)-1].Rollout // h.mu is held
				assert.Equal(t, vllmcause.CauseGPUOOM, last.Cause)
				assert.Equal(t, d.Evidence, last.Evidence)
				assert.Equal(t, d.Hints, last.Hints)
			},
		},
		{
			name: "OOMKilled at once, exit code 137",
			drive: func(h *harness) {
				h.createPod(testPod(h.newRS, "a", corev1.ContainerStatus{Name: "vllm", State: corev1.ContainerState{Terminated: terminated("OOMKilled", 137, "c0")}}))
			},
			verdict: rollout.VerdictOOMKilled,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "OOMKilled", d.Reason)
				assert.Equal(t, int32(137), d.ExitCode)
				assert.Equal(t, "vllm", d.Container)
				hints := strings.Join(d.Hints, "\n")
				assert.Contains(t, hints, "memory limit")
				assert.Contains(t, hints, "/dev/shm")
				assert.Contains(t, hints, "loads the weights")
			},
		},
		{
			name: "image pull errors after 2 observations",
			drive: func(h *harness) {
				p := testPod(h.newRS, "a", waiting("vllm", "ErrImagePull", 0, nil))
				p.Status.Phase = corev1.PodPending
				h.createPod(p)
				h.await("the pull error", h.warned("ErrImagePull"))
				assert.True(h.t, h.running(), "one observation is not a verdict")
				p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("vllm", "ImagePullBackOff", 0, nil)}
				h.updatePod(p)
			},
			verdict: rollout.VerdictImagePull,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "ImagePullBackOff", d.Reason)
				assert.Empty(t, d.LogTail)
				assert.Equal(t, "container vllm never started: there are no logs", d.LogNote)
				assert.Empty(t, h.logs, "no logs asked of a container that never ran")
				hints := strings.Join(d.Hints, "\n")
				assert.Contains(t, hints, "vllm/vllm-openai:v0.9.1")
				assert.Contains(t, hints, "imagePullSecrets")
			},
		},
		{
			name: "CreateContainerConfigError at once",
			drive: func(h *harness) {
				h.createPod(testPod(h.newRS, "a", waiting("vllm", "CreateContainerConfigError", 0, nil)))
			},
			verdict: rollout.VerdictContainerError,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "CreateContainerConfigError", d.Reason)
				assert.Equal(t, "CreateContainerConfigError message", d.Message)
			},
		},
		{
			// The informer keeps a slim copy of the pod, without its
			// resources: the GPU hint proves the diagnosis read the pod.
			name: "unschedulable: the diagnosis reads the pod's whole spec",
			opts: harnessOptions{rollout: RolloutOptions{UnschedulableTimeout: 5 * time.Second}},
			drive: func(h *harness) {
				p := unschedulablePod()
				p.Name, p.UID, p.Labels, p.OwnerReferences = "chat-new-a", "chat-new-a", h.newRS.Spec.Template.Labels, testPod(h.newRS, "a").OwnerReferences
				p.Spec.Containers = []corev1.Container{{Name: "vllm", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}
				p.Status.Conditions[0].Message = "0/2 nodes are available: 2 Insufficient cpu."
				h.createPod(p)
				h.awaitIdleAfter("unschedulable", h.warned("Unschedulable"))
				require.Eventually(h.t, h.clock.HasWaiters, 5*time.Second, time.Millisecond)
				h.clock.Step(6 * time.Second)
			},
			verdict: rollout.VerdictUnschedulable,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "chat-new-a", d.Pod)
				assert.Contains(t, d.Message, "Insufficient cpu")
				assert.Contains(t, strings.Join(d.Hints, "\n"), "GPU capacity")
			},
		},
		{
			name: "unschedulable longer than UnschedulableTimeout, by the clock",
			opts: harnessOptions{rollout: RolloutOptions{UnschedulableTimeout: 5 * time.Second}},
			drive: func(h *harness) {
				p := unschedulablePod()
				p.Name, p.UID, p.Labels, p.OwnerReferences = "chat-new-a", "chat-new-a", h.newRS.Spec.Template.Labels, testPod(h.newRS, "a").OwnerReferences
				h.createPod(p)
				// One input at a time, each judged before the next: the
				// pod's condition, then the scheduler's event (a clock
				// step while an evaluation is under way would land in its
				// settle pause instead).
				h.awaitIdleAfter("unschedulable", h.warned("Unschedulable"))
				h.createEvent(testEvent("ev1", "Pod", p.Name, p.UID, "Warning", "FailedScheduling", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", t0))
				h.awaitIdleAfter("the scheduler's event", h.warned("Warning FailedScheduling"))
				require.Eventually(h.t, h.clock.HasWaiters, 5*time.Second, time.Millisecond)
				h.clock.Step(4 * time.Second)
				// An old pod's warning makes the loop evaluate at 4s;
				// going idle after reporting it, it reached no verdict.
				h.createEvent(testEvent("ev-old", "Pod", "chat-old-x", "chat-old-x", "Warning", "Unhealthy", "Readiness probe failed", h.clock.Now()))
				h.awaitIdleAfter("the old pod's warning", h.warned("pod chat-old-x (old ReplicaSet chat-old)"))
				assert.True(h.t, h.running(), "4s of 5s is not a verdict")
				h.clock.Step(2 * time.Second)
			},
			verdict: rollout.VerdictUnschedulable,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "Unschedulable", d.Reason)
				assert.Equal(t, "chat-new-a", d.Pod)
				assert.Empty(t, d.Node)
				assert.Contains(t, d.Message, "Insufficient nvidia.com/gpu")
				assert.Equal(t, []string{"Warning FailedScheduling: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}, d.Events)
				assert.Equal(t, "the pod was never scheduled: there are no logs", d.LogNote)
				hints := strings.Join(d.Hints, "\n")
				assert.Contains(t, hints, "GPU capacity")
				assert.Contains(t, hints, "tolerations")
				assert.Contains(t, hints, "ResourceQuota")
			},
		},
		{
			name: "ProgressDeadlineExceeded, with the suspect pod",
			drive: func(h *harness) {
				p := testPod(h.newRS, "a", running("vllm", 0))
				h.createPod(p)
				h.progressed()
				// The pods' and the Deployment's informers deliver in no
				// set order: the condition comes once the pod is known.
				h.await("the pod", func(e rollout.Event) bool { return e.Rollout != nil && len(e.Rollout.Pods) == 1 })
				h.updateDeployment(func(d *appsv1.Deployment) {
					d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
						Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "chat-new" has timed out progressing.`}}
				})
			},
			verdict: rollout.VerdictProgressDeadlineExceeded,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "ProgressDeadlineExceeded", d.Reason)
				assert.Contains(t, d.Message, `ReplicaSet "chat-new" has timed out progressing.`)
				assert.Contains(t, d.Message, "pod chat-new-a container vllm: ContainersNotReady")
				assert.Equal(t, "chat-new-a", d.Pod)
				assert.Contains(t, strings.Join(d.Hints, "\n"), "progressDeadlineSeconds")
			},
		},
		{
			name: "FailedCreate: the ReplicaFailure condition of the new ReplicaSet",
			drive: func(h *harness) {
				h.progressed()
				h.updateReplicaSet("chat-new", func(rs *appsv1.ReplicaSet) {
					rs.Status.Replicas = 0
					rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
						Message: `pods "chat-new-x" is forbidden: error looking up service account llm/vllm: serviceaccount "vllm" not found`}}
				})
			},
			verdict: rollout.VerdictFailedCreate,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Equal(t, "FailedCreate", d.Reason)
				assert.Contains(t, d.Message, "ReplicaSet chat-new: ")
				assert.Contains(t, d.Message, `serviceaccount "vllm" not found`)
				assert.Contains(t, strings.Join(d.Hints, "\n"), "kubectl describe rs -n llm")
			},
		},
		{
			name: "FailedCreate: a quota event on the new ReplicaSet while it lacks pods, once settled",
			drive: func(h *harness) {
				h.progressed()
				h.updateReplicaSet("chat-new", func(rs *appsv1.ReplicaSet) {
					rs.Status.Replicas = 0
					rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate",
						Message: `pods "chat-new-x" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2`}}
				})
				h.createEvent(testEvent("ev1", "ReplicaSet", "chat-new", "rs-new", "Warning", "FailedCreate",
					`Error creating: pods "chat-new-x" is forbidden: exceeded quota: gpu`, t0))
				h.awaitIdleAfter("the first refusal", h.warned(`"chat-new-x" is forbidden`))
				assert.True(h.t, h.running(), "a quota refusal right at the start may be stale")
				h.clock.Step(quotaSettle)
				h.createEvent(testEvent("ev2", "ReplicaSet", "chat-new", "rs-new", "Warning", "FailedCreate",
					`Error creating: pods "chat-new-y" is forbidden: exceeded quota: gpu`, t0.Add(quotaSettle)))
			},
			verdict: rollout.VerdictFailedCreate,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Contains(t, d.Message, `"chat-new-y" is forbidden: exceeded quota`)
				assert.Contains(t, strings.Join(d.Hints, "\n"), "kubectl describe quota -n llm")
				assert.Contains(t, d.Events, `Warning FailedCreate: Error creating: pods "chat-new-y" is forbidden: exceeded quota: gpu`)
			},
		},
		{
			name: "FailedCreate: a quota refusal while old pods go away waits for them",
			drive: func(h *harness) {
				h.progressed()
				refuse := func(name string, n int) {
					msg := fmt.Sprintf(`Error creating: pods "chat-new-%d" is forbidden: exceeded quota: gpu`, n)
					h.createEvent(testEvent(name, "ReplicaSet", "chat-new", "rs-new", "Warning", "FailedCreate", msg, h.clock.Now()))
					h.awaitIdleAfter(name, h.warned(fmt.Sprintf(`"chat-new-%d" is forbidden`, n)))
				}
				// maxUnavailable 1: the old ReplicaSet is scaled down, its
				// pod terminates and still holds its quota.
				h.updateReplicaSet("chat-old", func(rs *appsv1.ReplicaSet) {
					rs.Spec.Replicas = ptr.To[int32](1)
					rs.Status.TerminatingReplicas = ptr.To[int32](1)
				})
				h.updateReplicaSet("chat-new", func(rs *appsv1.ReplicaSet) { rs.Status.Replicas = 0 })
				refuse("ev1", 1)
				assert.True(h.t, h.running(), "an old pod is terminating")
				h.clock.Step(time.Minute)
				refuse("ev2", 2)
				assert.True(h.t, h.running(), "an old pod is still terminating")
				h.updateReplicaSet("chat-old", func(rs *appsv1.ReplicaSet) {
					rs.Status.Replicas, rs.Status.TerminatingReplicas = 1, ptr.To[int32](0)
				})
				// The ReplicaSets' informer delivers in order: once the
				// watcher reports the new ReplicaSet's next revision, it
				// has the old one's update too.
				h.updateReplicaSet("chat-new", func(rs *appsv1.ReplicaSet) { rs.Annotations[deploymentRevisionAnnotKey] = "3" })
				h.awaitIdleAfter("the old ReplicaSet's update", func(e rollout.Event) bool { return e.Rollout != nil && e.Rollout.Revision == "3" })
				h.clock.Step(quotaSettle - time.Second)
				refuse("ev3", 3)
				assert.True(h.t, h.running(), "the quota may not be recomputed yet")
				h.clock.Step(2 * time.Second)
				h.createEvent(testEvent("ev4", "ReplicaSet", "chat-new", "rs-new", "Warning", "FailedCreate",
					`Error creating: pods "chat-new-4" is forbidden: exceeded quota: gpu`, h.clock.Now()))
			},
			verdict: rollout.VerdictFailedCreate,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Contains(t, d.Message, `"chat-new-4" is forbidden: exceeded quota`)
			},
		},
		{
			name: "the cluster serves no logs: said plainly",
			opts: harnessOptions{logs: func(*corev1.PodLogOptions) (string, error) {
				return "", errors.New("the server could not find the requested resource")
			}},
			drive: func(h *harness) {
				h.createPod(testPod(h.newRS, "a", crashLoopStatus(2)))
			},
			verdict: rollout.VerdictCrashLoop,
			check: func(t *testing.T, h *harness, d *rollout.Diagnosis) {
				assert.Empty(t, d.LogTail)
				assert.Contains(t, d.LogNote, "the cluster did not serve the log of container vllm in pod chat-new-a")
				assert.Len(t, h.logs, 2, "previous, then current")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := startHarness(t, tc.opts)
			tc.drive(h)
			res, err := h.result()
			d := requireFailure(t, res, err, tc.verdict)
			t.Logf("diagnosis: %s", d.Summary())
			last := h.eventsCopy()[len(h.eventsCopy())-1]
			require.NotNil(t, last.Rollout)
			assert.Equal(t, tc.verdict, last.Rollout.Verdict, "the last event carries the verdict")
			assert.Equal(t, rollout.StatusFailed, last.Status)
			h.mu.Lock()
			defer h.mu.Unlock()
			tc.check(t, h, d)
		})
	}
}

func TestRolloutWatcherSucceeds(t *testing.T) {
	h := startHarness(t, harnessOptions{})
	h.createPod(testPod(h.newRS, "a", running("vllm", 0)))
	h.progressed()
	h.updateDeployment(rolledOut)
	res, err := h.result()
	require.NoError(t, err)
	assert.Equal(t, OutcomeCurrent, res.Outcome)
	assert.Nil(t, res.Diagnosis)
	assert.Equal(t, []rollout.ObjectStatus{{Object: object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "chat"},
		Status: rollout.StatusCurrent, Message: "successfully rolled out"}}, res.Objects)

	events := h.eventsCopy()
	first := events[0]
	require.NotNil(t, first.Rollout)
	last := events[len(events)-1]
	assert.Equal(t, rollout.StatusCurrent, last.Status)
	assert.Equal(t, &rollout.RolloutProgress{Deployment: "chat", NewReplicaSet: "chat-new", PodTemplateHash: "new", Revision: "2",
		OldReplicaSets: []string{"chat-old"}, Desired: 2, Updated: 2, Ready: 2, Available: 2, Verdict: rollout.VerdictRolledOut}, last.Rollout)
	for _, e := range events {
		assert.False(t, e.Time.IsZero())
		assert.NotEqual(t, rollout.StatusFailed, e.Status)
	}
}

// TestRolloutWatcherOldReplicaSetFailures: old pods crash-looping are
// reported, and the rollout succeeds.
func TestRolloutWatcherOldReplicaSetFailures(t *testing.T) {
	old := testPod(testReplicaSet(testDeployment(""), "old", "vllm/vllm-openai:v0.9.0-crash", 2), "z", crashLoopStatus(7))
	h := startHarness(t, harnessOptions{objects: []runtime.Object{old}})
	h.createPod(testPod(h.newRS, "a", running("vllm", 0)))
	h.progressed()
	old.Status.ContainerStatuses = []corev1.ContainerStatus{crashLoopStatus(8)}
	h.updatePod(old)
	h.createEvent(testEvent("ev-old", "Pod", old.Name, old.UID, "Warning", "BackOff", "Back-off restarting failed container", t0))
	h.await("the old pod's BackOff", h.warned("pod chat-old-z (old ReplicaSet chat-old): Warning BackOff: Back-off restarting failed container"))
	assert.True(t, h.running())
	h.updateDeployment(rolledOut)
	res, err := h.result()
	require.NoError(t, err)
	assert.Equal(t, OutcomeCurrent, res.Outcome)
}

func TestRolloutWatcherTimeout(t *testing.T) {
	h := startHarness(t, harnessOptions{wait: Options{Timeout: 30 * time.Second}})
	p := testPod(h.newRS, "a", running("vllm", 0))
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
	h.createPod(p)
	h.progressed()
	// Stepped while idle, not during an evaluation.
	h.awaitIdleAfter("the pod starting", func(e rollout.Event) bool {
		return e.Rollout != nil && len(e.Rollout.Pods) == 1 && e.Rollout.Pods[0].Phase == rollout.PhaseStarting
	})
	require.Eventually(t, func() bool { return h.clock.Waiters() > 0 }, 5*time.Second, time.Millisecond)
	h.clock.Step(31 * time.Second)
	res, err := h.result()
	require.Error(t, err)
	require.ErrorIs(t, err, ErrTimeout)
	require.NotErrorIs(t, err, ErrFailed)
	var nre *NotReadyError
	require.ErrorAs(t, err, &nre)
	assert.Equal(t, 30*time.Second, nre.Timeout)
	assert.Equal(t, OutcomeTimeout, res.Outcome)
	assert.Equal(t, 31*time.Second, res.Elapsed, "measured by the clock")
	require.NotNil(t, res.Diagnosis)
	d := res.Diagnosis
	assert.Equal(t, rollout.VerdictTimeout, d.Verdict)
	assert.Equal(t, "Timeout", d.Reason)
	assert.Equal(t, "chat-new-a", d.Pod)
	assert.Contains(t, d.Message, "waiting for rollout to finish: 1 out of 2 new replicas have been updated")
	assert.Contains(t, d.Message, "container vllm is running but not ready")
	assert.Contains(t, strings.Join(d.Hints, "\n"), "readiness probe")
	assert.Contains(t, err.Error(), "rollout of deployment/chat timed out after 30s: ")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.logs, 1)
	assert.False(t, h.logs[0].Previous, "a container that never crashed: its current log")
}

// TestRolloutWatcherTimeoutWhileLoading: a pod still loading under its
// startup probe when the timeout passes is said to be, with the budget it
// had left.
func TestRolloutWatcherTimeoutWhileLoading(t *testing.T) {
	h := startHarness(t, harnessOptions{wait: Options{Timeout: 30 * time.Second}})
	cs := running("vllm", 0)
	cs.State.Running.StartedAt = metav1.NewTime(t0)
	cs.Started = ptr.To(false)
	p := testPod(h.newRS, "a", cs)
	p.Spec.Containers = append([]corev1.Container(nil), p.Spec.Containers...)
	p.Spec.Containers[0].StartupProbe = &corev1.Probe{PeriodSeconds: 10, FailureThreshold: 180}
	h.createPod(p)
	h.progressed()
	h.awaitIdleAfter("the pod loading", func(e rollout.Event) bool {
		return e.Rollout != nil && len(e.Rollout.Pods) == 1 && e.Rollout.Pods[0].Phase == rollout.PhaseLoading
	})
	require.Eventually(t, func() bool { return h.clock.Waiters() > 0 }, 5*time.Second, time.Millisecond)
	h.clock.Step(31 * time.Second)
	res, err := h.result()
	require.ErrorIs(t, err, ErrTimeout)
	require.NotNil(t, res.Diagnosis)
	assert.Equal(t, vllmcause.CauseUnknown, res.Diagnosis.Cause)
	assert.Equal(t, "pod chat-new-a was still loading under its startup probe, which lets it load for 29m29s more: raise --timeout above the probe's budget, or keep waiting with vllmctl wait --timeout",
		res.Diagnosis.Hints[0])
}

func TestRolloutWatcherCanceled(t *testing.T) {
	h := startHarness(t, harnessOptions{})
	h.progressed()
	h.cancel()
	res, err := h.result()
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, OutcomeCanceled, res.Outcome)
	assert.Nil(t, res.Diagnosis)
}

// stubWaiter plays a result for the objects other than Deployments.
type stubWaiter struct {
	status  rollout.Status
	outcome Outcome
	delay   chan struct{}
	got     []*unstructured.Unstructured
}

func (s *stubWaiter) Wait(ctx context.Context, objs []*unstructured.Unstructured, opts Options) (Result, error) {
	defer close(opts.Events)
	s.got = objs
	if s.delay != nil {
		select {
		case <-s.delay:
		case <-ctx.Done():
			return Result{Outcome: OutcomeCanceled}, ctx.Err()
		}
	}
	ref := object.Ref{Version: "v1", Kind: "Service", Namespace: opts.Namespace, Name: "chat"}
	st := rollout.ObjectStatus{Object: ref, Status: s.status, Message: "msg"}
	select {
	case opts.Events <- rollout.Event{Time: t0, Object: ref, Status: s.status, Message: "msg"}:
	case <-ctx.Done():
	}
	res := Result{Outcome: s.outcome, Objects: []rollout.ObjectStatus{st}}
	if s.outcome == OutcomeFailed {
		return res, &NotReadyError{Outcome: OutcomeFailed, Objects: res.Objects}
	}
	return res, nil
}

func TestRolloutWatcherOtherObjects(t *testing.T) {
	svc := obj("v1", "Service", "", "chat")
	t.Run("success needs the others Current too", func(t *testing.T) {
		sw := &stubWaiter{status: rollout.StatusCurrent, outcome: OutcomeCurrent, delay: make(chan struct{})}
		h := startHarness(t, harnessOptions{others: sw, extra: []*unstructured.Unstructured{svc}})
		h.updateDeployment(rolledOut)
		h.awaitIdleAfter("rolled out", func(e rollout.Event) bool { return e.Rollout != nil && e.Rollout.Verdict == rollout.VerdictRolledOut })
		assert.True(t, h.running(), "the Service is not Current yet")
		close(sw.delay)
		res, err := h.result()
		require.NoError(t, err)
		assert.Equal(t, OutcomeCurrent, res.Outcome)
		require.Len(t, res.Objects, 2)
		assert.Equal(t, rollout.StatusCurrent, res.Objects[1].Status)
		assert.Equal(t, ns, res.Objects[1].Object.Namespace)
		assert.Equal(t, []*unstructured.Unstructured{svc}, sw.got)
	})
	t.Run("another object failing fails the wait", func(t *testing.T) {
		sw := &stubWaiter{status: rollout.StatusFailed, outcome: OutcomeFailed}
		h := startHarness(t, harnessOptions{others: sw, extra: []*unstructured.Unstructured{svc}})
		res, err := h.result()
		require.ErrorIs(t, err, ErrFailed)
		assert.Equal(t, OutcomeFailed, res.Outcome)
		require.NotNil(t, res.Diagnosis)
		assert.Equal(t, rollout.VerdictObjectFailed, res.Diagnosis.Verdict)
		assert.Equal(t, "service/chat", res.Diagnosis.Object)
		assert.Equal(t, "msg", res.Diagnosis.Message)
	})
	t.Run("no waiter for others", func(t *testing.T) {
		h := startHarness(t, harnessOptions{extra: []*unstructured.Unstructured{svc}})
		res, err := h.result()
		require.Error(t, err)
		assert.Equal(t, OutcomeError, res.Outcome)
		assert.Contains(t, err.Error(), "v1 Service chat")
	})
}

// TestRolloutWatcherNewReplicaSetChanges: the pods watched follow the new
// ReplicaSet when the template changes during the wait.
func TestRolloutWatcherNewReplicaSetChanges(t *testing.T) {
	h := startHarness(t, harnessOptions{})
	h.progressed()
	// A third template: its ReplicaSet appears, the Deployment observes it.
	next := testReplicaSet(h.d, "next", "vllm/vllm-openai:v0.9.2", 1)
	next.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	h.awaitWatch("replicasets")
	_, err := h.client.AppsV1().ReplicaSets(ns).Create(context.Background(), next, metav1.CreateOptions{})
	require.NoError(t, err)
	h.updateDeployment(func(d *appsv1.Deployment) {
		d.Generation = 3
		d.Status.ObservedGeneration = 3
		d.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:v0.9.2"
	})
	h.await("the next ReplicaSet", func(e rollout.Event) bool { return e.Rollout != nil && e.Rollout.NewReplicaSet == "chat-next" })
	// A crash in the previous new ReplicaSet is an old one's now.
	h.createPod(testPod(h.newRS, "a", crashLoopStatus(3)))
	h.createPod(testPod(next, "b", crashLoopStatus(2)))
	res, err := h.result()
	d := requireFailure(t, res, err, rollout.VerdictCrashLoop)
	assert.Equal(t, "chat-next-b", d.Pod)
}

// TestRolloutWatcherSurvivesWatchFailures: a watch ending with 410 Gone
// makes the watcher re-list, a dropped watch is re-established, and the
// rollout is still followed to its end.
func TestRolloutWatcherSurvivesWatchFailures(t *testing.T) {
	var lists, watches atomic.Int32
	gone, dropped := watch.NewRaceFreeFake(), watch.NewRaceFreeFake()
	h := startHarness(t, harnessOptions{setup: func(c *fake.Clientset) {
		c.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
			lists.Add(1)
			return false, nil, nil
		})
		c.PrependWatchReactor("deployments", func(k8stesting.Action) (bool, watch.Interface, error) {
			switch watches.Add(1) {
			case 1:
				return true, gone, nil
			case 2:
				return true, dropped, nil
			}
			return false, nil, nil
		})
	}})
	h.progressed()
	require.Eventually(t, func() bool { return watches.Load() == 1 }, 5*time.Second, time.Millisecond)
	gone.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
	require.Eventually(t, func() bool { return watches.Load() == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, int32(2), lists.Load(), "410 Gone: listed again")
	dropped.Stop()
	require.Eventually(t, func() bool { return watches.Load() == 3 }, 10*time.Second, time.Millisecond)
	h.updateDeployment(rolledOut)
	res, err := h.result()
	require.NoError(t, err)
	assert.Equal(t, OutcomeCurrent, res.Outcome)
}

// TestRolloutWatcherForbidden: a refused watch ends the wait with an error
// naming what could not be watched.
func TestRolloutWatcherForbidden(t *testing.T) {
	h := startHarness(t, harnessOptions{setup: func(c *fake.Clientset) {
		c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("RBAC: access denied"))
		})
	}})
	res, err := h.result()
	require.Error(t, err)
	assert.Equal(t, OutcomeError, res.Outcome)
	assert.True(t, apierrors.IsForbidden(err), "got %v", err)
	assert.Contains(t, err.Error(), "watch the pods of apps/v1 Deployment llm/chat")
}

// A rollout whose evaluation is cheap is judged at once after each change;
// a costly one (a thousand pods) lets routine changes pile up for 999
// times the cost, at most maxSettle, so judging takes at most a
// thousandth of a core, and a change that may be a verdict for 99 times
// the cost.
func TestSettleAfter(t *testing.T) {
	for _, tc := range []struct {
		cost time.Duration
		want pause
	}{
		{0, pause{}},
		{20 * time.Microsecond, pause{}},
		{200 * time.Microsecond, pause{quiet: 199800 * time.Microsecond, alarmed: 19800 * time.Microsecond}},
		{time.Millisecond, pause{quiet: 999 * time.Millisecond, alarmed: 99 * time.Millisecond}},
		{10 * time.Millisecond, pause{quiet: maxSettle, alarmed: 990 * time.Millisecond}},
		{time.Second, pause{quiet: maxSettle, alarmed: maxSettle}},
	} {
		t.Run(tc.cost.String(), func(t *testing.T) {
			assert.Equal(t, tc.want, settleAfter(tc.cost))
		})
	}
}

// TestSlim checks the informers' transform: no managedFields anywhere, and
// of a pod only what the verdicts and the progress read.
func TestSlim(t *testing.T) {
	d := testDeployment("vllm/vllm-openai:v0.9.1")
	rs := testReplicaSet(d, "new", "vllm/vllm-openai:v0.9.1", 1)
	pod := testPod(rs, "a", running("vllm", 0))
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	pod.Annotations = map[string]string{"sim.vllmctl.io/ready-delay": "1s"}
	pod.Spec.Containers[0].StartupProbe = &corev1.Probe{FailureThreshold: 60, PeriodSeconds: 10}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "HF_TOKEN", Value: "hf_secret"}}
	pod.Spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "busybox", Args: []string{"sh"}}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}
	pod.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	want := pod.DeepCopy()

	out, err := slim(pod)
	require.NoError(t, err)
	got := out.(*corev1.Pod)
	assert.Nil(t, got.ManagedFields)
	assert.Nil(t, got.Annotations)
	assert.Equal(t, want.ObjectMeta.Labels, got.Labels)
	assert.Equal(t, want.OwnerReferences, got.OwnerReferences)
	assert.Equal(t, want.Status, got.Status)
	assert.Equal(t, corev1.PodSpec{
		NodeName:       "gpu-node-1",
		Containers:     []corev1.Container{{Name: "vllm", StartupProbe: want.Spec.Containers[0].StartupProbe}},
		InitContainers: []corev1.Container{{Name: "fetch"}},
	}, got.Spec)
	assert.Equal(t, rollout.PhaseReady, podPhase(got, false).Phase)

	rsOut, err := slim(rs.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, rs.Spec, rsOut.(*appsv1.ReplicaSet).Spec, "only pods lose their spec")
}
