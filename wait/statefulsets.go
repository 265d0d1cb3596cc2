// How the RolloutWatcher follows a StatefulSet: kubectl rollout status'
// rule (StatefulSetRolledOut), the informers on the StatefulSet and its
// pods, the verdicts on the pods of its update revision, its FailedCreate
// events, and its diagnoses.

package wait

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
)

// PodRevision returns the StatefulSet revision pod belongs to: its label
// controller-revision-hash (the name of the ControllerRevision, as
// status.currentRevision and status.updateRevision name it), or "".
func PodRevision(pod *corev1.Pod) string {
	return pod.Labels[appsv1.ControllerRevisionHashLabelKey]
}

// StatefulSetRolledOut applies kubectl rollout status' rules
// (k8s.io/kubectl/pkg/polymorphichelpers StatefulSetStatusViewer) to sts,
// and says where it stands in kubectl's words. It is done when its
// controller observed its latest generation (status.observedGeneration
// set and at least metadata.generation) and every replica is ready
// (readyReplicas at least spec.replicas, 1 when unset; with
// minReadySeconds, available too), and then:
//
//   - RollingUpdate with a partition above 0: at least replicas −
//     partition replicas are updated (the ordinals below the partition
//     keep their revision);
//   - RollingUpdate otherwise: currentRevision equals updateRevision (the
//     controller moved every pod to the update revision);
//   - OnDelete (kubectl refuses those): nothing more, as pods change
//     revision only when deleted.
//
// With podManagementPolicy Parallel and maxUnavailable above 1, the
// controller replaces several pods at once, so fewer than replicas may be
// ready during the rollout: it is not done until they all are again.
func StatefulSetRolledOut(sts *appsv1.StatefulSet) (done bool, msg string) {
	if sts.Status.ObservedGeneration == 0 || sts.Generation > sts.Status.ObservedGeneration {
		return false, "Waiting for statefulset spec update to be observed..."
	}
	replicas := ptr.Deref(sts.Spec.Replicas, 1)
	if sts.Status.ReadyReplicas < replicas {
		return false, fmt.Sprintf("Waiting for %d pods to be ready...", replicas-sts.Status.ReadyReplicas)
	}
	if sts.Spec.MinReadySeconds > 0 && sts.Status.AvailableReplicas < replicas {
		return false, fmt.Sprintf("Waiting for %d pods to be available...", replicas-sts.Status.AvailableReplicas)
	}
	if sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return true, fmt.Sprintf("statefulset has %d ready pods (updateStrategy OnDelete: pods take the update revision when deleted)", sts.Status.ReadyReplicas)
	}
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ptr.Deref(ru.Partition, 0) > 0 {
		want := replicas - *ru.Partition
		if sts.Status.UpdatedReplicas < want {
			return false, fmt.Sprintf("Waiting for partitioned roll out to finish: %d out of %d new pods have been updated...", sts.Status.UpdatedReplicas, want)
		}
		return true, fmt.Sprintf("partitioned roll out complete: %d new pods have been updated...", sts.Status.UpdatedReplicas)
	}
	if sts.Status.UpdateRevision != sts.Status.CurrentRevision {
		return false, fmt.Sprintf("waiting for statefulset rolling update to complete %d pods at revision %s...", sts.Status.UpdatedReplicas, sts.Status.UpdateRevision)
	}
	return true, fmt.Sprintf("statefulset rolling update complete %d pods at revision %s...", sts.Status.CurrentReplicas, sts.Status.CurrentRevision)
}

