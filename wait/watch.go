// What the RolloutWatcher asks of every object it follows itself, whatever
// its kind (kindWatch), as cli-utils' kstatus keeps one status function per
// kind: the run loop, the evaluation, the events, the stall and quota
// verdicts and the timeouts are written once against it; the per-kind
// differences (which informers, the rollout rule, which pods are judged,
// which events are its own, how a failure is explained) are its methods,
// in deployWatch (rollout_evaluate.go), stsWatch (statefulsets.go),
// lwsWatch (leaderworkersets.go) and runWatch (runs.go).

package wait

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
)

// kindWatch is one object the RolloutWatcher follows itself: a Deployment,
// StatefulSet, LeaderWorkerSet, Job or Pod that runs to completion.
type kindWatch interface {
	base() *watchBase
	// start starts the informer of the object (its pods' start once it is
	// seen, in evaluate).
	start(r *rolloutRun)
	// evaluate brings it up to date and returns the failure found, and
	// when to evaluate again without news (zero: no need).
	evaluate(r *rolloutRun, now time.Time) (*failure, time.Time)
	// turnedTo reports whether obj, the object as its informer holds it,
	// rolled out or failed by its rollout rule: a cheap look, without
	// judging its pods (see settle).
	turnedTo(obj any) bool
	// eventAbout says what a Warning event is about ("pod web-0") when it
	// is about the object or its pods; "" otherwise.
	eventAbout(e *corev1.Event) string
	// report records its status and message and sends an event (see
	// rolloutRun.set); warning, when set, is sent in any case.
	report(r *rolloutRun, st rollout.Status, msg, warning string)
	// rolledOut records that the wait ended with it rolled out.
	rolledOut(r *rolloutRun)
	// failedWith records that the wait failed on it, with d.
	failedWith(r *rolloutRun, v rollout.Verdict, d *rollout.Diagnosis)
	// diagnose explains its failure f.
	diagnose(ctx context.Context, r *rolloutRun, f *failure) *rollout.Diagnosis
	// timeout explains a timeout while it was not done.
	timeout(ctx context.Context, r *rolloutRun) *rollout.Diagnosis
}

// watchBase is what every watch holds: where its status is in the Result,
// its names, its informers, and where it stands.
type watchBase struct {
	idx       int
	ref       object.Ref
	namespace string
	name      string
	object    string // "deployment/chat", "statefulset/web", "job.batch/migrate"

	self *informer // the object's (field selector on its name)
	pods *informer // the pods it judges; nil until started
	uid  types.UID

	done bool
	msg  string
	sent bool
	// suspect is its most suspect pod (see judgeRolloutPods, judgeRunPods).
	suspect *podFinding
	warned  map[string]bool
	// stall measures how long its controller has not observed it.
	stall stallTimer
}

func newWatchBase(idx int, ref object.Ref) watchBase {
	return watchBase{idx: idx, ref: ref, namespace: ref.Namespace, name: ref.Name, object: rollout.ObjectName(ref), warned: map[string]bool{}}
}

func (b *watchBase) base() *watchBase { return b }

// stopPods stops the informer of its pods, to start again.
func (b *watchBase) stopPods() {
	if b.pods != nil {
		b.pods.cancel()
	}
	b.pods = nil
}

