// Decisive causes: a container termination whose log names a cause that
// no restart cures (GPU memory, a gated model, ...) fails the rollout at
// that first termination (VerdictKnownCause), instead of waiting for
// RolloutOptions.MaxRestarts. Each termination's log is read once.

package wait

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// knownCause is what the log of one termination named, and that log
// (the diagnosis of a decisive cause shows it instead of reading it
// again).
type knownCause struct {
	cause    vllmcause.Cause
	evidence string
	log      *capturedLog
}

// terminationClassifier reads the log of the instance of container of pod
// that ended with t (its previous instance's when previous, else its
// current one's) and classifies it.
type terminationClassifier func(pod *corev1.Pod, container string, previous bool, t *corev1.ContainerStateTerminated) knownCause

// knownCauseKey identifies one termination of a container.
func knownCauseKey(container string, t *corev1.ContainerStateTerminated) string {
	return container + "/" + terminationKey(t)
}

// judgeKnownCause fails f (VerdictKnownCause) when the container cs ended
// badly (its state or last state terminated, exit code not 0) and the log
// of that instance names a decisive cause. The log of one termination is
// read once, whatever the number of observations.
func (j *podJudge) judgeKnownCause(pod *corev1.Pod, cs *corev1.ContainerStatus, m *podMemory, f *podFinding) {
	if j.classify == nil {
		return
	}
	t, previous := cs.State.Terminated, false
	if t == nil || t.ExitCode == 0 {
		t, previous = cs.LastTerminationState.Terminated, true
	}
	if t == nil || t.ExitCode == 0 {
		return
	}
	key := knownCauseKey(cs.Name, t)
	k, ok := m.causes[key]
	if !ok {
		k = j.classify(pod, cs.Name, previous, t)
		if m.causes == nil {
			m.causes = map[string]knownCause{}
		}
		m.causes[key] = k
	}
	if !k.cause.Decisive() {
		return
	}
	f.Verdict, f.cause, f.evidence, f.log = rollout.VerdictKnownCause, k.cause, k.evidence, k.log
	f.ExitCode, f.crashed, f.ran = t.ExitCode, true, true
	if f.Reason == "" {
		f.Reason = "Error"
	}
	f.Message = joinNonEmpty("; ", fmt.Sprintf("the log names cause %s, which restarts do not cure: failed at this termination", k.cause), f.Message)
}

// newJudge returns a podJudge with the run's options, classifying the
// log of each termination unless opts.WaitOnKnownCause.
func (r *rolloutRun) newJudge() *podJudge {
	j := newPodJudge(r.o)
	if !r.o.WaitOnKnownCause {
		j.classify = r.classifyTermination
	}
	return j
}

// classifyTermination reads the log of one terminated container instance
// (one request: the tail of causeLogLines lines, or of LogTailLines when
// more, at most causeLogBytes, within logReadTimeout) and classifies it
// with its termination. A log the cluster does not serve names no cause.
func (r *rolloutRun) classifyTermination(pod *corev1.Pod, container string, previous bool, t *corev1.ContainerStateTerminated) knownCause {
	lines, err := r.readTerminationLog(pod, container, previous, max(int64(causeLogLines), r.o.LogTailLines))
	if err != nil {
		return knownCause{cause: vllmcause.CauseUnknown}
	}
	k := r.classifyLines(lines, t)
	if !k.cause.Decisive() {
		// Kept only when the verdict shows it: a big rollout's pods
		// may end thousands of times.
		return k
	}
	k.log = &capturedLog{container: container, previous: previous, lines: lines}
	if !previous {
		k.log.note = fmt.Sprintf("the log of the current instance of container %s", container)
	}
	return k
}

// readTerminationLog reads the last n lines (at most causeLogBytes, within
// logReadTimeout) of the log of a container instance of pod: its previous
// instance's when previous, else its current one's.
func (r *rolloutRun) readTerminationLog(pod *corev1.Pod, container string, previous bool, n int64) ([]string, error) {
	ctx := r.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, logReadTimeout)
	defer cancel()
	raw, err := r.client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container:  container,
		Previous:   previous,
		TailLines:  ptrTo(n),
		LimitBytes: ptrTo(causeLogBytes),
	}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("log of container %s of pod %s: %w", container, pod.Name, err)
	}
	return lastLines(raw, int(n)), nil
}

// classifyLines classifies the log lines of the instance that ended with
// t.
func (r *rolloutRun) classifyLines(lines []string, t *corev1.ContainerStateTerminated) knownCause {
	if len(lines) > causeLogLines {
		lines = lines[len(lines)-causeLogLines:]
	}
	if r.cls == nil {
		r.cls = vllmcause.NewClassifier()
	}
	cause, evidence, _ := r.cls.Classify(vllmcause.LogInput(lines, t))
	return knownCause{cause: cause, evidence: evidence}
}