// stsWatch follows one StatefulSet.
type stsWatch struct {
	rolloutState
	// judge judges the pods of the update revision; oldJudge those of the
	// other revisions, whose failures are warnings only (it reads no log).
	judge, oldJudge *podJudge

	s *appsv1.StatefulSet
	// released is when the watcher last saw a pod of the StatefulSet
	// terminating or gone, which frees its share of a quota; guarded by
	// rolloutRun.mu.
	released time.Time
	// staleRV is, per FailedCreate event, the resourceVersion of the
	// StatefulSet the first evaluation after it saw with all its pods: the
	// event is forgotten only once a newer StatefulSet says so too (its
	// informer may lag behind the event's); guarded by rolloutRun.mu.
	staleRV map[types.UID]string
	// canaryReady are the Ready pods of its update revision, in a canary
	// phase.
	canaryReady []string
}

func (r *rolloutRun) newStatefulSetWatch(idx int, ref object.Ref) *stsWatch {
	return &stsWatch{
		rolloutState: newRolloutState(idx, ref, rollout.RolloutProgress{StatefulSet: ref.Name}),
		judge:        r.newJudge(), oldJudge: newPodJudge(r.o),
	}
}

// start starts the informer of a StatefulSet (field selector on its
// name); its pods are watched once its selector is known.
func (sw *stsWatch) start(r *rolloutRun) {
	c := r.client.AppsV1().StatefulSets(sw.namespace)
	sw.self = r.newInformer("watch "+sw.ref.String(), listWatch(c.List, c.Watch, byName(sw.name)), &appsv1.StatefulSet{}, r.deploymentHandler())
}

// startStatefulSetPods starts the informer of the pods a StatefulSet
// selects, of every revision, noting the ones going away (see
// statefulSetFailedCreate).
func (r *rolloutRun) startStatefulSetPods(sw *stsWatch, sel labels.Selector) {
	h := r.podHandler()
	release := func() {
		r.mu.Lock()
		sw.released = r.clk.Now()
		r.mu.Unlock()
	}
	add, update, del := h.AddFunc, h.UpdateFunc, h.DeleteFunc
	h.AddFunc = func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp != nil {
			release()
		}
		add(obj)
	}
	h.UpdateFunc = func(old, cur any) {
		if p, ok := cur.(*corev1.Pod); ok && p.DeletionTimestamp != nil {
			release()
		}
		update(old, cur)
	}
	h.DeleteFunc = func(obj any) {
		release()
		del(obj)
	}
	r.watchPods(&sw.watchBase, sel.String(), h)
}

// current returns sw's StatefulSet (see rolloutRun.current), and records
// it.
func (sw *stsWatch) current(r *rolloutRun) *appsv1.StatefulSet {
	s, _ := r.current(sw, func() {
		sw.stopPods()
		sw.suspect, sw.judge, sw.oldJudge = nil, r.newJudge(), newPodJudge(r.o)
	}).(*appsv1.StatefulSet)
	if s != nil {
		sw.s = s
	}
	return s
}

// evaluate brings sw up to date: its StatefulSet, its rollout status, the
// informer of its pods (unless it rolled out), then the verdicts on the
// pods of its update revision and its FailedCreate events. It returns the
// failure found, and when to evaluate again without news.
func (sw *stsWatch) evaluate(r *rolloutRun, now time.Time) (*failure, time.Time) {
	s := sw.current(r)
	if s == nil {
		return nil, time.Time{}
	}
	sw.observeStatus(s)
	if sw.done && r.opts.Canary == nil {
		sw.progress.Pods = nil
		r.set(sw, rollout.StatusCurrent, sw.msg, "")
		return nil, time.Time{}
	}
	if sw.pods == nil {
		sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
		if err != nil {
			return selectorFailure(sw, rollout.VerdictFailedCreate, fmt.Sprintf("invalid selector: %v", err)), time.Time{}
		}
		r.startStatefulSetPods(sw, sel)
	}
	fail, warnings, recheck := r.judgeStatefulSetPods(sw, s, now)
	if fail == nil {
		fail = r.statefulSetFailedCreate(sw, s)
	}
	if fail == nil {
		fail, recheck = r.checkStall(sw, "StatefulSet", "", s.Generation, s.Status.ObservedGeneration, s.Generation > s.Status.ObservedGeneration, now, recheck)
	}
	if fail != nil {
		recheck = time.Time{}
	}
	status := rollout.StatusInProgress
	if sw.done { // a canary phase: its pods are judged while it holds
		status = rollout.StatusCurrent
	}
	r.set(sw, status, sw.msg, "")
	r.warn(sw, rollout.StatusInProgress, warnings)
	return fail, recheck
}

