// A LeaderWorkerSet's terminations and diagnoses: the log of each
// termination of a container of its current revision, read once while the
// pod exists (the LWS controller deletes and recreates the group under the
// same names at the next restart), the group's last crash, the events
// reported as warnings, and the diagnoses of a failure or a timeout.

package wait

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// capturedLog is the log of a container's termination, read while its
// pod existed, or when the termination was judged (a decisive cause).
type capturedLog struct {
	container string
	previous  bool
	lines     []string
	err       error
	// note is the diagnosis' note on the lines shown ("": none).
	note string
}

// shown returns the last n lines and the note of a diagnosis.
func (c *capturedLog) shown(n int64) ([]string, string) {
	switch {
	case c.err != nil:
		return nil, fmt.Sprintf("the cluster did not serve the log of container %s at its termination: %v", c.container, c.err)
	case len(c.lines) == 0:
		return nil, fmt.Sprintf("the terminated instance of container %s logged nothing", c.container)
	}
	lines := c.lines
	if len(lines) > int(n) {
		lines = lines[len(lines)-int(n):]
	}
	return lines, c.note
}

// withLog returns f with the log captured at the termination of its
// container, if that termination was captured.
func (lw *lwsWatch) withLog(f *podFinding) *podFinding {
	if f.Pod == nil || f.log != nil {
		return f
	}
	c := lw.crashes[f.Pod.Labels[lwsGroupIndexLabel]]
	if c == nil || c.Pod.UID != f.Pod.UID || c.Container != f.Container {
		return f
	}
	cp := *f
	cp.log = c.log
	return &cp
}

// captureTermination is the classifier of lw's judge: once per
// termination of a container of a pod of the current revision, it reads
// the log of the instance that ended, while the pod still exists (the LWS
// controller deletes the group at the restart that follows), keeps it and
// the pod (whole) as the group's last crash (captureOnce), and classifies
// it (unless RolloutOptions.WaitOnKnownCause).
func (r *rolloutRun) captureTermination(lw *lwsWatch) terminationClassifier {
	return func(pod *corev1.Pod, container string, previous bool, t *corev1.ContainerStateTerminated) knownCause {
		c := r.captureOnce(lw, pod, container, previous, t)
		if c.err != nil || r.o.WaitOnKnownCause {
			return knownCause{cause: vllmcause.CauseUnknown}
		}
		k := r.classifyLines(c.lines, t)
		k.log = c
		return k
	}
}

// captureTerminations captures the last failed termination of each
// container of pod (as judgeKnownCause picks it: its state's, else its
// last state's), once each.
func (r *rolloutRun) captureTerminations(lw *lwsWatch, pod *corev1.Pod) {
	for _, statuses := range [2][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range statuses {
			cs := &statuses[i]
			t, previous := cs.State.Terminated, false
			if t == nil || t.ExitCode == 0 {
				t, previous = cs.LastTerminationState.Terminated, true
			}
			if t != nil && t.ExitCode != 0 {
				r.captureOnce(lw, pod, cs.Name, previous, t)
			}
		}
	}
}

// captureOnce reads the log of the termination t of container of pod (the
// previous instance's when previous) the first time it is asked, and
// records it, with the pod, as the last crash of its group.
func (r *rolloutRun) captureOnce(lw *lwsWatch, pod *corev1.Pod, container string, previous bool, t *corev1.ContainerStateTerminated) *capturedLog {
	key := string(pod.UID) + "/" + knownCauseKey(container, t)
	if c, ok := lw.captured[key]; ok {
		return c
	}
	lines, err := r.readTerminationLog(pod, container, previous, max(int64(causeLogLines), r.o.LogTailLines))
	c := &capturedLog{container: container, previous: previous, lines: lines, err: err,
		note: fmt.Sprintf("the log of container %s read at its termination (the LWS controller recreates a group's pods under the same names)", container)}
	lw.captured[key] = c
	lw.capture(r.wholePod(pod), container, previous, t, c)
	return c
}

// wholePod returns pod with its whole spec and annotations, read from the
// cluster (the informer keeps only part of them); pod itself when the read
// fails or finds another pod.
func (r *rolloutRun) wholePod(pod *corev1.Pod) *corev1.Pod {
	ctx := r.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, logReadTimeout)
	defer cancel()
	cp := pod.DeepCopy()
	got, err := r.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err == nil && got.UID == pod.UID {
		cp.Spec, cp.Annotations = got.Spec, got.Annotations
	}
	return cp
}

