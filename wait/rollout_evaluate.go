// How the RolloutWatcher judges a Deployment on every change: its rollout
// status, the pods of its new ReplicaSet, its progress deadline, its new
// ReplicaSet failing to create pods, and the Warning events to report.

package wait

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	deploymentutil "k8s.io/kubectl/pkg/util/deployment"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

// evaluate brings the state of every object the watcher follows itself up
// to date and reports the first failure, whether every one rolled out (or completed),
// and when to evaluate again without news (zero: no need).
func (r *rolloutRun) evaluate() (fail *failure, allDone bool, recheck time.Time) {
	r.mu.Lock()
	warnings := r.warnings
	r.warnings = nil
	r.mu.Unlock()

	allDone = true
	now := r.clk.Now()
	for _, w := range r.watches() {
		f, again := w.evaluate(r, now)
		if f != nil && fail == nil {
			fail = f
		}
		if !w.base().done {
			allDone = false
		}
		recheck = earliest(recheck, again)
	}
	for _, e := range warnings {
		r.reportEvent(e)
	}
	return fail, allDone, recheck
}

// evaluate brings dw up to date: its Deployment, its rollout
// status, its ReplicaSets and the informer of its new pods, then the
// verdicts on its new pods and on the Deployment and new ReplicaSet. It
// returns the failure found, and when to evaluate again without news.
func (dw *deployWatch) evaluate(r *rolloutRun, now time.Time) (*failure, time.Time) {
	d := dw.current(r)
	if d == nil {
		return nil, time.Time{}
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return selectorFailure(dw, rollout.VerdictFailedCreate, fmt.Sprintf("invalid selector: %v", err)), time.Time{}
	}
	if dw.rs == nil {
		r.startReplicaSets(dw, sel)
	}
	deadline := dw.observeStatus(d)
	if dw.rs.synced() {
		dw.syncReplicaSets(d, sel)
	}
	if err := r.followNewPods(dw, sel); err != nil {
		return selectorFailure(dw, rollout.VerdictFailedCreate, err.Error()), time.Time{}
	}
	if dw.done && r.opts.Canary != nil {
		dw.canaryReady = nil
		for _, pod := range dw.newPods() {
			if podReady(pod) {
				dw.canaryReady = append(dw.canaryReady, pod.Name)
			}
		}
	}
	if dw.done {
		dw.progress.Pods = nil
		r.set(dw, rollout.StatusCurrent, dw.msg, "")
		return nil, time.Time{}
	}

	fail, warnings, recheck := r.judgePods(dw, now)
	if fail == nil {
		fail, recheck = r.checkStall(dw, "Deployment", "", d.Generation, d.Status.ObservedGeneration, d.Generation > d.Status.ObservedGeneration, now, recheck)
	}
	status := rollout.StatusInProgress
	if fail == nil && deadline {
		status = rollout.StatusFailed
		fail = deadlineFailure(dw, d)
	}
	if fail == nil && dw.newRS != nil {
		fail = r.failedCreate(dw, d)
	}
	if fail != nil {
		recheck = time.Time{}
	}
	r.set(dw, status, dw.msg, "")
	r.warn(dw, status, warnings)
	return fail, recheck
}

// current returns dw's Deployment (see rolloutRun.current), and records
// it.
func (dw *deployWatch) current(r *rolloutRun) *appsv1.Deployment {
	d, _ := r.current(dw, func() {
		if dw.rs != nil {
			dw.rs.cancel()
		}
		if dw.pods != nil {
			dw.pods.cancel()
		}
		dw.rs, dw.pods, dw.podHash, dw.newRS, dw.oldRS = nil, nil, "", nil, nil
	}).(*appsv1.Deployment)
	if d != nil {
		dw.d = d
	}
	return d
}

// turnedTo reports whether the Deployment obj rolled out or exceeded its
// progress deadline.
func (dw *deployWatch) turnedTo(obj any) bool {
	d, _ := obj.(*appsv1.Deployment)
	if d == nil {
		return false
	}
	done, failed, _ := rolloutStatus(d)
	return done || failed
}

