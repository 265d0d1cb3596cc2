// The diagnosis of a failure (a rollout.Diagnosis: why a rollout failed,
// as the user and the release record see it), built from a pod's
// statuses, events and log tail, with hints.

package wait

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/internal/vllm"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// sanitize makes every text of d safe to print and to record, at its
// source: log lines, event and termination messages, what the classifier
// quoted and what the hints repeat come from whoever controls the image or
// the cluster, so each goes through SanitizeLine (controls escaped, valid
// UTF-8, clipped to MaxLineBytes). Every Diagnosis a wait returns is
// sanitised.
func sanitize(d *rollout.Diagnosis) {
	if d == nil {
		return
	}
	d.Reason, d.Object, d.Namespace = termout.SanitizeLine(d.Reason), termout.SanitizeLine(d.Object), termout.SanitizeLine(d.Namespace)
	d.Pod, d.Node, d.Container = termout.SanitizeLine(d.Pod), termout.SanitizeLine(d.Node), termout.SanitizeLine(d.Container)
	d.Message, d.Evidence, d.LogNote = termout.SanitizeLine(d.Message), termout.SanitizeLine(d.Evidence), termout.SanitizeLine(d.LogNote)
	d.Events, d.LogTail, d.Hints = termout.SanitizeLines(d.Events), termout.SanitizeLines(d.LogTail), termout.SanitizeLines(d.Hints)
}

// diagnoser turns findings into Diagnoses, reading logs from the cluster.
type diagnoser struct {
	client kubernetes.Interface
	opts   RolloutOptions
}

// fromPod diagnoses a finding on a pod of object's new ReplicaSet. events
// are the pod's events (any order). Logs are read (with ctx, within
// logReadTimeout) when the container has run, and the cause classified.
func (g diagnoser) fromPod(ctx context.Context, v rollout.Verdict, object, namespace string, f *podFinding, events []*corev1.Event) *rollout.Diagnosis {
	f = g.withSpec(ctx, f)
	d := &rollout.Diagnosis{
		Verdict:      v,
		Reason:       f.Reason,
		Object:       object,
		Namespace:    namespace,
		Pod:          f.Pod.Name,
		Node:         f.Pod.Spec.NodeName,
		Container:    f.Container,
		ExitCode:     f.ExitCode,
		RestartCount: f.RestartCount,
		Message:      f.Message,
		Events:       formatEvents(events, g.opts.MaxEvents),
	}
	if d.Reason == "" {
		d.Reason = string(v)
	}
	in := vllmcause.PodInput(f.Pod, f.Container, formatEvents(events, len(events)))
	in.SetValues(g.opts.Values)
	cls := vllmcause.NewClassifier()
	switch {
	case f.Container == "":
		if f.Pod.Spec.NodeName == "" {
			d.LogNote = "the pod was never scheduled: there are no logs"
		} else {
			d.LogNote = "no container was concerned: no logs read"
		}
	case !f.ran && !f.restarted:
		d.LogNote = fmt.Sprintf("container %s never started: there are no logs", f.Container)
	case f.log != nil:
		d.LogTail, d.LogNote = f.log.shown(g.opts.LogTailLines)
		in.AddLog(f.log.lines)
	default:
		d.LogTail, d.LogNote = g.readLogs(ctx, f.Pod, f.Container, f.crashed, in, cls)
	}
	d.Cause, d.Evidence, d.Hints = cls.Classify(in)
	if f.cause.Decisive() && d.Cause != f.cause {
		// The verdict's cause, from the log of the termination it judged
		// (the container may have restarted since).
		d.Cause, d.Evidence = f.cause, f.evidence
		_, _, d.Hints = cls.Classify(in.Line(f.evidence))
	}
	if d.Cause == vllmcause.CauseUnknown {
		d.Hints = hints(d, f.Pod, f.Reason)
	}
	return d
}

// withSpec returns f with its pod's whole spec, read from the cluster: the
// informers keep only part of it (slimPod), and the causes and hints read
// the containers' arguments, environment, resources and mounts, and the
// volumes. When the read fails (the pod is gone, or is another pod by now),
// f is kept as it is.
func (g diagnoser) withSpec(ctx context.Context, f *podFinding) *podFinding {
	if f.Pod == nil || g.client == nil {
		return f
	}
	pod, err := g.client.CoreV1().Pods(f.Pod.Namespace).Get(ctx, f.Pod.Name, metav1.GetOptions{})
	if err != nil || pod.UID != f.Pod.UID {
		return f
	}
	cp := *f
	cp.Pod = f.Pod.DeepCopy()
	cp.Pod.Spec = pod.Spec
	cp.Pod.Annotations = pod.Annotations
	return &cp
}