// observeStatus applies StatefulSetRolledOut to s, recording whether it
// rolled out, the message, the replica counts and the revisions in sw.
func (sw *stsWatch) observeStatus(s *appsv1.StatefulSet) {
	done, msg := StatefulSetRolledOut(s)
	sw.observed(done, msg, ptr.Deref(s.Spec.Replicas, 1), s.Status.UpdatedReplicas, s.Status.ReadyReplicas, s.Status.AvailableReplicas)
	sw.progress.UpdateRevision, sw.progress.CurrentRevision = s.Status.UpdateRevision, s.Status.CurrentRevision
}

// statefulSetPods returns the pods of s that are not being deleted, by
// name: those of its update revision, and the others.
func (sw *stsWatch) statefulSetPods(s *appsv1.StatefulSet) (update, other []*corev1.Pod) {
	for _, pod := range sw.podsOf(&s.UID, live) {
		if rev := PodRevision(pod); rev != "" && rev == s.Status.UpdateRevision {
			update = append(update, pod)
		} else {
			other = append(other, pod)
		}
	}
	return update, other
}

// judgeStatefulSetPods judges the pods of s's update revision (as a
// Deployment's new pods) once their informer synced, and picks sw's most
// suspect pod; the failures of the other revisions' pods are warnings. It
// returns the first failure, the warnings to report (""s: already
// reported), and when to judge again without news.
func (r *rolloutRun) judgeStatefulSetPods(sw *stsWatch, s *appsv1.StatefulSet, now time.Time) (fail *failure, warnings []string, recheck time.Time) {
	sw.suspect = nil
	if !sw.pods.synced() || s.Status.UpdateRevision == "" {
		return nil, nil, time.Time{}
	}
	update, other := sw.statefulSetPods(s)
	sw.progress.Pods = r.podPhasesIn(sw.namespace, update)
	v := r.judgeRolloutPods(sw.judge, sw.warned, update, now)
	sw.suspect = v.suspect
	sw.canaryReady = v.ready
	if v.fail != nil {
		fail = &failure{verdict: v.fail.Verdict, w: sw, finding: v.fail}
	}
	warnings = append(v.warnings, r.judgeOtherRevisions(sw.oldJudge, sw.warned, other, PodRevision, now)...)
	return fail, warnings, v.recheck
}

// statefulSetFailedCreate reports s failing to create pods: a
// FailedCreate event of s seen during the wait while it lacks pods
// (status.replicas below spec.replicas). An event is forgotten once s has
// its pods: a rolling update deletes each pod before creating it again,
// and an old refusal must not fail that; a refusal that lasts comes again
// with the controller's retries. A ResourceQuota refusal counts
// only quotaSettle after the last pod of s went away (or after the wait
// started), and while none is going away, as for a Deployment's new
// ReplicaSet (see failedCreate).
func (r *rolloutRun) statefulSetFailedCreate(sw *stsWatch, s *appsv1.StatefulSet) *failure {
	r.mu.Lock()
	e, at := r.failedRS[s.UID], r.failedAt[s.UID]
	r.mu.Unlock()
	lacking := s.Status.Replicas < ptr.Deref(s.Spec.Replicas, 1)
	if e == nil {
		return nil
	}
	if !lacking {
		r.mu.Lock()
		if sw.staleRV == nil {
			sw.staleRV = map[types.UID]string{}
		}
		switch rv, seen := sw.staleRV[e.UID]; {
		case !seen:
			sw.staleRV[e.UID] = s.ResourceVersion
		case rv != s.ResourceVersion && r.failedRS[s.UID] == e:
			delete(r.failedRS, s.UID)
			delete(sw.staleRV, e.UID)
		}
		r.mu.Unlock()
		return nil
	}
	fail := &failure{verdict: rollout.VerdictFailedCreate, w: sw, reason: reasonFailedCreate, message: e.Message}
	if !strings.Contains(e.Message, "exceeded quota") {
		return fail
	}
	releasing := s.Status.Replicas > ptr.Deref(s.Spec.Replicas, 1)
	for _, o := range sw.pods.list() {
		if pod, ok := o.(*corev1.Pod); ok && pod.DeletionTimestamp != nil {
			releasing = true
		}
	}
	if !r.quotaCounts(&sw.released, releasing, at) {
		return nil
	}
	return fail
}

