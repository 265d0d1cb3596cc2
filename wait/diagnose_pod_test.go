package wait

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// crashingPod is chartPod (a bare pod, as kubectl run makes) crash-looping
// after two restarts, exit code 1.
func crashingPod() *corev1.Pod {
	p := chartPod(func(_ *corev1.Pod, c *corev1.Container) { setArg(c, "--gpu-memory-utilization", "0.95") })
	p.UID = "uid-1"
	p.Spec.InitContainers = []corev1.Container{{Name: "fetch", Image: "busybox"}}
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "sidecar", Image: "busybox"})
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "fetch",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}},
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: "server", RestartCount: 2,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s restarting failed container"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}},
			{Name: "sidecar", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		},
	}
	return p
}

// diagnoseClient is a fake clientset holding objs whose pods log the
// fixture named by logs (per container; "" for none), and records the log
// requests.
func diagnoseClient(t *testing.T, logs map[string]string, reqs *[]*corev1.PodLogOptions, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	c := fake.NewClientset(objs...)
	c.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "log" {
			return false, nil, nil
		}
		opts := a.(k8stesting.GenericActionImpl).Value.(*corev1.PodLogOptions)
		*reqs = append(*reqs, opts.DeepCopy())
		name := logs[opts.Container]
		if name == "" {
			return true, &runtime.Unknown{Raw: []byte("INFO all is well\n")}, nil
		}
		data, err := os.ReadFile(filepath.Join("..", "internal", "vllmcause", "testdata", "causes", name))
		require.NoError(t, err)
		return true, &runtime.Unknown{Raw: data}, nil
	})
	return c
}

func TestDiagnosePod(t *testing.T) {
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e1", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "chat-7557874574-jtdj8", UID: "uid-1"},
		Type:           "Warning", Reason: "BackOff", Message: "Back-off restarting failed container server",
	}
	other := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e2", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "another"},
		Type:           "Warning", Reason: "BackOff", Message: "not this pod",
	}
	t.Run("a CUDA OOM in the previous log: gpu-oom, hints quote the pod's flags", func(t *testing.T) {
		var reqs []*corev1.PodLogOptions
		c := diagnoseClient(t, map[string]string{"server": "gpu-oom-weights.log"}, &reqs, crashingPod(), event, other)
		d, err := DiagnosePod(context.Background(), c, ns, "chat-7557874574-jtdj8", "", RolloutOptions{Values: builtinValues(t)})
		require.NoError(t, err)
		assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
		assert.Equal(t, "CrashLoopBackOff", d.Reason)
		assert.Equal(t, rollout.VerdictCrashLoop, d.Verdict)
		assert.Equal(t, "server", d.Container, "the failing container, not the init container nor the first")
		assert.Equal(t, int32(2), d.RestartCount)
		assert.Equal(t, int32(1), d.ExitCode)
		assert.Empty(t, d.Object)
		assert.Contains(t, d.Evidence, "CUDA out of memory")
		assert.Contains(t, strings.Join(d.Hints, "\n"), "`--gpu-memory-utilization` (model.gpuMemoryUtilization, now 0.95)")
		assert.Equal(t, []string{"Warning BackOff: Back-off restarting failed container server"}, d.Events)
		require.NotEmpty(t, reqs)
		assert.True(t, reqs[0].Previous)
		assert.NotEmpty(t, d.LogTail)

		var b bytes.Buffer
		require.NoError(t, termout.WriteDiagnosisOnDemand(&b, d))
		assert.True(t, strings.HasPrefix(b.String(), "diagnosis: CrashLoopBackOff (cause gpu-oom)\n") || strings.HasPrefix(b.String(), "diagnosis: CrashLoopBackOff\n"), b.String())
		assert.Contains(t, b.String(), "  cause:     gpu-oom\n")
	})
	t.Run("an unknown crash: unknown, with the generic hints", func(t *testing.T) {
		var reqs []*corev1.PodLogOptions
		c := diagnoseClient(t, map[string]string{"server": "unknown-keyerror.log"}, &reqs, crashingPod())
		d, err := DiagnosePod(context.Background(), c, ns, "chat-7557874574-jtdj8", "", RolloutOptions{})
		require.NoError(t, err)
		assert.Equal(t, vllmcause.CauseUnknown, d.Cause)
		assert.Empty(t, d.Evidence)
		assert.Contains(t, strings.Join(d.Hints, "\n"), "kubectl logs chat-7557874574-jtdj8 -c server --previous -n "+ns)
	})
	t.Run("-c picks a healthy container: its current log, no verdict", func(t *testing.T) {
		var reqs []*corev1.PodLogOptions
		c := diagnoseClient(t, map[string]string{"server": "gpu-oom-weights.log"}, &reqs, crashingPod())
		d, err := DiagnosePod(context.Background(), c, ns, "chat-7557874574-jtdj8", "sidecar", RolloutOptions{})
		require.NoError(t, err)
		assert.Equal(t, "sidecar", d.Container)
		assert.Equal(t, "Running", d.Reason)
		assert.Empty(t, d.Verdict)
		assert.Equal(t, vllmcause.CauseUnknown, d.Cause)
		require.NotEmpty(t, reqs)
		assert.False(t, reqs[0].Previous)
	})
	t.Run("unknown container: names the pod's containers", func(t *testing.T) {
		var reqs []*corev1.PodLogOptions
		c := diagnoseClient(t, nil, &reqs, crashingPod())
		_, err := DiagnosePod(context.Background(), c, ns, "chat-7557874574-jtdj8", "nope", RolloutOptions{})
		var cerr *ContainerNotFoundError
		require.True(t, errors.As(err, &cerr), "%v", err)
		assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
		assert.EqualError(t, err, `pod chat-7557874574-jtdj8 has no container "nope"; its containers: fetch, server, sidecar`)
	})
	t.Run("unknown pod", func(t *testing.T) {
		var reqs []*corev1.PodLogOptions
		c := diagnoseClient(t, nil, &reqs)
		_, err := DiagnosePod(context.Background(), c, ns, "ghost", "", RolloutOptions{})
		var perr *PodNotFoundError
		require.True(t, errors.As(err, &perr), "%v", err)
		assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
		assert.Contains(t, err.Error(), `pod "ghost" not found`)
	})
	t.Run("a pending pod that never ran: no logs read", func(t *testing.T) {
		p := chartPod(nil)
		p.Spec.NodeName = ""
		p.Status.Phase = corev1.PodPending
		var reqs []*corev1.PodLogOptions
		c := diagnoseClient(t, nil, &reqs, p)
		d, err := DiagnosePod(context.Background(), c, ns, p.Name, "", RolloutOptions{})
		require.NoError(t, err)
		assert.Equal(t, "Pending", d.Reason)
		assert.Equal(t, "server", d.Container)
		assert.Equal(t, vllmcause.CauseUnknown, d.Cause)
		assert.Empty(t, reqs)
	})
}

