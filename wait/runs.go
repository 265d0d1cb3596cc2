// How the RolloutWatcher waits for objects that run to completion: Jobs
// and bare Pods with restartPolicy Never or OnFailure (Helm hooks and
// tests). Their informers, their verdicts (the rollout verdicts on their
// pods, a Job's Failed condition, a Pod's phase Failed) and diagnoses.

package wait

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// runWatch follows a Job, or a bare Pod that runs to completion. Its
// informers are on the Job or the Pod (self) and a Job's pods (pods; nil
// for a Pod); its stall measures how long its controller has not started
// it; its suspect is the most suspect pod seen (the one that failed last,
// or else one the verdicts suspect), kept when the pod goes away (a Job's
// controller deletes its pods when it fails).
type runWatch struct {
	watchBase
	isJob bool
	judge *podJudge
}

// runsToCompletion reports whether the RolloutWatcher itself waits for
// obj as an object that runs to completion: a Job, or a Pod with
// restartPolicy Never or OnFailure.
func runsToCompletion(obj *unstructured.Unstructured) (ok, isJob bool) {
	gvk := obj.GroupVersionKind()
	switch {
	case gvk.Group == batchv1.GroupName && gvk.Kind == "Job":
		return true, true
	case gvk.Group == "" && gvk.Kind == "Pod":
		p, _, _ := unstructured.NestedString(obj.Object, "spec", "restartPolicy")
		return p == string(corev1.RestartPolicyNever) || p == string(corev1.RestartPolicyOnFailure), false
	}
	return false, false
}

func newRunWatch(idx int, ref object.Ref, isJob bool, judge *podJudge) *runWatch {
	return &runWatch{watchBase: newWatchBase(idx, ref), isJob: isJob, judge: judge}
}

func (rw *runWatch) report(r *rolloutRun, st rollout.Status, msg, _ string) { r.setRun(rw, st, msg) }

// rolledOut: a Job or Pod has no rollout.
func (rw *runWatch) rolledOut(*rolloutRun) {}

func (rw *runWatch) failedWith(r *rolloutRun, _ rollout.Verdict, d *rollout.Diagnosis) {
	r.setRun(rw, rollout.StatusFailed, d.Summary())
}

// turnedTo: a Job or Pod ends the pause between evaluations by its pods'
// alarms only.
func (rw *runWatch) turnedTo(any) bool { return false }

// eventAbout: the events of a Job or its pods are not reported.
func (rw *runWatch) eventAbout(*corev1.Event) string { return "" }

// setRun records the status of a Job or Pod and sends an event when it
// changed.
func (r *rolloutRun) setRun(rw *runWatch, st rollout.Status, msg string) {
	msg = termout.SanitizeLine(msg)
	cur := &r.res.Objects[rw.idx]
	if rw.sent && cur.Status == st && cur.Message == msg {
		return
	}
	rw.sent = true
	cur.Status, cur.Message = st, msg
	r.emit(rollout.Event{Object: rw.ref, Status: st, Message: msg})
}

// start starts the informer of a Job or a Pod (field selector on its
// name); a Job's pods are watched once its UID is known (startJobPods).
func (rw *runWatch) start(r *rolloutRun) {
	if rw.isJob {
		c := r.client.BatchV1().Jobs(rw.namespace)
		rw.self = r.newInformer("watch "+rw.ref.String(), listWatch(c.List, c.Watch, byName(rw.name)), &batchv1.Job{}, r.pokeHandler())
		return
	}
	c := r.podsIn(rw.namespace)
	rw.self = r.newInformer("watch "+rw.ref.String(), listWatch(c.List, c.Watch, byName(rw.name)), &corev1.Pod{}, r.podHandler())
}

// startJobPods starts the informer of a Job's pods: its selector (the
// controller-uid label the Job controller sets).
func (r *rolloutRun) startJobPods(rw *runWatch, job *batchv1.Job) error {
	sel := labels.SelectorFromSet(labels.Set{batchv1.ControllerUidLabel: string(job.UID)})
	if job.Spec.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
		if err != nil {
			return fmt.Errorf("%s: invalid selector: %w", rw.ref, err)
		}
		sel = s
	}
	r.watchPods(&rw.watchBase, sel.String(), r.podHandler())
	return nil
}