// Bounds of the log reads of a diagnosis: the lines and bytes read of one
// instance's log (the classifier reads more lines than LogTail shows: a
// Python traceback's root cause is often well above its last line), and
// the time all reads of one diagnosis may take, so that a slow or failing
// log read never holds up the rollback for long.
const (
	causeLogLines        = 150
	causeLogBytes  int64 = 128 << 10
	logReadTimeout       = 3 * time.Second
)

// readLogs reads the container's log for the diagnosis and the
// classifier: the log of its previous instance (kubectl logs --previous)
// when it crashed, falling back to the current instance (a container that
// exited once and was not restarted yet has no previous instance on a real
// kubelet: its current instance is the one that exited); of its current
// instance otherwise. When that log names no cause, the other instance's
// log is read as well (for the classifier only). The note says when the
// lines shown are not the previous instance's, and says plainly when the
// cluster served no logs. It returns the last LogTailLines lines.
func (g diagnoser) readLogs(ctx context.Context, pod *corev1.Pod, container string, previous bool, in *vllmcause.Input, cls *vllmcause.Classifier) ([]string, string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logReadTimeout)
	defer cancel()
	read := func(previous bool) ([]string, error) {
		raw, err := g.client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
			Container:  container,
			Previous:   previous,
			TailLines:  ptrTo[int64](max(causeLogLines, g.opts.LogTailLines)),
			LimitBytes: ptrTo(causeLogBytes),
		}).DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		return lastLines(raw, int(max(causeLogLines, g.opts.LogTailLines))), nil
	}
	shown := func(lines []string) []string {
		if n := int(g.opts.LogTailLines); len(lines) > n {
			return lines[len(lines)-n:]
		}
		return lines
	}
	instance := map[bool]string{true: "previous", false: "current"}
	lines, firstErr := read(previous)
	if firstErr == nil {
		in.AddLog(lines)
		if previous {
			if c, _, _ := cls.Classify(in); c == vllmcause.CauseUnknown {
				if cur, err := read(false); err == nil {
					in.AddLog(cur)
				}
			}
		}
		switch {
		case len(lines) == 0:
			return nil, fmt.Sprintf("the %s instance of container %s logged nothing", instance[previous], container)
		case !previous:
			return shown(lines), fmt.Sprintf("the log of the current instance of container %s", container)
		}
		return shown(lines), ""
	}
	if previous {
		if lines, err := read(false); err == nil && len(lines) > 0 {
			in.AddLog(lines)
			return shown(lines), fmt.Sprintf("no log of a previous instance of container %s (%v): the log of its current instance", container, firstErr)
		}
	}
	return nil, fmt.Sprintf("the cluster did not serve the log of container %s in pod %s: %v", container, pod.Name, firstErr)
}

func ptrTo[T any](v T) *T { return &v }

// lastLines splits raw into lines and returns the last n non-empty ones.
func lastLines(raw []byte, n int) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// eventTime is when an event last happened.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// formatEvent formats an event as kubectl describe lists it, without the
// age: "Warning BackOff: Back-off restarting failed container".
func formatEvent(e *corev1.Event) string {
	return fmt.Sprintf("%s %s: %s", e.Type, e.Reason, strings.TrimSpace(e.Message))
}