// podsOf returns the pods of b's informer of pods in its namespace that
// keep keeps and, when owner is not nil, that no object other than *owner
// controls; by name.
func (b *watchBase) podsOf(owner *types.UID, keep func(*corev1.Pod) bool) []*corev1.Pod {
	all := b.pods.list()
	pods := make([]*corev1.Pod, 0, len(all))
	for _, o := range all {
		pod, ok := o.(*corev1.Pod)
		if !ok || pod.Namespace != b.namespace || !keep(pod) {
			continue
		}
		if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && owner != nil && ref.UID != *owner {
			continue
		}
		pods = append(pods, pod)
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

// live reports whether pod is not being deleted.
func live(pod *corev1.Pod) bool { return pod.DeletionTimestamp == nil }

// watches are the objects the watcher follows itself, in the order they
// are evaluated and explained: Deployments, StatefulSets,
// LeaderWorkerSets, then Jobs and Pods.
func (r *rolloutRun) watches() []kindWatch {
	all := make([]kindWatch, 0, len(r.deps)+len(r.stss)+len(r.lwss)+len(r.runs))
	return appendWatches(appendWatches(appendWatches(appendWatches(all, r.deps), r.stss), r.lwss), r.runs)
}

func appendWatches[W kindWatch](all []kindWatch, ws []W) []kindWatch {
	for _, w := range ws {
		all = append(all, w)
	}
	return all
}

// current returns w's object from its synced informer, starting over
// (reset) when it is a new (or recreated) one. It returns nil when the
// informer has not synced or the object is missing (recorded as
// NotFound).
func (r *rolloutRun) current(w kindWatch, reset func()) any {
	b := w.base()
	if !b.self.synced() {
		return nil
	}
	obj, exists, _ := b.self.inf.GetStore().GetByKey(b.namespace + "/" + b.name)
	m, ok := obj.(metav1.Object)
	if !exists || !ok || m == nil {
		b.done = false
		w.report(r, rollout.StatusNotFound, "not found", "")
		return nil
	}
	if b.uid != m.GetUID() {
		b.uid = m.GetUID()
		reset()
	}
	return obj
}

// anyTurned reports whether an object not seen rolled out yet now is (or
// failed, for a Deployment past its progress deadline), by its informer
// (see settle).
func (r *rolloutRun) anyTurned() bool {
	for _, w := range r.watches() {
		b := w.base()
		if b.done || !b.self.synced() {
			continue
		}
		if obj, exists, _ := b.self.inf.GetStore().GetByKey(b.namespace + "/" + b.name); exists && w.turnedTo(obj) {
			return true
		}
	}
	return false
}

// reportEvent reports a Warning event about an object the watcher follows
// or its pods (a Deployment's about its new or an old ReplicaSet too: old
// ReplicaSets' troubles do not fail the rollout, they are reported only),
// once, to the first one it is about: StatefulSets, LeaderWorkerSets,
// then Deployments.
func (r *rolloutRun) reportEvent(e *corev1.Event) {
	for _, w := range appendWatches(appendWatches(appendWatches(nil, r.stss), r.lwss), r.deps) {
		b := w.base()
		if e.InvolvedObject.Namespace != "" && e.InvolvedObject.Namespace != b.namespace {
			continue
		}
		about := w.eventAbout(e)
		if about == "" {
			continue
		}
		key := fmt.Sprintf("event/%s/%d/%s", e.UID, e.Count, e.Message)
		if !b.warned[key] {
			b.warned[key] = true
			cur := r.res.Objects[b.idx]
			w.report(r, cur.Status, cur.Message, about+": "+formatEvent(e))
		}
		return
	}
}

// warn sends each of warnings ("": reported already) with status st.
func (r *rolloutRun) warn(w kindWatch, st rollout.Status, warnings []string) {
	for _, warning := range warnings {
		if warning != "" {
			w.report(r, st, w.base().msg, warning)
		}
	}
}

// earliest returns the earlier of two times to evaluate again (zero: no
// need).
func earliest(a, b time.Time) time.Time {
	if !b.IsZero() && (a.IsZero() || b.Before(a)) {
		return b
	}
	return a
}

// checkStall fails w (kind "Deployment", ...) when its controller has not
// acted on it (pending) for RolloutOptions.ControllerStallTimeout (see
// stalled); controller names it when not kube-controller-manager, and
// observed is -1 for an object without status.observedGeneration. It
// returns the failure, or else recheck moved to when to look again.
func (r *rolloutRun) checkStall(w kindWatch, kind, controller string, gen, observed int64, pending bool, now, recheck time.Time) (*failure, time.Time) {
	b := w.base()
	after, again := r.stalled(&b.stall, gen, pending, now)
	if after <= 0 {
		return nil, earliest(recheck, again)
	}
	f := stallFailure(&ControllerStalledError{Object: kind + " " + b.namespace + "/" + b.name, Ref: b.object,
		Namespace: b.namespace, Controller: controller, Generation: gen, Observed: observed, After: after})
	f.w = w
	return f, recheck
}

// quotaCounts reports whether a ResourceQuota refusal received at at
// counts: none of the object's pods is going away (releasing; then
// *released, guarded by rolloutRun.mu, records now), and at is
// quotaSettle after the last one went (or after the wait started). See
// failedCreate.
func (r *rolloutRun) quotaCounts(released *time.Time, releasing bool, at time.Time) bool {
	r.mu.Lock()
	if releasing {
		*released = r.clk.Now()
	}
	settled := *released
	r.mu.Unlock()
	if settled.Before(r.start) {
		settled = r.start
	}
	return !releasing && !at.Before(settled.Add(quotaSettle))
}

// judgeOtherRevisions judges pods of revisions other than the one rolled
// out (a StatefulSet's, a LeaderWorkerSet's) with j, which reads no log:
// what would fail a pod of the rolled-out revision is a warning, once per
// container and restart, naming the pod's revision (revision).
func (r *rolloutRun) judgeOtherRevisions(j *podJudge, warned map[string]bool, other []*corev1.Pod, revision func(*corev1.Pod) string, now time.Time) (warnings []string) {
	obs := r.observations(other)
	for i, pod := range other {
		f, suspects, _ := j.judge(pod, obs[i], now)
		if f != nil {
			suspects = append([]podFinding{*f}, suspects...)
		}
		for k := range suspects {
			if w := r.suspicion(warned, &suspects[k]); w != "" {
				warnings = append(warnings, strings.Replace(w, "pod "+pod.Name, fmt.Sprintf("pod %s (revision %s)", pod.Name, revision(pod)), 1))
			}
		}
	}
	j.sweep()
	return warnings
}

// refresh brings w's suspect pod up to date before a diagnosis: the
// informer of the pods may have started just before the verdict.
func (r *rolloutRun) refresh(ctx context.Context, w kindWatch) {
	b := w.base()
	b.pods.waitSynced(ctx, 2*time.Second)
	if b.self.synced() {
		_, _ = w.evaluate(r, r.clk.Now())
	}
}

// rolloutTimeout explains a timeout on w, a Deployment, StatefulSet or
// LeaderWorkerSet not rolled out (s its state), with its most suspect pod
// as show returns it.
func (r *rolloutRun) rolloutTimeout(ctx context.Context, w kindWatch, s *rolloutState, show func(*podFinding) *podFinding) *rollout.Diagnosis {
	r.refresh(ctx, w)
	s.progress.Verdict = rollout.VerdictTimeout
	msg := s.msg
	if msg == "" {
		msg = r.res.Objects[s.idx].Message
	}
	suspect := s.suspect
	if suspect != nil && show != nil {
		suspect = show(suspect)
	}
	d := r.suspectTimeout(ctx, &s.watchBase, "waiting for rollout to finish: "+msg, suspect)
	r.set(s, r.res.Objects[s.idx].Status, r.res.Objects[s.idx].Message, "")
	return d
}

// byName is the list options of the informer of one object: a field
// selector on its name.
func byName(name string) func(*metav1.ListOptions) {
	s := fields.OneTermEqualSelector("metadata.name", name).String()
	return func(o *metav1.ListOptions) { o.FieldSelector = s }
}

// watchPods starts the informer of the pods of b's object that selector
// selects, calling h on their changes.
func (r *rolloutRun) watchPods(b *watchBase, selector string, h cache.ResourceEventHandler) {
	c := r.podsIn(b.namespace)
	b.pods = r.newInformer("watch the pods of "+b.ref.String(),
		listWatch(c.List, c.Watch, func(o *metav1.ListOptions) { o.LabelSelector = selector }), &corev1.Pod{}, h)
}

// podDiagnosis diagnoses finding f (verdict v) on a pod of b's object,
// with the pod's events, log tail and cause (see diagnoser.fromPod).
func (r *rolloutRun) podDiagnosis(ctx context.Context, b *watchBase, v rollout.Verdict, f *podFinding) *rollout.Diagnosis {
	g := diagnoser{client: r.client, opts: r.o}
	return g.fromPod(ctx, v, b.object, b.namespace, f, r.podEvents(ctx, b.namespace, f.Pod))
}

// selectorFailure is a failure on an object whose selector is invalid.
func selectorFailure(w kindWatch, v rollout.Verdict, msg string) *failure {
	return &failure{verdict: v, w: w, reason: "InvalidSelector", message: msg}
}
