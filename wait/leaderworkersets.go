// How the RolloutWatcher follows a LeaderWorkerSet
// (leaderworkerset.x-k8s.io/v1, run by the LWS controller): its rollout
// rule (LeaderWorkerSetRolledOut), the informers on it (dynamic client),
// on its leader StatefulSet (which names its current template revision)
// and on its pods, the verdicts on the pods of its current revision and
// the recreations of its groups. The logs captured at terminations, the
// events and the diagnoses are in leaderworkersets_diagnose.go.

package wait

import (
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
)

// The LeaderWorkerSet API's names (sigs.k8s.io/lws api/leaderworkerset/v1).
const (
	// LeaderWorkerSetGroup is the API group of LeaderWorkerSets.
	LeaderWorkerSetGroup = "leaderworkerset.x-k8s.io"
	// LeaderWorkerSetRevisionLabel is the label of the LWS controller
	// naming the template revision of a leader StatefulSet, a worker
	// StatefulSet and their pods.
	LeaderWorkerSetRevisionLabel = "leaderworkerset.sigs.k8s.io/template-revision-hash"
	lwsKind                      = "LeaderWorkerSet"
	// LeaderWorkerSetNameLabel is the label the LWS controller puts on
	// every pod of a LeaderWorkerSet (leader and workers): its name.
	LeaderWorkerSetNameLabel = "leaderworkerset.sigs.k8s.io/name"
	lwsGroupIndexLabel       = "leaderworkerset.sigs.k8s.io/group-index"
	lwsWorkerIndexLabel      = "leaderworkerset.sigs.k8s.io/worker-index"
	lwsAvailable             = "Available"
	// reasonRecreateGroup is the reason of the LWS controller's event when
	// it deletes a group's leader to recreate the group.
	reasonRecreateGroup = "RecreateGroup"
)

// LeaderWorkerSetResource is the resource of LeaderWorkerSets.
func LeaderWorkerSetResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: LeaderWorkerSetGroup, Version: "v1", Resource: "leaderworkersets"}
}

// isLeaderWorkerSet reports whether gvk is a LeaderWorkerSet's.
func isLeaderWorkerSet(gvk schema.GroupVersionKind) bool {
	return gvk.Group == LeaderWorkerSetGroup && gvk.Kind == lwsKind
}

// leaderWorkerSet holds what the watcher reads of a LeaderWorkerSet.
type leaderWorkerSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Replicas             *int32 `json:"replicas,omitempty"`
		LeaderWorkerTemplate struct {
			Size          *int32 `json:"size,omitempty"`
			RestartPolicy string `json:"restartPolicy,omitempty"`
		} `json:"leaderWorkerTemplate"`
	} `json:"spec"`
	Status struct {
		Conditions         []metav1.Condition `json:"conditions,omitempty"`
		ReadyReplicas      int32              `json:"readyReplicas,omitempty"`
		UpdatedReplicas    int32              `json:"updatedReplicas,omitempty"`
		Replicas           int32              `json:"replicas,omitempty"`
		ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	} `json:"status"`
}

