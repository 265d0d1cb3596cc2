// Verdicts: the failures a RolloutWatcher detects, its options, kubectl
// rollout status' rules for Deployments, and the judging of the pods of a
// new ReplicaSet (or of a StatefulSet's update revision).

package wait

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	deploymentutil "k8s.io/kubectl/pkg/util/deployment"
	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/internal/vllm"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// Defaults of [RolloutOptions].
const (
	DefaultMaxRestarts           int32 = 2
	DefaultMaxOOMKills                 = 1
	DefaultImagePullObservations       = 2
	DefaultUnschedulableTimeout        = 60 * time.Second
	DefaultLogTailLines          int64 = 20
	DefaultMaxEvents                   = 10
	// DefaultControllerStallTimeout: see RolloutOptions.ControllerStallTimeout.
	DefaultControllerStallTimeout = 60 * time.Second
)

// RolloutOptions tune the failure verdicts of a [RolloutWatcher]. Zero
// fields take the defaults.
type RolloutOptions struct {
	// MaxRestarts: a container of a new pod in CrashLoopBackOff with at
	// least this many restarts fails the rollout (default 2).
	MaxRestarts int32
	// MaxOOMKills: this many distinct OOMKilled terminations of one
	// container of a new pod (in state or lastState) fail the rollout
	// (default 1).
	MaxOOMKills int
	// ImagePullObservations: a container of a new pod seen waiting with
	// ErrImagePull, ImagePullBackOff or InvalidImageName in this many
	// consecutive observations of the pod fails the rollout (default 2).
	ImagePullObservations int
	// UnschedulableTimeout: a new pod unschedulable (PodScheduled=False,
	// reason Unschedulable) for this long, measured from when the watcher
	// first saw it so, fails the rollout (default 60s).
	UnschedulableTimeout time.Duration
	// LogTailLines is how many lines of the previous container instance's
	// log a diagnosis holds (default 20).
	LogTailLines int64
	// MaxEvents is how many of the pod's most recent events a diagnosis
	// holds (default 10).
	MaxEvents int
	// WaitOnKnownCause, when true, turns off VerdictKnownCause: a crash
	// whose log names a decisive cause waits for MaxRestarts like any
	// other (--fail-on-known-cause=false). When false (the default), the
	// log of each termination of a container of a watched pod is read once
	// and classified, and a decisive cause fails the rollout at once.
	WaitOnKnownCause bool
	// ControllerStallTimeout: a Deployment, StatefulSet or LeaderWorkerSet
	// whose controller has not observed its latest generation
	// (status.observedGeneration < metadata.generation), or a Job its
	// controller has not started (no status.startTime, no condition), for
	// this long fails the rollout with VerdictControllerStalled (default
	// 60s). Time while the API server cannot be reached does not count:
	// the budget starts again once the watches are re-established.
	ControllerStallTimeout time.Duration
	// Clock measures durations (the unschedulable timer, the timeout) and
	// stamps events; default the wall clock.
	Clock clock.WithTicker
	// Values is the values mapping of the chart whose pods are diagnosed
	// (nil: none known, so hints name flags and the pods' values only).
	// A wait's Options.Values, when set, takes its place.
	Values vllm.ValuesMap

	// idle, when set (by tests), is called each time the run loop has
	// evaluated and, the wait not over, is about to wait for news: a
	// deterministic sign that what it evaluated did not end the wait.
	idle func()
}

