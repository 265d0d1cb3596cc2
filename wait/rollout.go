// The RolloutWatcher: its constructors, Wait, the state of one Wait (in
// all, and per Deployment, StatefulSet or LeaderWorkerSet), and how
// statuses are recorded and sent. The run loop is in rollout_run.go, what
// it asks of each kind of object (kindWatch) and the bookkeeping shared by
// the kinds in watch.go, the informers in rollout_informers.go and
// replicasets.go, a Deployment's verdicts in rollout_evaluate.go, the
// diagnoses in rollout_diagnose.go; StatefulSets in statefulsets.go,
// LeaderWorkerSets in leaderworkersets.go, Jobs and Pods that run to
// completion in runs.go.

package wait

import (
	"context"
	"reflect"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// RolloutWatcher waits for Deployments, StatefulSets and LeaderWorkerSets
// to roll out, and
// for Jobs and Pods to run to completion, and detects failures early,
// with a [rollout.Diagnosis].
//
// It watches, never polls: per Deployment, informers (list, then watch from
// the list's resourceVersion; re-listed on 410 Gone, re-established after
// dropped connections) on the Deployment itself (field selector on its
// name), on its ReplicaSets (its label selector), on the pods of its new
// ReplicaSet only (its selector plus pod-template-hash); per StatefulSet,
// on the StatefulSet (by name) and on its pods (its label selector: every
// revision's); and, per namespace, one on its events (those of pods,
// ReplicaSets and StatefulSets are read). A healthy rollout therefore
// costs a fixed number of requests however long it takes. Other objects
// are left to another Waiter, a [KstatusWaiter] by default, but for those
// that run to completion (Helm's hooks and tests):
//
// With a dynamic client ([RolloutWatcher.WithDynamicClient]) it follows a
// LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) like a StatefulSet:
// informers on it (by name), on its leader StatefulSet (by name: its
// label [LeaderWorkerSetRevisionLabel] names the current template
// revision once the LWS controller observed the generation) and on its
// pods (label leaderworkerset.sigs.k8s.io/name: every group and
// revision). It succeeds by [LeaderWorkerSetRolledOut]; it fails on the
// pod verdicts about the pods of the current revision, or when one group
// was recreated (its leader replaced by a new pod of the same revision)
// RolloutOptions.MaxRestarts times ([rollout.VerdictGroupRecreated]): with
// restartPolicy RecreateGroupOnPodRestart the controller deletes the
// group at a container's first restart, so CrashLoopBackOff never shows.
// The log of each termination of a container of the current revision is
// read once, while its pod exists, and the diagnosis of a recreated group
// shows it. Other revisions' pods failing are warnings, as are the
// controller's RecreateGroup events.
//
// A Job (informers on the Job, by name, and on its pods, by its selector)
// is Current when its condition Complete is True. It fails when its
// condition Failed is True (diagnosed from its pod that failed last), or
// at once, before its backoffLimit is spent, when one of its pods meets a
// pod verdict of [RolloutOptions] (CrashLoopBackOff, OOMKilled, image
// pull errors, unschedulable). A bare Pod with restartPolicy Never or
// OnFailure (an informer on it, by name) is Current when its phase is
// Succeeded, and fails when its phase is Failed or on the same verdicts.
// Pods with restartPolicy Always are left to the other Waiter.
//
// A Deployment succeeds by kubectl rollout status' rules: its controller
// observed the latest generation, every replica is updated, no old replica
// is left, and every updated replica is available. It fails on the
// verdicts of [RolloutOptions] about the pods of its new ReplicaSet, when
// its Progressing condition says ProgressDeadlineExceeded, or when its new
// ReplicaSet cannot create pods (FailedCreate). Pods of old ReplicaSets
// failing do not fail the rollout; they are reported as warnings.
//
// A StatefulSet succeeds by kubectl rollout status' rules (see
// [StatefulSetRolledOut]): its controller observed the latest generation,
// every replica is ready, and then, with a RollingUpdate, its
// currentRevision is its updateRevision, or, with a partition, the
// ordinals at and above it are updated. It fails on the verdicts of
// [RolloutOptions] about the pods of its update revision (label
// controller-revision-hash equal to status.updateRevision, see
// [PodRevision]): one failing pod fails it, with the Diagnosis of a
// Deployment's pod whose Object names the StatefulSet
// ("statefulset/web"). It fails too on a FailedCreate event of the
// StatefulSet during the wait while it lacks pods (a quota refusal as for
// a ReplicaSet: once no pod of it is going away). Pods of other revisions
// failing are warnings. Its events carry a RolloutProgress with
// StatefulSet, UpdateRevision and CurrentRevision set, and kubectl's
// messages ("Waiting for 1 pods to be ready...").
type RolloutWatcher struct {
	client kubernetes.Interface
	dyn    dynamic.Interface // LeaderWorkerSets; nil leaves them to others
	pods   rest.Interface    // the pods' informers' (NewPodWatchClient); nil: client's
	apps   rest.Interface    // the Deployments' and ReplicaSets' informers' (NewAppsWatchClient); nil: client's
	others Waiter
	opts   RolloutOptions
}

var _ Waiter = (*RolloutWatcher)(nil)

// NewRolloutWatcher returns a RolloutWatcher reading the cluster through
// client. others waits for the objects it does not follow itself (neither
// Deployments, StatefulSets, Jobs, nor Pods that run to completion, nor,
// given a dynamic client, LeaderWorkerSets); it may be nil when there are
// none.
func NewRolloutWatcher(client kubernetes.Interface, others Waiter, opts RolloutOptions) *RolloutWatcher {
	return &RolloutWatcher{client: client, others: others, opts: opts.withDefaults()}
}

// WithPodWatchClient makes w's informers of pods list and watch them
// through rc, a [NewPodWatchClient] client, instead of the typed client's
// full decoding. It returns w.
func (w *RolloutWatcher) WithPodWatchClient(rc rest.Interface) *RolloutWatcher {
	w.pods = rc
	return w
}

// WithAppsWatchClient makes w's informers of Deployments and ReplicaSets
// list and watch them through rc, a [NewAppsWatchClient] client, instead
// of the typed client's full decoding. It returns w.
func (w *RolloutWatcher) WithAppsWatchClient(rc rest.Interface) *RolloutWatcher {
	w.apps = rc
	return w
}

// WithDynamicClient makes w follow LeaderWorkerSets itself, reading them
// through dyn (see [LeaderWorkerSetRolledOut]); without it they are left
// to the other Waiter. It returns w.
func (w *RolloutWatcher) WithDynamicClient(dyn dynamic.Interface) *RolloutWatcher {
	w.dyn = dyn
	return w
}

// Wait watches objs until every Deployment and StatefulSet rolled out,
// every Job and Pod that runs to completion completed, and every other
// object is Current, a failure verdict is reached, opts.Timeout passes or
// ctx ends. See [Waiter]. On a failure or a timeout the Result carries a
// Diagnosis and the error is a *RolloutFailedError wrapping a
// *NotReadyError. An error from the cluster (a watch refused) ends the
// wait with OutcomeError.
//
// The events of a Deployment or StatefulSet carry a RolloutProgress; one
// is sent whenever its status, message or progress changes, and one per
// warning (with the status unchanged). The last event of a failed
// Deployment or StatefulSet carries the failure verdict.
func (w *RolloutWatcher) Wait(ctx context.Context, objs []*unstructured.Unstructured, opts Options) (Result, error) {
	if opts.Events != nil {
		defer close(opts.Events)
	}
	r := &rolloutRun{
		client: w.client,
		dyn:    w.dyn,
		podRC:  w.pods,
		appsRC: w.apps,
		others: w.others,
		o:      w.opts,
		clk:    w.opts.Clock,
		opts:   opts,
		kick:   make(chan struct{}, 1),
		turned: make(chan struct{}, 1),
		alarm:  make(chan struct{}, 1),
		fatal:  make(chan error, 1),
		obs:    map[types.UID]int{},
		ns:     map[string]*nsWatch{},
	}
	if opts.Values != nil {
		r.o.Values = opts.Values
	}
	return r.wait(ctx, objs)
}

// rolloutRun is the state of one Wait.
type rolloutRun struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
	podRC  rest.Interface // see RolloutWatcher.WithPodWatchClient
	appsRC rest.Interface // see RolloutWatcher.WithAppsWatchClient
	others Waiter
	o      RolloutOptions
	clk    clock.WithTicker
	opts   Options
	start  time.Time
	res    Result

	deps  []*deployWatch
	stss  []*stsWatch
	lwss  []*lwsWatch // LeaderWorkerSets
	runs  []*runWatch // Jobs and Pods that run to completion
	other []*unstructured.Unstructured
	// otherIdx are the Result indexes of the other objects.
	otherIdx []int
	ns       map[string]*nsWatch
	ctx      context.Context       // the informers' context
	wg       sync.WaitGroup        // the informers' goroutines
	kick     chan struct{}         // something changed
	turned   chan struct{}         // a Deployment changed (see settle)
	alarm    chan struct{}         // a change that may be a verdict (see settle)
	fatal    chan error            // an informer cannot watch
	sendTo   context.Context       // bounds sends on opts.Events
	cls      *vllmcause.Classifier // classifies terminations' logs (newJudge)

	mu       sync.Mutex
	obs      map[types.UID]int // observations of new pods, by the informers
	warnings []*corev1.Event   // Warning events not reported yet
	// failedRS are the latest FailedCreate events of ReplicaSets and
	// StatefulSets, by the UID of the object.
	failedRS map[types.UID]*corev1.Event
	// failedAt is when the watcher received the latest FailedCreate event
	// of a ReplicaSet or StatefulSet (its own clock: no skew with the
	// cluster's).
	failedAt map[types.UID]time.Time
	// unreachable is when a watch last failed to reach the API server
	// (see stalled).
	unreachable time.Time
}

