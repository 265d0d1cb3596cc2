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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// runWatch follows a Job, or a bare Pod that runs to completion.
type runWatch struct {
	idx       int
	ref       object.Ref
	namespace string
	name      string
	object    string // "job.batch/migrate", "pod/db-check"
	isJob     bool

	self  *informer // the Job, or the Pod
	pods  *informer // a Job's pods; nil for a Pod
	uid   types.UID
	judge *podJudge

	done bool
	msg  string
	sent bool
	// stall measures how long its controller has not started it.
	stall stallTimer
	// suspect is the most suspect pod seen: the one that failed last, or
	// else one the verdicts suspect. It is kept when the pod goes away (a
	// Job's controller deletes its pods when it fails).
	suspect *podFinding
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
	return &runWatch{idx: idx, ref: ref, namespace: ref.Namespace, name: ref.Name, object: rollout.ObjectName(ref), isJob: isJob, judge: judge}
}

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

// startRun starts the informer of a Job or a Pod (field selector on its
// name); a Job's pods are watched once its UID is known (startJobPods).
func (r *rolloutRun) startRun(rw *runWatch) {
	name := fields.OneTermEqualSelector("metadata.name", rw.name).String()
	byName := func(o *metav1.ListOptions) { o.FieldSelector = name }
	if rw.isJob {
		c := r.client.BatchV1().Jobs(rw.namespace)
		rw.self = r.newInformer("watch "+rw.ref.String(), listWatch(c.List, c.Watch, byName), &batchv1.Job{}, r.pokeHandler())
		return
	}
	c := r.podsIn(rw.namespace)
	rw.self = r.newInformer("watch "+rw.ref.String(), listWatch(c.List, c.Watch, byName), &corev1.Pod{}, r.podHandler())
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
	s := sel.String()
	c := r.podsIn(rw.namespace)
	rw.pods = r.newInformer("watch the pods of "+rw.ref.String(),
		listWatch(c.List, c.Watch, func(o *metav1.ListOptions) { o.LabelSelector = s }), &corev1.Pod{}, r.podHandler())
	return nil
}

// current returns the object of rw's synced informer (nil when it has not
// synced, or the object is missing: recorded as NotFound), starting over
// when it is a new (or recreated) one.
func (r *rolloutRun) current(rw *runWatch) metav1.Object {
	obj := watchedObject(rw.self, rw.namespace+"/"+rw.name, &rw.uid, func() {
		rw.done = false
		r.setRun(rw, rollout.StatusNotFound, "not found")
	}, func() {
		if rw.pods != nil {
			rw.pods.cancel()
		}
		rw.pods, rw.suspect, rw.judge = nil, nil, r.newJudge()
	})
	m, _ := obj.(metav1.Object)
	return m
}

// evaluateRun brings a Job or Pod up to date, and returns its failure and
// when to evaluate again without news.
func (r *rolloutRun) evaluateRun(rw *runWatch, now time.Time) (*failure, time.Time) {
	if rw.isJob {
		return r.evaluateJob(rw, now)
	}
	return r.evaluatePod(rw, now)
}

// evaluateJob judges a Job: Current when its condition Complete is True,
// failed when its condition Failed is True or one of its pods meets a
// failure verdict (before the Job's backoffLimit is spent).
func (r *rolloutRun) evaluateJob(rw *runWatch, now time.Time) (*failure, time.Time) {
	job, _ := r.current(rw).(*batchv1.Job)
	if job == nil {
		return nil, time.Time{}
	}
	if rw.pods == nil {
		if err := r.startJobPods(rw, job); err != nil {
			return &failure{verdict: rollout.VerdictJobFailed, run: rw, reason: "InvalidSelector", message: err.Error()}, time.Time{}
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
	fail, recheck := r.judgeRunPods(rw, r.runPods(rw), now)
	if fail == nil {
		// The Job controller stamps startTime (or a condition) at its
		// first sync of a Job that is not suspended.
		pending := job.Status.StartTime == nil && len(job.Status.Conditions) == 0 && !ptr.Deref(job.Spec.Suspend, false)
		if after, again := r.stalled(&rw.stall, job.Generation, pending, now); after > 0 {
			fail = stallFailure(&ControllerStalledError{Object: "Job " + rw.namespace + "/" + rw.name, Ref: rw.object,
				Namespace: rw.namespace, Generation: job.Generation, Observed: -1, After: after})
			fail.run = rw
		} else if !again.IsZero() && (recheck.IsZero() || again.Before(recheck)) {
			recheck = again
		}
	}
	if c := jobCondition(job, batchv1.JobFailed); c != nil {
		return &failure{verdict: rollout.VerdictJobFailed, run: rw, finding: rw.suspect, reason: c.Reason,
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
	pod, _ := r.current(rw).(*corev1.Pod)
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
		return &failure{verdict: rollout.VerdictPodFailed, run: rw, finding: rw.suspect, reason: string(corev1.PodFailed),
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
			fail = &failure{verdict: f.Verdict, run: rw, finding: f}
		}
		if pod.Status.Phase == corev1.PodFailed {
			failed = failedPodFinding(pod)
		}
		if suspect == nil && len(suspects) > 0 {
			suspect = &suspects[0]
		}
		if !again.IsZero() && (recheck.IsZero() || again.Before(recheck)) {
			recheck = again
		}
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
func (r *rolloutRun) runPods(rw *runWatch) []*corev1.Pod {
	all := rw.pods.list()
	pods := make([]*corev1.Pod, 0, len(all))
	for _, o := range all {
		pod, ok := o.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp != nil || pod.Namespace != rw.namespace {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.UID != rw.uid {
			continue
		}
		pods = append(pods, pod)
	}
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

// diagnoseRun explains the failure of a Job or Pod: from its failed (or
// most suspect) pod, with the pod's events, log tail and cause, as a
// Deployment's.
func (r *rolloutRun) diagnoseRun(ctx context.Context, f *failure) *rollout.Diagnosis {
	rw := f.run
	if f.finding == nil {
		d := &rollout.Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: rw.object, Namespace: rw.namespace, Message: f.message}
		d.Hints = []string{fmt.Sprintf("kubectl describe %s%s shows its conditions and events", rw.object, nsFlag(rw.namespace))}
		return d
	}
	g := diagnoser{client: r.client, opts: r.o}
	d := g.fromPod(ctx, f.verdict, rw.object, rw.namespace, f.finding, r.podEvents(ctx, rw.namespace, f.finding.Pod))
	d.Message = joinNonEmpty("; ", f.message, d.Message)
	return d
}

// runTimeout explains a timeout on a Job or Pod not done yet.
func (r *rolloutRun) runTimeout(ctx context.Context, rw *runWatch) *rollout.Diagnosis {
	msg := "waiting for " + rw.object + " to complete: " + r.res.Objects[rw.idx].Message
	if rw.suspect == nil {
		d := &rollout.Diagnosis{Verdict: rollout.VerdictTimeout, Reason: reasonTimeout, Object: rw.object, Namespace: rw.namespace, Message: msg}
		d.Hints = []string{fmt.Sprintf("kubectl describe %s%s shows its conditions and events", rw.object, nsFlag(rw.namespace))}
		return d
	}
	g := diagnoser{client: r.client, opts: r.o}
	d := g.fromPod(ctx, rollout.VerdictTimeout, rw.object, rw.namespace, rw.suspect, r.podEvents(ctx, rw.namespace, rw.suspect.Pod))
	d.Reason = reasonTimeout
	d.Message = msg
	return d
}