func (o RolloutOptions) withDefaults() RolloutOptions {
	if o.MaxRestarts <= 0 {
		o.MaxRestarts = DefaultMaxRestarts
	}
	if o.MaxOOMKills <= 0 {
		o.MaxOOMKills = DefaultMaxOOMKills
	}
	if o.ImagePullObservations <= 0 {
		o.ImagePullObservations = DefaultImagePullObservations
	}
	if o.UnschedulableTimeout <= 0 {
		o.UnschedulableTimeout = DefaultUnschedulableTimeout
	}
	if o.LogTailLines <= 0 {
		o.LogTailLines = DefaultLogTailLines
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.ControllerStallTimeout <= 0 {
		o.ControllerStallTimeout = DefaultControllerStallTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}

// Container waiting reasons the verdicts look at.
const (
	reasonCrashLoopBackOff     = "CrashLoopBackOff"
	reasonOOMKilled            = "OOMKilled"
	reasonErrImagePull         = "ErrImagePull"
	reasonImagePullBackOff     = "ImagePullBackOff"
	reasonInvalidImageName     = "InvalidImageName"
	reasonCreateContainerCfg   = "CreateContainerConfigError"
	reasonCreateContainer      = "CreateContainerError"
	reasonRunContainer         = "RunContainerError"
	reasonProgressDeadline     = "ProgressDeadlineExceeded"
	reasonFailedCreate         = "FailedCreate"
	reasonUnschedulable        = corev1.PodReasonUnschedulable
	reasonTimeout              = "Timeout"
	reasonObjectFailed         = "Failed"
	reasonContainersNotReady   = "ContainersNotReady"
	podTemplateHashLabel       = appsv1.DefaultDeploymentUniqueLabelKey
	deploymentRevisionAnnotKey = deploymentutil.RevisionAnnotation
)

func isImagePullReason(r string) bool {
	return r == reasonErrImagePull || r == reasonImagePullBackOff || r == reasonInvalidImageName
}

func isContainerErrorReason(r string) bool {
	return r == reasonCreateContainerCfg || r == reasonCreateContainer || r == reasonRunContainer
}

// rolloutStatus applies kubectl rollout status' rules
// (k8s.io/kubectl/pkg/polymorphichelpers DeploymentStatusViewer) to d: done
// when rolled out, failed when the progress deadline passed, and a message
// either way.
func rolloutStatus(d *appsv1.Deployment) (done, failed bool, msg string) {
	if d.Generation > d.Status.ObservedGeneration {
		return false, false, "waiting for the deployment spec update to be observed"
	}
	if c := deploymentutil.GetDeploymentCondition(d.Status, appsv1.DeploymentProgressing); c != nil && c.Reason == reasonProgressDeadline {
		m := fmt.Sprintf("deployment %q exceeded its progress deadline", d.Name)
		if c.Message != "" {
			m += ": " + c.Message
		}
		return false, true, m
	}
	if d.Spec.Replicas != nil && d.Status.UpdatedReplicas < *d.Spec.Replicas {
		return false, false, fmt.Sprintf("%d out of %d new replicas have been updated", d.Status.UpdatedReplicas, *d.Spec.Replicas)
	}
	if d.Status.Replicas > d.Status.UpdatedReplicas {
		return false, false, fmt.Sprintf("%d old replicas are pending termination", d.Status.Replicas-d.Status.UpdatedReplicas)
	}
	if d.Status.AvailableReplicas < d.Status.UpdatedReplicas {
		return false, false, fmt.Sprintf("%d of %d updated replicas are available", d.Status.AvailableReplicas, d.Status.UpdatedReplicas)
	}
	return true, false, "successfully rolled out"
}

// podFinding is a problem seen on one pod of a new ReplicaSet: a failure
// verdict, or (Verdict Progressing) a suspicion that does not fail the
// rollout yet.
type podFinding struct {
	Verdict      rollout.Verdict
	Reason       string
	Pod          *corev1.Pod
	Container    string
	ExitCode     int32
	RestartCount int32
	Message      string
	// restarted: the container has a previous instance whose logs may say
	// why it ended.
	restarted bool
	// ran: the container ran at some point (so it may have logs).
	ran bool
	// crashed: the container ended badly, so the log of its previous
	// instance (kubectl logs --previous) is the one to read.
	crashed bool
	// cause and evidence: the decisive cause the log of the termination
	// named (VerdictKnownCause), and the line that named it.
	cause    vllmcause.Cause
	evidence string
	// log, when set, is the log of the termination already read: while
	// the pod existed (a LeaderWorkerSet's group is deleted and recreated
	// under the same names at a container's restart), or to judge a
	// decisive cause. The diagnosis shows it instead of reading the log
	// again.
	log *capturedLog
}

// podMemory is what the verdicts remember about one pod across
// observations.
type podMemory struct {
	// seen is the observation count of the pod last judged.
	seen int
	// pullStreak counts, per container, consecutive observations waiting
	// on an image pull error.
	pullStreak map[string]int
	// ooms holds, per container, the distinct OOMKilled terminations seen.
	ooms map[string]map[string]bool
	// unschedulableSince is when the pod was first seen unschedulable (zero
	// when it is not).
	unschedulableSince time.Time
	// gen is the judge's generation when the pod was last judged.
	gen uint64
	// causes holds, per container termination (see knownCauseKey), the
	// cause its log named: each termination's log is read once.
	causes map[string]knownCause
}

// podJudge applies the pod verdicts of RolloutOptions to the pods of one
// new ReplicaSet (or StatefulSet), remembering what needs more than one observation.
type podJudge struct {
	opts RolloutOptions
	mem  map[types.UID]*podMemory
	// gen counts the sweeps: the memory of a pod not judged since the last
	// one is dropped by the next.
	gen uint64
	// classify, when set, reads and classifies the log of a container's
	// termination (VerdictKnownCause); nil turns that verdict off.
	classify terminationClassifier
}

func newPodJudge(opts RolloutOptions) *podJudge {
	return &podJudge{opts: opts, mem: map[types.UID]*podMemory{}}
}

func (j *podJudge) memory(uid types.UID) *podMemory {
	m, ok := j.mem[uid]
	if !ok {
		m = &podMemory{}
		j.mem[uid] = m
	}
	m.gen = j.gen
	return m
}

// sweep drops the memory of the pods not judged since the last sweep:
// gone from the new ReplicaSet.
func (j *podJudge) sweep() {
	for uid, m := range j.mem {
		if m.gen != j.gen {
			delete(j.mem, uid)
		}
	}
	j.gen++
}

// judge evaluates pod at now. obs counts the versions of the pod observed
// so far (the informer's deliveries): a count not seen before is a new
// observation; 0 makes every call one. It returns the failure found (nil
// if none), the suspicions that do not fail the rollout yet, and when the
// pod must be judged again even without news (zero: no need).
func (j *podJudge) judge(pod *corev1.Pod, obs int, now time.Time) (fail *podFinding, suspects []podFinding, recheck time.Time) {
	m := j.memory(pod.UID)
	fresh := obs == 0 || obs != m.seen
	m.seen = obs

	for _, statuses := range [2][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range statuses {
			f := j.judgeContainer(pod, &statuses[i], m, fresh)
			if f == nil {
				continue
			}
			if f.Verdict.Failed() {
				if fail == nil {
					fail = f
				}
				continue
			}
			suspects = append(suspects, *f)
		}
	}
	if fail != nil {
		return fail, suspects, time.Time{}
	}

	if c := podCondition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Reason == reasonUnschedulable {
		if m.unschedulableSince.IsZero() {
			m.unschedulableSince = now
		}
		f := podFinding{Verdict: rollout.VerdictProgressing, Reason: reasonUnschedulable, Pod: pod, Message: c.Message}
		deadline := m.unschedulableSince.Add(j.opts.UnschedulableTimeout)
		if !now.Before(deadline) {
			f.Verdict = rollout.VerdictUnschedulable
			f.Message = fmt.Sprintf("unschedulable for %s: %s", now.Sub(m.unschedulableSince).Round(time.Second), c.Message)
			return &f, suspects, time.Time{}
		}
		return nil, append(suspects, f), deadline
	}
	m.unschedulableSince = time.Time{}
	return nil, suspects, time.Time{}
}

// judgeContainer evaluates one container status of pod.
func (j *podJudge) judgeContainer(pod *corev1.Pod, cs *corev1.ContainerStatus, m *podMemory, fresh bool) *podFinding {
	waiting := ""
	if cs.State.Waiting != nil {
		waiting = cs.State.Waiting.Reason
	}
	if isImagePullReason(waiting) {
		return j.judgeImagePull(pod, cs, m, fresh)
	}
	if fresh {
		delete(m.pullStreak, cs.Name)
	}
	last := cs.LastTerminationState.Terminated
	if waiting == "" && cs.State.Terminated == nil && last == nil && cs.RestartCount == 0 {
		// Running (or not started) and never restarted: nothing to say.
		// The common case of a big rollout, so nothing is allocated.
		return nil
	}
	f := newContainerFinding(pod, cs)

	if isContainerErrorReason(waiting) {
		f.Verdict, f.Reason, f.Message = rollout.VerdictContainerError, waiting, cs.State.Waiting.Message
		return f
	}
	if j.judgeOOMKills(cs, m, f) {
		return f
	}
	f = j.judgeFailures(cs, waiting, f)
	if f != nil && !f.Verdict.Failed() {
		j.judgeKnownCause(pod, cs, m, f)
	}
	return f
}

// newContainerFinding is a VerdictProgressing finding about container cs
// of pod, without reason yet.
func newContainerFinding(pod *corev1.Pod, cs *corev1.ContainerStatus) *podFinding {
	last := cs.LastTerminationState.Terminated
	f := &podFinding{Verdict: rollout.VerdictProgressing, Pod: pod, Container: cs.Name, RestartCount: cs.RestartCount}
	f.restarted = last != nil || cs.RestartCount > 0
	f.ran = f.restarted || cs.State.Running != nil || cs.State.Terminated != nil
	f.crashed = last != nil || cs.State.Terminated != nil
	return f
}

// judgeImagePull evaluates container cs waiting for its image. Only
// consecutive observations count: it fails with VerdictImagePull after
// opts.ImagePullObservations fresh ones.
func (j *podJudge) judgeImagePull(pod *corev1.Pod, cs *corev1.ContainerStatus, m *podMemory, fresh bool) *podFinding {
	if fresh {
		if m.pullStreak == nil {
			m.pullStreak = map[string]int{}
		}
		m.pullStreak[cs.Name]++
	}
	f := newContainerFinding(pod, cs)
	f.Reason, f.Message = cs.State.Waiting.Reason, cs.State.Waiting.Message
	if m.pullStreak[cs.Name] >= j.opts.ImagePullObservations {
		f.Verdict = rollout.VerdictImagePull
	}
	return f
}

// judgeOOMKills records the OOMKilled terminations of container cs, in
// the current or the last state, and fills f with the last one. It
// reports whether there was one; f.Verdict is VerdictOOMKilled once
// opts.MaxOOMKills distinct terminations were seen.
func (j *podJudge) judgeOOMKills(cs *corev1.ContainerStatus, m *podMemory, f *podFinding) bool {
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t == nil || t.Reason != reasonOOMKilled {
			continue
		}
		seen := m.ooms[cs.Name]
		if seen == nil {
			if m.ooms == nil {
				m.ooms = map[string]map[string]bool{}
			}
			seen = map[string]bool{}
			m.ooms[cs.Name] = seen
		}
		seen[terminationKey(t)] = true
		f.Reason, f.ExitCode = reasonOOMKilled, t.ExitCode
		f.Message = vllmcause.TerminationMessage(t)
		if len(seen) >= j.opts.MaxOOMKills {
			f.Verdict = rollout.VerdictOOMKilled
			return true
		}
	}
	return f.Reason == reasonOOMKilled
}

// judgeFailures fills f for container cs, which was neither pulling its
// image, in a container error nor OOMKilled: a crash loop (failing with
// VerdictCrashLoop after opts.MaxRestarts restarts), a failed
// termination, another waiting reason or a restart. It returns nil when
// there is nothing to say.
func (j *podJudge) judgeFailures(cs *corev1.ContainerStatus, waiting string, f *podFinding) *podFinding {
	last := cs.LastTerminationState.Terminated
	if waiting == reasonCrashLoopBackOff {
		f.Reason, f.Message = reasonCrashLoopBackOff, cs.State.Waiting.Message
		if last != nil {
			f.ExitCode = last.ExitCode
			f.Message = joinNonEmpty("; ", f.Message, "last termination: "+vllmcause.TerminationMessage(last))
		}
		if cs.RestartCount >= j.opts.MaxRestarts {
			f.Verdict = rollout.VerdictCrashLoop
		}
		return f
	}
	if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
		f.Reason, f.ExitCode, f.Message = t.Reason, t.ExitCode, vllmcause.TerminationMessage(t)
		if f.Reason == "" {
			f.Reason = "Error"
		}
		return f
	}
	if waiting != "" && waiting != "ContainerCreating" && waiting != "PodInitializing" {
		f.Reason, f.Message = waiting, cs.State.Waiting.Message
		return f
	}
	if cs.RestartCount > 0 && last != nil {
		f.Reason, f.ExitCode, f.Message = "Restarted", last.ExitCode, "last termination: "+vllmcause.TerminationMessage(last)
		return f
	}
	return nil
}

// terminationKey identifies one termination of a container.
func terminationKey(t *corev1.ContainerStateTerminated) string {
	if t.ContainerID != "" {
		return t.ContainerID
	}
	return t.FinishedAt.UTC().Format(time.RFC3339Nano) + "/" + t.StartedAt.UTC().Format(time.RFC3339Nano)
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func podReady(pod *corev1.Pod) bool {
	c := podCondition(pod, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