// capture records the termination t of container of pod as the last crash
// of its group, unless the group's last crash has a log and this one's
// could not be read: the LWS controller deletes the whole group at its
// first crash, so a second pod of the group ending with it is often gone
// before its log is read, and the crash with evidence is the one to show.
func (lw *lwsWatch) capture(pod *corev1.Pod, container string, previous bool, t *corev1.ContainerStateTerminated, log *capturedLog) {
	if prev := lw.crashes[pod.Labels[lwsGroupIndexLabel]]; prev != nil && log != nil && log.err != nil &&
		prev.log != nil && prev.log.err == nil && len(prev.log.lines) > 0 {
		return
	}
	f := &podFinding{Verdict: rollout.VerdictProgressing, Reason: t.Reason, Pod: pod, Container: container, ExitCode: t.ExitCode,
		Message: "last termination: " + vllmcause.TerminationMessage(t), ran: true, crashed: true, restarted: previous, log: log}
	if f.Reason == "" {
		f.Reason = "Error"
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if cs.Name == container {
			f.RestartCount = cs.RestartCount
		}
	}
	lw.crashes[pod.Labels[lwsGroupIndexLabel]] = f
}

// isLWSPodOf reports whether name is a pod of the LeaderWorkerSet lws: a
// leader "<lws>-<group>" or a worker "<lws>-<group>-<worker>".
func isLWSPodOf(name, lws string) bool {
	rest, ok := strings.CutPrefix(name, lws+"-")
	if !ok {
		return false
	}
	group, worker, hasWorker := strings.Cut(rest, "-")
	digits := func(s string) bool {
		return s != "" && strings.Trim(s, "0123456789") == ""
	}
	return digits(group) && (!hasWorker || digits(worker))
}

// eventAbout says what a Warning event is about: the LeaderWorkerSet or
// one of its pods (the LWS controller's RecreateGroup events too, see
// noteEvent).
func (lw *lwsWatch) eventAbout(e *corev1.Event) string {
	if lw.l == nil {
		return ""
	}
	switch name := e.InvolvedObject.Name; e.InvolvedObject.Kind {
	case lwsKind:
		if name == lw.name {
			return "LeaderWorkerSet " + name
		}
	case "Pod":
		if isLWSPodOf(name, lw.name) {
			return "pod " + name
		}
	}
	return ""
}

// diagnose explains the failure of a LeaderWorkerSet: from its failed
// pod, as a Deployment's, or from the last crash of the group recreated
// too often (the log captured at its termination).
func (lw *lwsWatch) diagnose(ctx context.Context, r *rolloutRun, f *failure) *rollout.Diagnosis {
	if f.finding == nil {
		d := &rollout.Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: lw.object, Namespace: lw.namespace, Message: f.message}
		d.Hints = hints(d, nil, f.reason)
		return d
	}
	d := r.podDiagnosis(ctx, &lw.watchBase, f.verdict, f.finding)
	if f.reason != "" {
		d.Reason = f.reason
		d.Message = joinNonEmpty("; ", f.message, d.Message)
	}
	if f.verdict == rollout.VerdictGroupRecreated {
		d.Hints = recreatedHints(d, lw)
	}
	return d
}

// recreatedHints are the hints of a group recreated too often: the pod
// that crashed is gone (its log was read at its termination), so the
// hint to read its previous instance's log gives way to the LWS
// controller's events.
func recreatedHints(d *rollout.Diagnosis, lw *lwsWatch) []string {
	out := []string{
		fmt.Sprintf("the group's pods were deleted and recreated under the same names: the log shown was read when the container ended; kubectl describe %s%s lists the controller's RecreateGroup events", lw.object, nsFlag(lw.namespace)),
	}
	for _, h := range d.Hints {
		if !strings.HasPrefix(h, "read why the previous instance exited") {
			out = append(out, h)
		}
	}
	return out
}

// timeout explains a timeout on a LeaderWorkerSet not rolled out, with
// its most suspect pod of the current revision.
func (lw *lwsWatch) timeout(ctx context.Context, r *rolloutRun) *rollout.Diagnosis {
	return r.rolloutTimeout(ctx, lw, &lw.rolloutState, lw.withLog)
}
