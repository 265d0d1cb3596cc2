// Diagnosing on demand (vllmctl diagnose): any pod of the cluster, or a log
// alone, with the diagnosis a failed rollout prints.

package wait

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// PodNotFoundError says the pod to diagnose does not exist (exit code 2).
type PodNotFoundError struct {
	Namespace, Pod string
	Err            error
}

func (e *PodNotFoundError) Error() string {
	return fmt.Sprintf("pod %q not found in namespace %q", e.Pod, e.Namespace)
}
func (e *PodNotFoundError) Unwrap() error { return e.Err }
func (e *PodNotFoundError) ExitCode() int { return exitcode.Invalid }

// ContainerNotFoundError says the pod has no container of that name (exit
// code 2); Containers are the ones it has, init containers first.
type ContainerNotFoundError struct {
	Pod, Container string
	Containers     []string
}

func (e *ContainerNotFoundError) Error() string {
	return fmt.Sprintf("pod %s has no container %q; its containers: %s", e.Pod, e.Container, strings.Join(e.Containers, ", "))
}
func (e *ContainerNotFoundError) ExitCode() int { return exitcode.Invalid }

// DiagnosePod diagnoses container of pod in namespace as a failed rollout
// diagnoses its failing pod (the same code: the container's state and last
// termination, the pod's events, the log of its previous and current
// instance, the cause, its evidence and the hints, quoting the pod's
// flags). The pod may belong to anything. container "" picks the first
// container that is failing (terminated, waiting or restarted, init
// containers first) or else the first container. The Diagnosis has no
// Object; its Verdict is set only when the rollout verdicts (opts) would
// fail the pod.
func DiagnosePod(ctx context.Context, client kubernetes.Interface, namespace, pod, container string, opts RolloutOptions) (*rollout.Diagnosis, error) {
	opts = opts.withDefaults()
	p, err := client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, &PodNotFoundError{Namespace: namespace, Pod: pod, Err: err}
	}
	if err != nil {
		return nil, err
	}
	f, err := findingFor(p, container, opts)
	if err != nil {
		return nil, err
	}
	g := diagnoser{client: client, opts: opts}
	d := g.fromPod(ctx, f.Verdict, "", namespace, f, podEventsOf(ctx, client, p))
	if !d.Verdict.Failed() {
		d.Verdict = ""
	}
	sanitize(d)
	return d, nil
}

// findingFor is what the verdicts find about container of pod (see
// DiagnosePod), with a reason even when they find nothing wrong: the
// container's state, else the pod's phase.
func findingFor(pod *corev1.Pod, container string, opts RolloutOptions) (*podFinding, error) {
	var names []string
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		names = append(names, c.Name)
	}
	j := newPodJudge(opts)
	var f *podFinding
	if container == "" {
		fail, suspects, _ := j.judge(pod, 0, opts.Clock.Now())
		switch {
		case fail != nil:
			f = fail
		case len(suspects) > 0:
			f = &suspects[0]
		case pod.Status.Phase == corev1.PodFailed:
			f = failedPodFinding(pod)
		case len(pod.Spec.Containers) > 0:
			container = pod.Spec.Containers[0].Name
		}
	} else {
		found := false
		for _, n := range names {
			found = found || n == container
		}
		if !found {
			return nil, &ContainerNotFoundError{Pod: pod.Name, Container: container, Containers: names}
		}
	}
	if f == nil {
		f = &podFinding{Verdict: rollout.VerdictProgressing, Pod: pod, Container: container}
		for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
			if cs.Name != container {
				continue
			}
			if cf := j.judgeContainer(pod, &cs, j.memory(pod.UID), true); cf != nil {
				f = cf
			} else {
				f = newContainerFinding(pod, &cs)
			}
			if f.Reason == "" {
				f.Reason = containerState(&cs)
			}
		}
	}
	if f.Reason == "" {
		f.Reason = string(pod.Status.Phase)
	}
	if f.Reason == "" {
		f.Reason = string(corev1.PodPending)
	}
	return f, nil
}

// containerState names a container's state: Running, Terminated or its
// waiting reason.
func containerState(cs *corev1.ContainerStatus) string {
	switch {
	case cs.State.Running != nil:
		return "Running"
	case cs.State.Terminated != nil:
		if cs.State.Terminated.Reason != "" {
			return cs.State.Terminated.Reason
		}
		return "Terminated"
	case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
		return cs.State.Waiting.Reason
	}
	return ""
}

// podEventsOf lists pod's events; none when they cannot be listed (the
// diagnosis goes on without them).
func podEventsOf(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) []*corev1.Event {
	events, _ := listPodEvents(ctx, client, pod)
	return events
}