// formatEvents formats the last max events by time, oldest first.
func formatEvents(events []*corev1.Event, max int) []string {
	sorted := append([]*corev1.Event(nil), events...)
	sort.SliceStable(sorted, func(i, j int) bool {
		ti, tj := eventTime(sorted[i]), eventTime(sorted[j])
		if ti.Equal(tj) {
			return sorted[i].Name < sorted[j].Name
		}
		return ti.Before(tj)
	})
	// Repeated events (several objects saying the same) count once, at
	// their last occurrence.
	var out []string
	last := map[string]int{}
	for _, e := range sorted {
		line := formatEvent(e)
		if i, ok := last[line]; ok {
			out = append(out[:i], out[i+1:]...)
			for l, j := range last {
				if j > i {
					last[l] = j - 1
				}
			}
		}
		last[line] = len(out)
		out = append(out, line)
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}

// hints suggests what to check, after the troubleshooting table of the
// seeds (Pending → scheduling, CrashLoopBackOff → logs --previous,
// OOMKilled → memory limit, weight-loading peak and /dev/shm, ...). cause is
// the reason behind the verdict (for a timeout: what the most suspect pod
// showed).
func hints(d *rollout.Diagnosis, pod *corev1.Pod, cause string) []string {
	ns := ""
	if d.Namespace != "" {
		ns = " -n " + d.Namespace
	}
	podName := d.Pod
	if podName == "" {
		podName = "<pod>"
	}
	container := ""
	if d.Container != "" {
		container = " -c " + d.Container
	}
	reason := cause
	if d.Verdict == rollout.VerdictOOMKilled {
		reason = reasonOOMKilled
	}
	switch {
	case reason == reasonOOMKilled:
		return []string{
			"the container exceeded its memory limit: raise resources.limits.memory (with requests equal, for Guaranteed QoS)",
			"size the limit for the peak while vLLM loads the weights, which is well above its steady-state use",
			"vLLM uses /dev/shm for inter-process communication and the default is only 64Mi: mount an emptyDir with medium: Memory (and a sizeLimit) at /dev/shm",
		}
	case reason == reasonCrashLoopBackOff || d.Verdict == rollout.VerdictCrashLoop || reason == "Error" || reason == "Restarted":
		return []string{
			fmt.Sprintf("read why the previous instance exited: kubectl logs %s%s --previous%s", podName, container, ns),
			"check the container's args: the model name, --tensor-parallel-size against the GPUs requested, flags this vLLM version knows",
			"check the model path: the weights must be where --model points (volume mounted, download finished), and fit the GPU memory",
		}
	case isImagePullReason(reason):
		image := ""
		if pod != nil {
			for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
				if c.Name == d.Container {
					image = " (" + c.Image + ")"
				}
			}
		}
		return []string{
			"check the image name and tag" + image + ": does that tag exist in the registry?",
			"check the registry credentials: imagePullSecrets on the pod or its ServiceAccount, and that the nodes can reach the registry",
		}
	case reason == reasonCreateContainerCfg:
		return []string{
			fmt.Sprintf("a ConfigMap, Secret or key the pod references does not exist: kubectl describe pod %s%s", podName, ns),
		}
	case isContainerErrorReason(reason):
		return []string{
			fmt.Sprintf("the container runtime could not create or start the container: check command, args, volume mounts and securityContext (kubectl describe pod %s%s)", podName, ns),
		}
	case reason == reasonUnschedulable || d.Verdict == rollout.VerdictUnschedulable:
		if requestsGPU(pod) || strings.Contains(d.Message, string(vllm.GPUResource)) {
			return []string{
				"GPU capacity: the cluster lacks free nvidia.com/gpu for this pod; compare its request with the nodes' allocatable GPUs (kubectl describe nodes); a rolling update with maxSurge > 0 needs a spare GPU for the surge pod — with full GPUs use maxSurge 0, maxUnavailable 1",
				"taints and tolerations: GPU nodes are often tainted (nvidia.com/gpu:NoSchedule); the pod needs the matching toleration, and its nodeSelector/affinity must match the GPU nodes",
				"ResourceQuota: a quota on requests.nvidia.com/gpu may cap the namespace: kubectl describe quota" + ns,
			}
		}
		return []string{
			"no node satisfies the pod's requests, nodeSelector, affinity or tolerations: see the FailedScheduling event (kubectl describe pod " + podName + ns + ")",
			"ResourceQuota and LimitRange may also constrain the namespace: kubectl describe quota" + ns,
		}
	case reason == reasonFailedCreate:
		if strings.Contains(d.Message, "exceeded quota") {
			return []string{"a ResourceQuota refuses the pods: kubectl describe quota" + ns + "; lower the requests or replicas, or raise the quota"}
		}
		if name, ok := strings.CutPrefix(d.Object, "statefulset/"); ok {
			return []string{"the StatefulSet cannot create pods: an admission policy, quota, LimitRange or its volumeClaimTemplates refuse them (kubectl describe statefulset " + name + ns + ")"}
		}
		return []string{"the ReplicaSet cannot create pods: an admission policy, quota or LimitRange refuses them (kubectl describe rs" + ns + ")"}
	case reason == reasonProgressDeadline:
		return []string{
			"the Deployment made no progress within spec.progressDeadlineSeconds: raise it if loading the model takes longer, or fix what keeps the new pods from becoming available",
		}
	case reason == reasonContainersNotReady || reason == reasonTimeout:
		return []string{
			"the pods run but are not Ready: the weights may still be loading (raise --timeout), or the readiness probe's path, port or timeouts are wrong",
			fmt.Sprintf("kubectl describe pod %s%s shows the readiness probe's failures in its events", podName, ns),
		}
	}
	return nil
}

func requestsGPU(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, c := range pod.Spec.Containers {
		for name := range c.Resources.Requests {
			if strings.HasSuffix(string(name), "/gpu") {
				return true
			}
		}
		for name := range c.Resources.Limits {
			if strings.HasSuffix(string(name), "/gpu") {
				return true
			}
		}
	}
	return false
}