// eventAbout says what a Warning event is about: the StatefulSet or one
// of its pods, naming the revision of a pod not of the update revision.
func (sw *stsWatch) eventAbout(e *corev1.Event) string {
	if sw.s == nil {
		return ""
	}
	switch name := e.InvolvedObject.Name; e.InvolvedObject.Kind {
	case "StatefulSet":
		if name == sw.name {
			return "StatefulSet " + name
		}
	case "Pod":
		if !isOrdinalOf(name, sw.name) {
			return ""
		}
		if sw.pods == nil {
			return "pod " + name
		}
		// Pods keep their names across revisions: the event may be of an
		// earlier pod of that name.
		obj, _, _ := sw.pods.inf.GetStore().GetByKey(sw.namespace + "/" + name)
		switch pod, _ := obj.(*corev1.Pod); {
		case pod == nil:
		case e.InvolvedObject.UID != "" && e.InvolvedObject.UID != pod.UID:
			return fmt.Sprintf("pod %s (an earlier pod of that name)", name)
		case PodRevision(pod) != sw.s.Status.UpdateRevision:
			return fmt.Sprintf("pod %s (revision %s)", name, PodRevision(pod))
		}
		return "pod " + name
	}
	return ""
}

// isOrdinalOf reports whether name is a pod of the StatefulSet called
// sts: "<sts>-<ordinal>".
func isOrdinalOf(name, sts string) bool {
	ord, ok := strings.CutPrefix(name, sts+"-")
	if !ok || ord == "" {
		return false
	}
	for _, c := range ord {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// turnedTo reports whether the StatefulSet obj rolled out.
func (sw *stsWatch) turnedTo(obj any) bool {
	s, _ := obj.(*appsv1.StatefulSet)
	if s == nil {
		return false
	}
	done, _ := StatefulSetRolledOut(s)
	return done
}

// diagnose explains the failure of a StatefulSet: from its failed pod, as
// a Deployment's, or from its FailedCreate event.
func (sw *stsWatch) diagnose(ctx context.Context, r *rolloutRun, f *failure) *rollout.Diagnosis {
	if f.finding != nil {
		return r.podDiagnosis(ctx, &sw.watchBase, f.verdict, f.finding)
	}
	d := &rollout.Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: sw.object, Namespace: sw.namespace, Message: fmt.Sprintf("StatefulSet %s: %s", sw.name, f.message)}
	if nw := r.ns[sw.namespace]; nw != nil && f.reason == reasonFailedCreate {
		d.Events = formatEvents(r.eventsOf(ctx, nw.events, "StatefulSet", sw.name, sw.uid), r.o.MaxEvents)
		d.LogNote = "no pod was created: there are no logs"
	}
	d.Hints = hints(d, nil, f.reason)
	return d
}

// timeout explains a timeout on a StatefulSet not rolled out, with its
// most suspect pod of the update revision.
func (sw *stsWatch) timeout(ctx context.Context, r *rolloutRun) *rollout.Diagnosis {
	return r.rolloutTimeout(ctx, sw, &sw.rolloutState, nil)
}