// rolloutState is what the events of a Deployment, StatefulSet or
// LeaderWorkerSet report: its status in the Result (at idx), its progress,
// and what was sent.
type rolloutState struct {
	watchBase
	progress rollout.RolloutProgress
	lastSent rollout.RolloutProgress // the progress last sent
}

func newRolloutState(idx int, ref object.Ref, p rollout.RolloutProgress) rolloutState {
	p.Verdict = rollout.VerdictProgressing
	return rolloutState{watchBase: newWatchBase(idx, ref), progress: p}
}

func (s *rolloutState) state() *rolloutState { return s }

func (s *rolloutState) report(r *rolloutRun, st rollout.Status, msg, warning string) {
	r.set(s, st, msg, warning)
}

func (s *rolloutState) rolledOut(r *rolloutRun) {
	if s.progress.Verdict != rollout.VerdictRolledOut {
		s.progress.Verdict = rollout.VerdictRolledOut
		r.set(s, rollout.StatusCurrent, s.msg, "")
	}
}

func (s *rolloutState) failedWith(r *rolloutRun, v rollout.Verdict, d *rollout.Diagnosis) {
	s.progress.Verdict = v
	s.progress.Cause, s.progress.Evidence, s.progress.Hints = d.Cause, d.Evidence, d.Hints
	r.set(s, rollout.StatusFailed, d.Summary(), "")
}