// observeStatus applies kubectl rollout status' rules to d, recording
// whether it rolled out, the message and the replica counts in dw. It
// reports whether d exceeded its progress deadline.
func (dw *deployWatch) observeStatus(d *appsv1.Deployment) (deadline bool) {
	done, deadline, msg := rolloutStatus(d)
	dw.observed(done, msg, ptr.Deref(d.Spec.Replicas, 1), d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
	return deadline
}

// followNewPods (re)starts the informer of the new pods when the new
// ReplicaSet's pod-template-hash changed, unless the rollout is done.
func (r *rolloutRun) followNewPods(dw *deployWatch, sel labels.Selector) error {
	hash := dw.progress.PodTemplateHash
	if hash == "" || hash == dw.podHash || dw.done {
		return nil
	}
	if dw.pods != nil {
		dw.pods.cancel()
	}
	return r.startPods(dw, sel, hash)
}

// judgePods judges the pods of dw's new ReplicaSet once their informer
// synced, and picks dw's most suspect pod. It returns the first failure,
// the suspicions to report (""s: already reported), and when to judge
// again without news.
func (r *rolloutRun) judgePods(dw *deployWatch, now time.Time) (fail *failure, warnings []string, recheck time.Time) {
	dw.suspect = nil
	if !dw.pods.synced() || dw.newRS == nil || dw.podHash != dw.progress.PodTemplateHash {
		return nil, nil, time.Time{}
	}
	pods := dw.newPods()
	dw.progress.Pods = r.podPhasesIn(dw.namespace, pods)
	v := r.judgeRolloutPods(dw.judge, dw.warned, pods, now)
	dw.canaryReady, dw.suspect = v.ready, v.suspect
	if v.fail != nil {
		fail = &failure{verdict: v.fail.Verdict, w: dw, finding: v.fail}
	}
	return fail, v.warnings, v.recheck
}

// podVerdicts is what judging the pods a rollout watches found.
type podVerdicts struct {
	// fail is the first failure verdict, by pod name.
	fail *podFinding
	// warnings are the suspicions that do not fail the rollout (yet),
	// formatted ("": reported already, see suspicion).
	warnings []string
	// suspect is the most suspect pod: the failed one, else the first
	// suspected, else the first not Ready.
	suspect *podFinding
	// ready are the Ready pods (a canary phase only).
	ready []string
	// recheck is when to judge again without news (zero: no need).
	recheck time.Time
}

// judgeRolloutPods applies the pod verdicts of j to the pods a rollout
// watches, by name: a Deployment's new ReplicaSet's, a StatefulSet's
// update revision's. In a canary phase a canary container restarting too
// often fails too. j forgets the pods not judged; warned records the
// suspicions reported.
func (r *rolloutRun) judgeRolloutPods(j *podJudge, warned map[string]bool, pods []*corev1.Pod, now time.Time) podVerdicts {
	var v podVerdicts
	obs := r.observations(pods)
	var notReady *podFinding
	for i, pod := range pods {
		f, suspects, again := j.judge(pod, obs[i], now)
		ready := podReady(pod)
		if g := r.opts.Canary; g != nil {
			if rf := g.canaryRestart(pod); rf != nil && f == nil {
				f = rf
			}
			if ready {
				v.ready = append(v.ready, pod.Name)
			}
		}
		if f != nil && v.fail == nil {
			v.fail, v.suspect = f, f
		}
		if v.suspect == nil && len(suspects) > 0 {
			s := suspects[0]
			v.suspect = &s
		}
		for k := range suspects {
			v.warnings = append(v.warnings, r.suspicion(warned, &suspects[k]))
		}
		v.recheck = earliest(v.recheck, again)
		if notReady == nil && !ready {
			notReady = notReadyFinding(pod)
		}
	}
	j.sweep()
	if v.suspect == nil {
		v.suspect = notReady
	}
	return v
}

// observations returns how many versions of each pod the informer
// delivered.
func (r *rolloutRun) observations(pods []*corev1.Pod) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	obs := make([]int, len(pods))
	for i, pod := range pods {
		obs[i] = r.obs[pod.UID]
	}
	return obs
}

// deadlineFailure is d exceeding its progress deadline.
func deadlineFailure(dw *deployWatch, d *appsv1.Deployment) *failure {
	f := &failure{verdict: rollout.VerdictProgressDeadlineExceeded, w: dw, reason: reasonProgressDeadline, message: dw.msg}
	if c := deploymentutil.GetDeploymentCondition(d.Status, appsv1.DeploymentProgressing); c != nil && c.Message != "" {
		f.message = c.Message
	}
	return f
}

// newPods returns the pods of dw's new ReplicaSet that are not being
// deleted, by name.
func (dw *deployWatch) newPods() []*corev1.Pod {
	var owner *types.UID
	if dw.newRS != nil {
		owner = &dw.newRS.UID
	}
	return dw.podsOf(owner, func(pod *corev1.Pod) bool { return live(pod) && pod.Labels[podTemplateHashLabel] == dw.podHash })
}