func TestDiagnoseLog(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "internal", "vllmcause", "testdata", "causes", "gpu-oom-weights.log"))
	require.NoError(t, err)
	t.Run("a known cause from a stream", func(t *testing.T) {
		d, err := DiagnoseLog(bytes.NewBuffer(data), RolloutOptions{})
		require.NoError(t, err)
		assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
		assert.Empty(t, d.Reason)
		assert.Contains(t, d.Evidence, "CUDA out of memory")
		assert.NotEmpty(t, d.Hints)
		assert.Len(t, d.LogTail, int(DefaultLogTailLines))
		assert.Empty(t, d.LogNote)
	})
	t.Run("a huge file: its tail is read", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "log")
		huge := append(bytes.Repeat([]byte("INFO filler line\n"+strings.Repeat("x", 3<<20)+"\n"), 3), data...)
		require.NoError(t, os.WriteFile(path, huge, 0o600))
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		d, err := DiagnoseLog(f, RolloutOptions{})
		require.NoError(t, err)
		assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
		assert.Contains(t, d.LogNote, "read the last 4 MiB")
	})
	t.Run("a huge stream with one huge line: bounded, still classified", func(t *testing.T) {
		huge := append([]byte(strings.Repeat("y", 9<<20)+"\n"), data...)
		d, err := DiagnoseLog(bytes.NewBuffer(huge), RolloutOptions{})
		require.NoError(t, err)
		assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
		assert.Contains(t, d.LogNote, "read the last 4 MiB")
		for _, l := range d.LogTail {
			assert.LessOrEqual(t, len(l), termout.MaxLineBytes+8)
		}
	})
	t.Run("unknown and empty", func(t *testing.T) {
		d, err := DiagnoseLog(strings.NewReader("\n\n"), RolloutOptions{})
		require.NoError(t, err)
		assert.Equal(t, vllmcause.CauseUnknown, d.Cause)
		assert.Equal(t, "the log is empty", d.LogNote)
	})
	t.Run("hostile text is sanitised", func(t *testing.T) {
		d, err := DiagnoseLog(strings.NewReader("torch.OutOfMemoryError: CUDA out of memory \x1b[31mred\x1b]0;title\x07\n"), RolloutOptions{})
		require.NoError(t, err)
		assert.Equal(t, vllmcause.CauseGPUOOM, d.Cause)
		assert.NotContains(t, d.Evidence, "\x1b")
		assert.NotContains(t, strings.Join(d.LogTail, ""), "\x1b")
	})
}