// observed records the counts of a rollout status in the progress, and
// whether it rolled out (done) with msg.
func (s *rolloutState) observed(done bool, msg string, desired, updated, ready, available int32) {
	s.done, s.msg = done, msg
	p := &s.progress
	p.Desired, p.Updated, p.Ready, p.Available = desired, updated, ready, available
	p.Verdict = rollout.VerdictProgressing
	if done {
		p.Verdict = rollout.VerdictRolledOut
	}
}

// rolloutWatch is a Deployment's, StatefulSet's or LeaderWorkerSet's
// watch.
type rolloutWatch interface{ state() *rolloutState }

// deployWatch follows one Deployment.
type deployWatch struct {
	rolloutState

	rs      *informer // its ReplicaSets (its selector)
	podHash string
	judge   *podJudge

	d     *appsv1.Deployment
	newRS *appsv1.ReplicaSet
	oldRS []*appsv1.ReplicaSet
	// canaryReady are the Ready pods of the new ReplicaSet (a canary
	// phase only).
	canaryReady []string
	// released is when the watcher last saw pods of the Deployment going
	// away (a ReplicaSet with more pods than it wants, or terminating
	// ones), which frees their share of a quota; guarded by rolloutRun.mu.
	released time.Time
}

// failure is a failure verdict reached on the cluster, before diagnosis.
type failure struct {
	verdict rollout.Verdict
	w       kindWatch   // the object that failed; nil for another object
	finding *podFinding // a pod's failure
	reason  string      // otherwise: the Deployment's, ReplicaSet's or StatefulSet's
	message string
	rs      *appsv1.ReplicaSet
	other   int                     // the Result index of another object that failed
	stalled *ControllerStalledError // VerdictControllerStalled's
}

// poke wakes the main loop.
func (r *rolloutRun) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// raise tells a settling loop that a change may be a verdict (see
// settle).
func (r *rolloutRun) raise() {
	select {
	case r.alarm <- struct{}{}:
	default:
	}
}

// emit sends ev on opts.Events, stamped, unless the wait is over.
func (r *rolloutRun) emit(ev rollout.Event) {
	if r.opts.Events == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = r.clk.Now()
	}
	select {
	case r.opts.Events <- ev:
	case <-r.sendTo.Done():
	}
}

// set records a Deployment's or StatefulSet's status and sends an event
// when it, or the rollout's progress, changed; warning, when set, is sent
// in any case.
func (r *rolloutRun) set(w rolloutWatch, st rollout.Status, msg, warning string) {
	dw := w.state()
	// Both may quote the cluster (conditions, events, termination
	// messages): sanitised here, the one way into the events and results.
	msg, warning = termout.SanitizeLine(msg), termout.SanitizeLine(warning)
	cur := &r.res.Objects[dw.idx]
	p := dw.progress
	p.OldReplicaSets = append([]string(nil), p.OldReplicaSets...)
	changed := !dw.sent || cur.Status != st || cur.Message != msg || !reflect.DeepEqual(p, dw.lastSent)
	cur.Status, cur.Message = st, msg
	if !changed && warning == "" {
		return
	}
	dw.sent, dw.lastSent = true, p
	p.Warning = warning
	r.emit(rollout.Event{Object: dw.ref, Status: st, Message: msg, Rollout: &p})
}