// notReadyFinding describes a pod that is not Ready without a container
// problem: the first container not ready.
func notReadyFinding(pod *corev1.Pod) *podFinding {
	f := &podFinding{Verdict: rollout.VerdictProgressing, Reason: reasonContainersNotReady, Pod: pod, Message: "pod is not Ready"}
	if c := podCondition(pod, corev1.PodReady); c != nil && c.Message != "" {
		f.Message = c.Message
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if !cs.Ready {
			f.Container, f.RestartCount = cs.Name, cs.RestartCount
			f.ran = cs.State.Running != nil || cs.RestartCount > 0
			if cs.State.Running != nil {
				f.Message = fmt.Sprintf("container %s is running but not ready", cs.Name)
			}
			break
		}
	}
	if pod.Spec.NodeName == "" {
		f.Message = "pod is not scheduled yet"
	}
	return f
}

// suspicion formats a suspicion once (warned records those reported); it
// returns "" when already reported.
func (r *rolloutRun) suspicion(warned map[string]bool, s *podFinding) string {
	// Once per container and restart (or pod, for scheduling); by UID, as
	// a StatefulSet's pods keep their names across revisions.
	key := fmt.Sprintf("%s/%s/%s/%d", s.Pod.Name, s.Pod.UID, s.Container, s.RestartCount)
	if warned[key] {
		return ""
	}
	warned[key] = true
	var b strings.Builder
	fmt.Fprintf(&b, "pod %s", s.Pod.Name)
	if s.Container != "" {
		fmt.Fprintf(&b, " container %s", s.Container)
	}
	fmt.Fprintf(&b, ": %s", s.Reason)
	if s.RestartCount > 0 {
		fmt.Fprintf(&b, " (restarts %d/%d)", s.RestartCount, r.o.MaxRestarts)
	}
	if s.Message != "" {
		fmt.Fprintf(&b, ": %s", s.Message)
	}
	return b.String()
}

// quotaSettle is how long after the last pod of a Deployment went away
// (or after the wait started) a ResourceQuota refusal of its new pods
// counts: the quota's usage is recomputed and the ReplicaSet controller
// retries in that time.
const quotaSettle = 5 * time.Second

// failedCreate reports the new ReplicaSet failing to create pods: its
// ReplicaFailure condition, or a FailedCreate event seen during the wait
// while it still lacks pods.
//
// A ResourceQuota refusal ("exceeded quota") is transient while pods of
// the Deployment are going away (a rollout replacing pods in place,
// maxUnavailable > 0): they release their share of the quota when gone,
// and the ReplicaSet controller retries with a backoff. It counts only
// when none is going away and a FailedCreate event arrives quotaSettle
// after the last one went (or after the wait started): the condition
// alone may be stale, as the controller does not update it on a retry.
func (r *rolloutRun) failedCreate(dw *deployWatch, d *appsv1.Deployment) *failure {
	rs := dw.newRS
	r.mu.Lock()
	e, at := r.failedRS[rs.UID], r.failedAt[rs.UID]
	r.mu.Unlock()
	lacking := rs.Spec.Replicas != nil && rs.Status.Replicas < *rs.Spec.Replicas
	var fail *failure
	for _, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
			fail = &failure{verdict: rollout.VerdictFailedCreate, w: dw, rs: rs, reason: reasonFailedCreate, message: c.Message}
			break
		}
	}
	if fail == nil && e != nil && lacking {
		fail = &failure{verdict: rollout.VerdictFailedCreate, w: dw, rs: rs, reason: reasonFailedCreate, message: e.Message}
	}
	if fail == nil || !strings.Contains(fail.message, "exceeded quota") {
		return fail
	}

	releasing := ptr.Deref(d.Status.TerminatingReplicas, 0) > 0
	for _, o := range dw.rs.list() {
		if other, ok := o.(*appsv1.ReplicaSet); ok && other.Namespace == dw.namespace && releasingPods(other) {
			releasing = true
		}
	}
	if !r.quotaCounts(&dw.released, releasing, at) || !lacking || e == nil {
		return nil
	}
	fail.message = e.Message
	return fail
}

// eventAbout says what a Warning event is about: a pod or ReplicaSet of
// the Deployment, its new or an old ReplicaSet's.
func (dw *deployWatch) eventAbout(e *corev1.Event) string {
	if dw.d == nil {
		return ""
	}
	switch name := e.InvolvedObject.Name; e.InvolvedObject.Kind {
	case "ReplicaSet":
		switch {
		case dw.newRS != nil && name == dw.newRS.Name:
			return "new ReplicaSet " + name
		case dw.oldRSNamed(name) != nil:
			return "old ReplicaSet " + name
		}
	case "Pod":
		if dw.newRS != nil && strings.HasPrefix(name, dw.newRS.Name+"-") {
			return "pod " + name
		}
		for _, rs := range dw.oldRS {
			if strings.HasPrefix(name, rs.Name+"-") {
				return fmt.Sprintf("pod %s (old ReplicaSet %s)", name, rs.Name)
			}
		}
	}
	return ""
}