// listPodEvents lists pod's events, by one field-selected list.
func listPodEvents(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) ([]*corev1.Event, error) {
	// From the API server's watch cache (resourceVersion 0): a list that
	// etcd serves reads every event of the namespace to filter them.
	list, err := client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("involvedObject.name", pod.Name).String(),
		ResourceVersion: "0",
	})
	if err != nil {
		return nil, fmt.Errorf("list the events of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	var out []*corev1.Event
	for i := range list.Items {
		e := &list.Items[i]
		if e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Name != pod.Name {
			continue
		}
		if e.InvolvedObject.UID != "" && e.InvolvedObject.UID != pod.UID {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// Bounds of DiagnoseLog: it keeps the last MaxDiagnoseLogBytes of its
// input, reads at most maxDiagnoseReadBytes of it, and classifies the last
// diagnoseLogLines lines (each clipped to diagnoseLineBytes).
const (
	MaxDiagnoseLogBytes        = 4 << 20
	maxDiagnoseReadBytes int64 = 64 << 20
	diagnoseLogLines           = 1000
	diagnoseLineBytes          = 64 << 10
)

// DiagnoseLog classifies a container's log alone, as a failed rollout
// classifies a pod's: the cause, its evidence and the hints (without the
// pod's flags: there is no pod), the log's last lines. The Diagnosis has
// no Reason. Input is bounded: a seekable input (a file) is read from its
// last MaxDiagnoseLogBytes; a stream is read up to 64 MiB, keeping its last
// MaxDiagnoseLogBytes.
func DiagnoseLog(r io.Reader, opts RolloutOptions) (*rollout.Diagnosis, error) {
	opts = opts.withDefaults()
	raw, note, err := readLogTail(r)
	if err != nil {
		return nil, err
	}
	lines := splitLogLines(raw, diagnoseLogLines)
	d := &rollout.Diagnosis{LogNote: note}
	d.Cause, d.Evidence, d.Hints = vllmcause.NewClassifier().Classify(vllmcause.LogInput(lines, nil))
	if n := int(opts.LogTailLines); len(lines) > n {
		d.LogTail = append([]string(nil), lines[len(lines)-n:]...)
	} else {
		d.LogTail = lines
	}
	if len(lines) == 0 {
		d.LogNote = joinNonEmpty("; ", d.LogNote, "the log is empty")
	}
	sanitize(d)
	return d, nil
}

// readLogTail reads the last MaxDiagnoseLogBytes of r (see DiagnoseLog),
// with a note when it did not read it all.
func readLogTail(r io.Reader) ([]byte, string, error) {
	const window = MaxDiagnoseLogBytes
	if s, ok := r.(io.Seeker); ok {
		if size, err := s.Seek(0, io.SeekEnd); err == nil {
			off := max(size-window, 0)
			if _, err := s.Seek(off, io.SeekStart); err == nil {
				raw, err := io.ReadAll(io.LimitReader(r, window))
				if err != nil {
					return nil, "", err
				}
				if off > 0 {
					return dropPartialLine(raw), fmt.Sprintf("read the last %d MiB of the log (%d bytes)", window>>20, size), nil
				}
				return raw, "", nil
			}
		}
	}
	var buf []byte
	chunk := make([]byte, 256<<10)
	var total int64
	dropped := false
	for total < maxDiagnoseReadBytes {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		total += int64(n)
		if len(buf) > 2*window {
			buf = append(buf[:0:0], buf[len(buf)-window:]...)
			dropped = true
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", err
		}
	}
	note := ""
	if total >= maxDiagnoseReadBytes {
		note = fmt.Sprintf("stopped reading after %d MiB", maxDiagnoseReadBytes>>20)
	}
	if dropped || len(buf) > window {
		buf = dropPartialLine(buf[max(len(buf)-window, 0):])
		note = joinNonEmpty("; ", note, fmt.Sprintf("read the last %d MiB of the log", window>>20))
	}
	return buf, note, nil
}

// dropPartialLine drops what precedes raw's first newline: the end of a
// line cut.
func dropPartialLine(raw []byte) []byte {
	if i := bytes.IndexByte(raw, '\n'); i >= 0 {
		return raw[i+1:]
	}
	return raw
}

// splitLogLines splits raw into its last n non-empty lines, each clipped to
// diagnoseLineBytes (no line is too long to split, unlike bufio.Scanner).
func splitLogLines(raw []byte, n int) []string {
	var lines []string
	for len(raw) > 0 && len(lines) < n {
		end := bytes.LastIndexByte(raw, '\n')
		line := raw[end+1:]
		raw = raw[:max(end, 0)]
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if len(line) > diagnoseLineBytes {
			line = line[:diagnoseLineBytes]
		}
		lines = append(lines, string(line))
	}
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	return lines
}