func parseLeaderWorkerSet(obj *unstructured.Unstructured) (*leaderWorkerSet, error) {
	l := &leaderWorkerSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, l); err != nil {
		return nil, fmt.Errorf("leaderworkerset %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return l, nil
}

// recreatesGroups reports whether the LWS controller recreates a whole
// group when one of its containers restarts (or one of its pods is
// deleted): restartPolicy RecreateGroupOnPodRestart (the default) or
// RecreateGroupAfterStart.
func (l *leaderWorkerSet) recreatesGroups() bool {
	p := l.Spec.LeaderWorkerTemplate.RestartPolicy
	return p == "" || p == "RecreateGroupOnPodRestart" || p == "RecreateGroupAfterStart"
}

// LeaderWorkerSetRolledOut says whether the LeaderWorkerSet obj rolled
// out, and where it stands. It rolled out when its controller observed its
// latest generation (status.observedGeneration, when set, at least
// metadata.generation; its Available condition's too), every group
// (spec.replicas, 1 when unset) is of the current template
// (status.updatedReplicas) and ready (status.readyReplicas), no surge
// group is left (status.replicas), and its condition Available is True.
func LeaderWorkerSetRolledOut(obj *unstructured.Unstructured) (done bool, msg string, err error) {
	l, err := parseLeaderWorkerSet(obj)
	if err != nil {
		return false, "", err
	}
	done, msg = l.rolledOut()
	return done, msg, nil
}

func (l *leaderWorkerSet) rolledOut() (bool, string) {
	st := &l.Status
	if st.ObservedGeneration != 0 && l.Generation > st.ObservedGeneration {
		return false, "Waiting for leaderworkerset spec update to be observed..."
	}
	replicas := ptr.Deref(l.Spec.Replicas, 1)
	if st.UpdatedReplicas < replicas {
		return false, fmt.Sprintf("Waiting for rolling update to finish: %d out of %d groups updated...", st.UpdatedReplicas, replicas)
	}
	if st.Replicas > replicas {
		return false, fmt.Sprintf("Waiting for %d surge groups to be removed...", st.Replicas-replicas)
	}
	if st.ReadyReplicas < replicas {
		return false, fmt.Sprintf("Waiting for %d groups to be ready...", replicas-st.ReadyReplicas)
	}
	c := meta.FindStatusCondition(st.Conditions, lwsAvailable)
	if c == nil || c.Status != metav1.ConditionTrue || (c.ObservedGeneration != 0 && c.ObservedGeneration < l.Generation) {
		return false, "Waiting for the leaderworkerset to be Available..."
	}
	return true, fmt.Sprintf("leaderworkerset rolled out: %d groups updated and ready", replicas)
}

// lwsWatch follows one LeaderWorkerSet.
type lwsWatch struct {
	rolloutState
	leader *informer // its leader StatefulSet (by name)
	// judge judges the pods of the current revision; oldJudge those of
	// the other revisions, whose failures are warnings only.
	judge, oldJudge *podJudge

	l        *leaderWorkerSet
	revision string // the current template revision
	// leaders are, per revision and group index ("rev/1"), the UIDs of
	// the group's leader pods seen: more than one is a recreated group.
	leaders map[string]map[types.UID]bool
	// crashes are, per group index, the last termination seen of a
	// container of one of its pods of the current revision, with its log.
	crashes map[string]*podFinding
	// captured are the logs read, per termination (pod UID and
	// knownCauseKey): each is read once.
	captured map[string]*capturedLog
}

func (r *rolloutRun) newLWSWatch(idx int, ref object.Ref) *lwsWatch {
	lw := &lwsWatch{rolloutState: newRolloutState(idx, ref, rollout.RolloutProgress{LeaderWorkerSet: ref.Name})}
	lw.reset(r)
	return lw
}

// reset forgets what was seen of an earlier LeaderWorkerSet of that name.
func (lw *lwsWatch) reset(r *rolloutRun) {
	lw.judge, lw.oldJudge = newPodJudge(r.o), newPodJudge(r.o)
	lw.judge.classify = r.captureTermination(lw)
	lw.suspect, lw.revision = nil, ""
	lw.leaders, lw.crashes = map[string]map[types.UID]bool{}, map[string]*podFinding{}
	lw.captured = map[string]*capturedLog{}
}

// start starts the informers of a LeaderWorkerSet and of its leader
// StatefulSet (field selectors on their name, both <lws>); its pods are
// watched once the LeaderWorkerSet is seen.
func (lw *lwsWatch) start(r *rolloutRun) {
	c := r.dyn.Resource(LeaderWorkerSetResource()).Namespace(lw.namespace)
	lw.self = r.newInformer("watch "+lw.ref.String(), listWatch(c.List, c.Watch, byName(lw.name)), &unstructured.Unstructured{}, r.deploymentHandler())
	sc := r.client.AppsV1().StatefulSets(lw.namespace)
	lw.leader = r.newInformer("watch the leader StatefulSet of "+lw.ref.String(), listWatch(sc.List, sc.Watch, byName(lw.name)), &appsv1.StatefulSet{}, r.deploymentHandler())
}

// startLWSPods starts the informer of every pod of a LeaderWorkerSet (its
// label leaderworkerset.sigs.k8s.io/name): leaders and workers, of every
// revision.
func (r *rolloutRun) startLWSPods(lw *lwsWatch) {
	r.watchPods(&lw.watchBase, labels.SelectorFromSet(labels.Set{LeaderWorkerSetNameLabel: lw.name}).String(), r.podHandler())
}

// current returns lw's LeaderWorkerSet (see rolloutRun.current), and
// records it; nil when it is unreadable.
func (lw *lwsWatch) current(r *rolloutRun) *leaderWorkerSet {
	u, _ := r.current(lw, func() {
		lw.stopPods()
		lw.reset(r)
	}).(*unstructured.Unstructured)
	if u == nil {
		return nil
	}
	l, err := parseLeaderWorkerSet(u)
	if err != nil {
		r.set(lw, rollout.StatusUnknown, err.Error(), "")
		return nil
	}
	lw.l = l
	return l
}

// currentRevision returns the template revision the LWS controller rolls
// the groups to: the label of the leader StatefulSet, which it applies
// before it records the generation observed. "" until both say so.
func (lw *lwsWatch) currentRevision(l *leaderWorkerSet) string {
	if !lw.leader.synced() || l.Status.ObservedGeneration == 0 || l.Status.ObservedGeneration < l.Generation {
		return ""
	}
	obj, exists, _ := lw.leader.inf.GetStore().GetByKey(lw.namespace + "/" + lw.name)
	s, _ := obj.(*appsv1.StatefulSet)
	if !exists || s == nil || !metav1.IsControlledBy(s, l) {
		return ""
	}
	return s.Labels[LeaderWorkerSetRevisionLabel]
}

// evaluate brings lw up to date: its LeaderWorkerSet, its rollout
// status, the informer of its pods, then the verdicts on the pods of its
// current revision and on its groups' recreations. It returns the failure
// found, and when to evaluate again without news.
func (lw *lwsWatch) evaluate(r *rolloutRun, now time.Time) (*failure, time.Time) {
	l := lw.current(r)
	if l == nil {
		return nil, time.Time{}
	}
	lw.observeStatus(l)
	if rev := lw.currentRevision(l); rev != "" {
		lw.revision = rev
	}
	lw.progress.UpdateRevision = lw.revision
	if lw.done {
		lw.progress.Pods = nil
		r.set(lw, rollout.StatusCurrent, lw.msg, "")
		return nil, time.Time{}
	}
	if lw.pods == nil {
		r.startLWSPods(lw)
	}
	fail, warnings, recheck := r.judgeLWSPods(lw, l, now)
	if fail == nil {
		// An LWS controller that never reported an observed generation
		// has not acted until it set a condition.
		pending := l.Generation > l.Status.ObservedGeneration && (l.Status.ObservedGeneration != 0 || len(l.Status.Conditions) == 0)
		fail, recheck = r.checkStall(lw, "LeaderWorkerSet", "the LeaderWorkerSet controller (lws-controller-manager)",
			l.Generation, l.Status.ObservedGeneration, pending, now, recheck)
	}
	if fail != nil {
		recheck = time.Time{}
	}
	r.set(lw, rollout.StatusInProgress, lw.msg, "")
	r.warn(lw, rollout.StatusInProgress, warnings)
	return fail, recheck
}

// observeStatus applies LeaderWorkerSetRolledOut's rule to l, recording
// whether it rolled out, the message and the group counts in lw.
func (lw *lwsWatch) observeStatus(l *leaderWorkerSet) {
	done, msg := l.rolledOut()
	lw.observed(done, msg, ptr.Deref(l.Spec.Replicas, 1), l.Status.UpdatedReplicas, l.Status.ReadyReplicas, l.Status.ReadyReplicas)
}

// lwsPods returns lw's pods, by name: those of revision rev (being deleted
// or not: a group's pods are deleted when it is recreated, and what they
// say until then counts), and the others not being deleted.
func (lw *lwsWatch) lwsPods(rev string) (current, other []*corev1.Pod) {
	for _, pod := range lw.podsOf(nil, func(pod *corev1.Pod) bool { return pod.Labels[LeaderWorkerSetNameLabel] == lw.name }) {
		switch {
		case pod.Labels[LeaderWorkerSetRevisionLabel] == rev:
			current = append(current, pod)
		case live(pod):
			other = append(other, pod)
		}
	}
	return current, other
}

// judgeLWSPods judges the pods of lw's current revision (as a
// Deployment's new pods) once their informer synced and the revision is
// known, counts the recreations of its groups, and picks lw's most suspect
// pod; the failures of the other revisions' pods are warnings. It returns
// the first failure, the warnings to report (""s: already reported), and
// when to judge again without news.
func (r *rolloutRun) judgeLWSPods(lw *lwsWatch, l *leaderWorkerSet, now time.Time) (fail *failure, warnings []string, recheck time.Time) {
	lw.suspect = nil
	if !lw.pods.synced() || lw.revision == "" {
		return nil, nil, time.Time{}
	}
	current, other := lw.lwsPods(lw.revision)
	live := make([]*corev1.Pod, 0, len(current))
	for _, pod := range current {
		if pod.DeletionTimestamp == nil {
			live = append(live, pod)
		}
	}
	lw.progress.Pods = r.podPhasesIn(lw.namespace, live)
	v := r.judgeRolloutPods(lw.judge, lw.warned, current, now)
	// The terminations the judge did not classify (OOMKilled, or past a
	// verdict) are captured too, while their pods exist.
	for _, pod := range current {
		r.captureTerminations(lw, pod)
	}
	lw.suspect = v.suspect
	if v.fail != nil {
		fail = &failure{verdict: v.fail.Verdict, w: lw, finding: lw.withLog(v.fail)}
	}
	if fail == nil {
		fail = r.recreations(lw, l, current)
	}
	revision := func(pod *corev1.Pod) string { return pod.Labels[LeaderWorkerSetRevisionLabel] }
	warnings = append(v.warnings, r.judgeOtherRevisions(lw.oldJudge, lw.warned, other, revision, now)...)
	return fail, warnings, v.recheck
}

// recreations notes the leader pods of the current revision's groups and
// fails lw when a group was recreated (its leader replaced by a new pod of
// the same revision) RolloutOptions.MaxRestarts times during the wait: a
// LeaderWorkerSet recreating its groups at each container restart never
// shows a CrashLoopBackOff.
func (r *rolloutRun) recreations(lw *lwsWatch, l *leaderWorkerSet, current []*corev1.Pod) *failure {
	worst, most := "", 0
	for _, pod := range current {
		if pod.Labels[lwsWorkerIndexLabel] != "0" {
			continue
		}
		g := pod.Labels[lwsGroupIndexLabel]
		key := lw.revision + "/" + g
		seen := lw.leaders[key]
		if seen == nil {
			seen = map[types.UID]bool{}
			lw.leaders[key] = seen
		}
		seen[pod.UID] = true
		if n := len(seen) - 1; n > most || (n == most && groupLess(g, worst)) {
			worst, most = g, n
		}
	}
	if most < int(r.o.MaxRestarts) {
		return nil
	}
	policy := l.Spec.LeaderWorkerTemplate.RestartPolicy
	if policy == "" {
		policy = "RecreateGroupOnPodRestart"
	}
	msg := fmt.Sprintf("group %s recreated %d times (restartPolicy %s)", worst, most, policy)
	if l.recreatesGroups() {
		msg += ": the LWS controller recreates the whole group when a container restarts"
	}
	f := &failure{verdict: rollout.VerdictGroupRecreated, w: lw, reason: reasonRecreateGroup, message: msg}
	if c := lw.crashes[worst]; c != nil {
		cp := *c
		cp.Verdict = rollout.VerdictGroupRecreated
		f.finding = &cp
	}
	return f
}

// groupLess orders group indexes numerically ("" last).
func groupLess(a, b string) bool {
	if b == "" {
		return a != ""
	}
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA != nil || errB != nil {
		return a < b
	}
	return x < y
}

// turnedTo reports whether the LeaderWorkerSet obj rolled out.
func (lw *lwsWatch) turnedTo(obj any) bool {
	u, _ := obj.(*unstructured.Unstructured)
	if u == nil {
		return false
	}
	done, _, err := LeaderWorkerSetRolledOut(u)
	return err == nil && done
}