// current returns rw's Job or Pod (see rolloutRun.current).
func (rw *runWatch) current(r *rolloutRun) metav1.Object {
	m, _ := r.current(rw, func() {
		rw.stopPods()
		rw.suspect, rw.judge = nil, r.newJudge()
	}).(metav1.Object)
	return m
}

// evaluate brings a Job or Pod up to date, and returns its failure and
// when to evaluate again without news.
func (rw *runWatch) evaluate(r *rolloutRun, now time.Time) (*failure, time.Time) {
	if rw.isJob {
		return r.evaluateJob(rw, now)
	}
	return r.evaluatePod(rw, now)
}

// evaluateJob judges a Job: Current when its condition Complete is True,
// failed when its condition Failed is True or one of its pods meets a
// failure verdict (before the Job's backoffLimit is spent).
func (r *rolloutRun) evaluateJob(rw *runWatch, now time.Time) (*failure, time.Time) {
	job, _ := rw.current(r).(*batchv1.Job)
	if job == nil {
		return nil, time.Time{}
	}
	if rw.pods == nil {
		if err := r.startJobPods(rw, job); err != nil {
			return selectorFailure(rw, rollout.VerdictJobFailed, err.Error()), time.Time{}
		}
	}
	if c := jobCondition(job, batchv1.JobComplete); c != nil {
		rw.done = true
		r.setRun(rw, rollout.StatusCurrent, fmt.Sprintf("job completed: %d succeeded", job.Status.Succeeded))
		return nil, time.Time{}
	}
	rw.done = false
	if !rw.pods.synced() {
		// Its pods tell why it fails: wait for them.
		r.setRun(rw, rollout.StatusInProgress, jobProgress(job))
		return nil, time.Time{}
	}
	fail, recheck := r.judgeRunPods(rw, rw.runPods(), now)
	if fail == nil {
		// The Job controller stamps startTime (or a condition) at its
		// first sync of a Job that is not suspended.
		pending := job.Status.StartTime == nil && len(job.Status.Conditions) == 0 && !ptr.Deref(job.Spec.Suspend, false)
		fail, recheck = r.checkStall(rw, "Job", "", job.Generation, -1, pending, now, recheck)
	}
	if c := jobCondition(job, batchv1.JobFailed); c != nil {
		return &failure{verdict: rollout.VerdictJobFailed, w: rw, finding: rw.suspect, reason: c.Reason,
			message: joinNonEmpty(": ", "job failed", c.Reason, c.Message)}, time.Time{}
	}
	if fail != nil {
		return fail, time.Time{}
	}
	msg := jobProgress(job)
	if rw.suspect != nil {
		msg += "; " + suspectMessage(rw.suspect)
	}
	r.setRun(rw, rollout.StatusInProgress, msg)
	return nil, recheck
}

// evaluatePod judges a bare Pod that runs to completion: Current when its
// phase is Succeeded, failed when it is Failed or the pod meets a failure
// verdict.
func (r *rolloutRun) evaluatePod(rw *runWatch, now time.Time) (*failure, time.Time) {
	pod, _ := rw.current(r).(*corev1.Pod)
	if pod == nil {
		return nil, time.Time{}
	}
	if pod.Status.Phase == corev1.PodSucceeded {
		rw.done = true
		r.setRun(rw, rollout.StatusCurrent, "pod succeeded")
		return nil, time.Time{}
	}
	rw.done = false
	fail, recheck := r.judgeRunPods(rw, []*corev1.Pod{pod}, now)
	if fail != nil {
		return fail, time.Time{}
	}
	if pod.Status.Phase == corev1.PodFailed {
		return &failure{verdict: rollout.VerdictPodFailed, w: rw, finding: rw.suspect, reason: string(corev1.PodFailed),
			message: joinNonEmpty(": ", "pod failed", pod.Status.Reason, pod.Status.Message)}, time.Time{}
	}
	msg := "pod is " + podPhase(pod, false).Phase
	if rw.suspect != nil {
		msg += "; " + suspectMessage(rw.suspect)
	}
	r.setRun(rw, rollout.StatusInProgress, msg)
	return nil, recheck
}

