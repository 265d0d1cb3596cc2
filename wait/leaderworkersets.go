// How the RolloutWatcher follows a LeaderWorkerSet
// (leaderworkerset.x-k8s.io/v1, run by the LWS controller): its rollout
// rule (LeaderWorkerSetRolledOut), the informers on it (dynamic client),
// on its leader StatefulSet (which names its current template revision)
// and on its pods, the verdicts on the pods of its current revision, the
// recreations of its groups, the logs of terminations captured before
// the group is deleted, and its diagnoses.

package wait

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/object"
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
	lwsNameLabel                 = "leaderworkerset.sigs.k8s.io/name"
	lwsGroupIndexLabel           = "leaderworkerset.sigs.k8s.io/group-index"
	lwsWorkerIndexLabel          = "leaderworkerset.sigs.k8s.io/worker-index"
	lwsAvailable                 = "Available"
	// reasonRecreateGroup is the reason of the LWS controller's event when
	// it deletes a group's leader to recreate the group.
	reasonRecreateGroup = "RecreateGroup"
)

// leaderWorkerSetResource is the resource of LeaderWorkerSets.
func leaderWorkerSetResource() schema.GroupVersionResource {
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

// capturedLog is the log of a container's termination, read while its
// pod existed.
type capturedLog struct {
	container string
	previous  bool
	lines     []string
	err       error
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
	return lines, fmt.Sprintf("the log of container %s read at its termination (the LWS controller recreates a group's pods under the same names)", c.container)
}

// lwsWatch follows one LeaderWorkerSet.
type lwsWatch struct {
	rolloutState
	namespace string
	name      string
	object    string // "leaderworkerset.leaderworkerset.x-k8s.io/chat"

	lws, leader, pods *informer
	uid               types.UID
	// judge judges the pods of the current revision; oldJudge those of
	// the other revisions, whose failures are warnings only.
	judge, oldJudge *podJudge

	l        *leaderWorkerSet
	revision string // the current template revision
	done     bool
	msg      string
	suspect  *podFinding
	warned   map[string]bool
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
	lw := &lwsWatch{
		rolloutState: rolloutState{idx: idx, ref: ref, progress: RolloutProgress{LeaderWorkerSet: ref.Name, Verdict: VerdictProgressing}},
		namespace:    ref.Namespace, name: ref.Name, object: objectName(ref),
		oldJudge: newPodJudge(r.o), warned: map[string]bool{},
	}
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

// startLWS starts the informers of a LeaderWorkerSet and of its leader
// StatefulSet (field selectors on their name, both <lws>); its pods are
// watched once the LeaderWorkerSet is seen.
func (r *rolloutRun) startLWS(lw *lwsWatch) {
	name := fields.OneTermEqualSelector("metadata.name", lw.name).String()
	byName := func(o *metav1.ListOptions) { o.FieldSelector = name }
	c := r.dyn.Resource(leaderWorkerSetResource()).Namespace(lw.namespace)
	lw.lws = r.newInformer("watch "+lw.ref.String(), listWatch(c.List, c.Watch, byName), &unstructured.Unstructured{}, r.deploymentHandler())
	sc := r.client.AppsV1().StatefulSets(lw.namespace)
	lw.leader = r.newInformer("watch the leader StatefulSet of "+lw.ref.String(), listWatch(sc.List, sc.Watch, byName), &appsv1.StatefulSet{}, r.deploymentHandler())
}

// startLWSPods starts the informer of every pod of a LeaderWorkerSet (its
// label leaderworkerset.sigs.k8s.io/name): leaders and workers, of every
// revision.
func (r *rolloutRun) startLWSPods(lw *lwsWatch) {
	s := labels.SelectorFromSet(labels.Set{lwsNameLabel: lw.name}).String()
	c := r.client.CoreV1().Pods(lw.namespace)
	lw.pods = r.newInformer("watch the pods of "+lw.ref.String(),
		listWatch(c.List, c.Watch, func(o *metav1.ListOptions) { o.LabelSelector = s }), &corev1.Pod{}, r.podHandler())
}

// currentLWS returns lw's LeaderWorkerSet from its synced informer,
// starting over when it is a new (or recreated) one. It returns nil when
// the informer has not synced, or the object is missing (recorded as
// NotFound) or unreadable.
func (r *rolloutRun) currentLWS(lw *lwsWatch) *leaderWorkerSet {
	if !lw.lws.synced() {
		return nil
	}
	obj, exists, _ := lw.lws.inf.GetStore().GetByKey(lw.namespace + "/" + lw.name)
	u, _ := obj.(*unstructured.Unstructured)
	if !exists || u == nil {
		lw.done = false
		r.set(lw, StatusNotFound, "not found", "")
		return nil
	}
	l, err := parseLeaderWorkerSet(u)
	if err != nil {
		r.set(lw, StatusUnknown, err.Error(), "")
		return nil
	}
	if lw.uid != l.UID {
		lw.uid = l.UID
		if lw.pods != nil {
			lw.pods.cancel()
			lw.pods = nil
		}
		lw.reset(r)
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

// evaluateLWS brings lw up to date: its LeaderWorkerSet, its rollout
// status, the informer of its pods, then the verdicts on the pods of its
// current revision and on its groups' recreations. It returns the failure
// found, and when to evaluate again without news.
func (r *rolloutRun) evaluateLWS(lw *lwsWatch, now time.Time) (*failure, time.Time) {
	l := r.currentLWS(lw)
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
		r.set(lw, StatusCurrent, lw.msg, "")
		return nil, time.Time{}
	}
	if lw.pods == nil {
		r.startLWSPods(lw)
	}
	fail, warnings, recheck := r.judgeLWSPods(lw, l, now)
	if fail != nil {
		recheck = time.Time{}
	}
	r.set(lw, StatusInProgress, lw.msg, "")
	for _, w := range warnings {
		if w != "" {
			r.set(lw, StatusInProgress, lw.msg, w)
		}
	}
	return fail, recheck
}

// observeStatus applies LeaderWorkerSetRolledOut's rule to l, recording
// whether it rolled out, the message and the group counts in lw.
func (lw *lwsWatch) observeStatus(l *leaderWorkerSet) {
	lw.done, lw.msg = l.rolledOut()
	p := &lw.progress
	p.Desired = ptr.Deref(l.Spec.Replicas, 1)
	p.Updated, p.Ready, p.Available = l.Status.UpdatedReplicas, l.Status.ReadyReplicas, l.Status.ReadyReplicas
	p.Verdict = VerdictProgressing
	if lw.done {
		p.Verdict = VerdictRolledOut
	}
}

// lwsPods returns lw's pods, by name: those of revision rev (being deleted
// or not: a group's pods are deleted when it is recreated, and what they
// say until then counts), and the others not being deleted.
func (lw *lwsWatch) lwsPods(rev string) (current, other []*corev1.Pod) {
	for _, o := range lw.pods.list() {
		pod, ok := o.(*corev1.Pod)
		if !ok || pod.Namespace != lw.namespace || pod.Labels[lwsNameLabel] != lw.name {
			continue
		}
		switch {
		case pod.Labels[LeaderWorkerSetRevisionLabel] == rev:
			current = append(current, pod)
		case pod.DeletionTimestamp == nil:
			other = append(other, pod)
		}
	}
	byName := func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(current, byName)
	slices.SortFunc(other, byName)
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
	v := r.judgeRolloutPods(lw.judge, current, now)
	// The terminations the judge did not classify (OOMKilled, or past a
	// verdict) are captured too, while their pods exist.
	for _, pod := range current {
		r.captureTerminations(lw, pod)
	}
	lw.suspect = v.suspect
	if v.fail != nil {
		fail = &failure{verdict: v.fail.Verdict, lws: lw, finding: lw.withLog(v.fail)}
	}
	for i := range v.suspects {
		warnings = append(warnings, r.suspicion(lw.warned, &v.suspects[i]))
	}
	if fail == nil {
		fail = r.recreations(lw, l, current)
	}
	obs := r.observations(other)
	for i, pod := range other {
		f, suspects, _ := lw.oldJudge.judge(pod, obs[i], now)
		if f != nil {
			suspects = append([]podFinding{*f}, suspects...)
		}
		for k := range suspects {
			if w := r.suspicion(lw.warned, &suspects[k]); w != "" {
				warnings = append(warnings, strings.Replace(w, "pod "+pod.Name, fmt.Sprintf("pod %s (revision %s)", pod.Name, pod.Labels[LeaderWorkerSetRevisionLabel]), 1))
			}
		}
	}
	lw.oldJudge.sweep()
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
	f := &failure{verdict: VerdictGroupRecreated, lws: lw, reason: reasonRecreateGroup, message: msg}
	if c := lw.crashes[worst]; c != nil {
		cp := *c
		cp.Verdict = VerdictGroupRecreated
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
			return knownCause{cause: CauseUnknown}
		}
		return r.classifyLines(c.lines, t)
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
	c := &capturedLog{container: container, previous: previous, lines: lines, err: err}
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
// of its group.
func (lw *lwsWatch) capture(pod *corev1.Pod, container string, previous bool, t *corev1.ContainerStateTerminated, log *capturedLog) {
	f := &podFinding{Verdict: VerdictProgressing, Reason: t.Reason, Pod: pod, Container: container, ExitCode: t.ExitCode,
		Message: "last termination: " + terminationMessage(t), ran: true, crashed: true, restarted: previous, log: log}
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

// lwsTurned reports whether a LeaderWorkerSet not seen rolled out yet now
// is, by its informer (see settle).
func (r *rolloutRun) lwsTurned() bool {
	for _, lw := range r.lwss {
		if lw.done || !lw.lws.synced() {
			continue
		}
		obj, exists, _ := lw.lws.inf.GetStore().GetByKey(lw.namespace + "/" + lw.name)
		if u, _ := obj.(*unstructured.Unstructured); exists && u != nil {
			if done, _, err := LeaderWorkerSetRolledOut(u); err == nil && done {
				return true
			}
		}
	}
	return false
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

// reportLWSEvent reports a Warning event about a LeaderWorkerSet or one of
// its pods, and the LWS controller's RecreateGroup events. It reports
// whether e was about one.
func (r *rolloutRun) reportLWSEvent(e *corev1.Event) bool {
	for _, lw := range r.lwss {
		if lw.l == nil || e.InvolvedObject.Namespace != "" && e.InvolvedObject.Namespace != lw.namespace {
			continue
		}
		var about string
		switch name := e.InvolvedObject.Name; e.InvolvedObject.Kind {
		case lwsKind:
			if name == lw.name {
				about = "LeaderWorkerSet " + name
			}
		case "Pod":
			if isLWSPodOf(name, lw.name) {
				about = "pod " + name
			}
		}
		if about == "" {
			continue
		}
		key := fmt.Sprintf("event/%s/%d/%s", e.UID, e.Count, e.Message)
		if !lw.warned[key] {
			lw.warned[key] = true
			cur := r.res.Objects[lw.idx]
			r.set(lw, cur.Status, cur.Message, about+": "+formatEvent(e))
		}
		return true
	}
	return false
}

// refreshLWS brings lw's suspect pod up to date before a diagnosis.
func (r *rolloutRun) refreshLWS(ctx context.Context, lw *lwsWatch) {
	lw.pods.waitSynced(ctx, 2*time.Second)
	if lw.lws.synced() {
		_, _ = r.evaluateLWS(lw, r.clk.Now())
	}
}

// diagnoseLWS explains the failure of a LeaderWorkerSet: from its failed
// pod, as a Deployment's, or from the last crash of the group recreated
// too often (the log captured at its termination).
func (r *rolloutRun) diagnoseLWS(ctx context.Context, f *failure) *Diagnosis {
	lw := f.lws
	if f.finding == nil {
		d := &Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: lw.object, Namespace: lw.namespace, Message: f.message}
		d.Hints = hints(d, nil, f.reason)
		return d
	}
	g := diagnoser{client: r.client, opts: r.o}
	d := g.fromPod(ctx, f.verdict, lw.object, lw.namespace, f.finding, r.podEvents(ctx, lw.namespace, f.finding.Pod))
	if f.reason != "" {
		d.Reason = f.reason
		d.Message = joinNonEmpty("; ", f.message, d.Message)
	}
	if f.verdict == VerdictGroupRecreated {
		d.Hints = recreatedHints(d, lw)
	}
	return d
}

// recreatedHints are the hints of a group recreated too often: the pod
// that crashed is gone (its log was read at its termination), so the
// hint to read its previous instance's log gives way to the LWS
// controller's events.
func recreatedHints(d *Diagnosis, lw *lwsWatch) []string {
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

// lwsTimeout explains a timeout on a LeaderWorkerSet not rolled out, with
// its most suspect pod of the current revision.
func (r *rolloutRun) lwsTimeout(ctx context.Context, lw *lwsWatch) *Diagnosis {
	r.refreshLWS(ctx, lw)
	lw.progress.Verdict = VerdictTimeout
	msg := lw.msg
	if msg == "" {
		msg = r.res.Objects[lw.idx].Message
	}
	suspect := lw.suspect
	if suspect != nil {
		suspect = lw.withLog(suspect)
	}
	d := r.suspectTimeout(ctx, lw.object, lw.namespace, "waiting for rollout to finish: "+msg, suspect)
	r.set(lw, r.res.Objects[lw.idx].Status, r.res.Objects[lw.idx].Message, "")
	return d
}