// judgeRunPods applies the pod verdicts to the pods of a Job (or to a
// bare Pod), oldest first, and records the most suspect one. It returns
// the first failure, and when to judge again without news.
func (r *rolloutRun) judgeRunPods(rw *runWatch, pods []*corev1.Pod, now time.Time) (fail *failure, recheck time.Time) {
	obs := r.observations(pods)
	var failed, suspect *podFinding
	for i, pod := range pods {
		if pod.Status.Phase == corev1.PodSucceeded {
			continue
		}
		f, suspects, again := rw.judge.judge(pod, obs[i], now)
		if f != nil && fail == nil {
			fail = &failure{verdict: f.Verdict, w: rw, finding: f}
		}
		if pod.Status.Phase == corev1.PodFailed {
			failed = failedPodFinding(pod)
		}
		if suspect == nil && len(suspects) > 0 {
			suspect = &suspects[0]
		}
		recheck = earliest(recheck, again)
	}
	rw.judge.sweep()
	switch {
	case fail != nil:
		rw.suspect = fail.finding
	case failed != nil:
		rw.suspect = failed
	case suspect != nil:
		rw.suspect = suspect
	}
	return fail, recheck
}

// runPods returns a Job's pods that are not being deleted, oldest first.
func (rw *runWatch) runPods() []*corev1.Pod {
	pods := rw.podsOf(&rw.uid, live)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return pods
}

// failedPodFinding describes a pod whose phase is Failed: its first
// container that terminated badly, or else the pod's reason (evicted,
// deadline exceeded, ...).
func failedPodFinding(pod *corev1.Pod) *podFinding {
	for _, statuses := range [2][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range statuses {
			cs := &statuses[i]
			t := cs.State.Terminated
			if t == nil || (t.ExitCode == 0 && (t.Reason == "" || t.Reason == "Completed")) {
				continue
			}
			f := newContainerFinding(pod, cs)
			f.Verdict, f.Reason, f.ExitCode, f.Message = rollout.VerdictProgressing, t.Reason, t.ExitCode, vllmcause.TerminationMessage(t)
			if f.Reason == "" {
				f.Reason = "Error"
			}
			return f
		}
	}
	reason := pod.Status.Reason
	if reason == "" {
		reason = string(corev1.PodFailed)
	}
	return &podFinding{Verdict: rollout.VerdictProgressing, Reason: reason, Pod: pod, Message: pod.Status.Message}
}

// jobProgress counts a Job's pods: "1 active, 0 succeeded, 2 failed".
func jobProgress(job *batchv1.Job) string {
	return fmt.Sprintf("%d active, %d succeeded, %d failed", job.Status.Active, job.Status.Succeeded, job.Status.Failed)
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// diagnose explains the failure of a Job or Pod: from its failed (or
// most suspect) pod, with the pod's events, log tail and cause, as a
// Deployment's.
func (rw *runWatch) diagnose(ctx context.Context, r *rolloutRun, f *failure) *rollout.Diagnosis {
	if f.finding == nil {
		d := &rollout.Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: rw.object, Namespace: rw.namespace, Message: f.message}
		d.Hints = []string{fmt.Sprintf("kubectl describe %s%s shows its conditions and events", rw.object, nsFlag(rw.namespace))}
		return d
	}
	d := r.podDiagnosis(ctx, &rw.watchBase, f.verdict, f.finding)
	d.Message = joinNonEmpty("; ", f.message, d.Message)
	return d
}

// timeout explains a timeout on a Job or Pod not done yet.
func (rw *runWatch) timeout(ctx context.Context, r *rolloutRun) *rollout.Diagnosis {
	msg := "waiting for " + rw.object + " to complete: " + r.res.Objects[rw.idx].Message
	if rw.suspect == nil {
		d := &rollout.Diagnosis{Verdict: rollout.VerdictTimeout, Reason: reasonTimeout, Object: rw.object, Namespace: rw.namespace, Message: msg}
		d.Hints = []string{fmt.Sprintf("kubectl describe %s%s shows its conditions and events", rw.object, nsFlag(rw.namespace))}
		return d
	}
	d := r.podDiagnosis(ctx, &rw.watchBase, rollout.VerdictTimeout, rw.suspect)
	d.Reason = reasonTimeout
	d.Message = msg
	return d
}
