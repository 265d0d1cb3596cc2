// The RolloutWatcher's run loop: one Wait from start (informers, the other
// objects' waiter, the timeout) through the evaluations on every change to
// its end (rolled out, failed, timed out, canceled), and the statuses of
// the objects other than Deployments.

package wait

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// loop is the state of the run loop of one Wait.
type loop struct {
	otherEvents   chan rollout.Event // the other waiter's events; nil once closed
	otherDone     chan otherResult   // the other waiter's result; nil once received
	othersCurrent bool               // every other object is Current
	timeout       <-chan time.Time   // opts.Timeout passed
	until         <-chan struct{}    // a canary phase's hold; nil once closed
	recheck       clock.Timer        // evaluate again without news

	// How the loop ended.
	fail     *failure
	fatal    error
	timedOut bool
}

type otherResult struct {
	res Result
	err error
}

func (r *rolloutRun) wait(ctx context.Context, objs []*unstructured.Unstructured) (Result, error) {
	r.start = r.clk.Now()
	r.sendTo = ctx
	if o, err := r.begin(objs); o != "" {
		return r.finish(o, err)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopInformers := r.startInformers(wctx)
	defer stopInformers()
	l := &loop{othersCurrent: len(r.other) == 0}
	if r.opts.Canary != nil {
		l.until = r.opts.Canary.Until
	}
	stopOthers := r.startOthers(wctx, l)
	defer stopOthers()
	stopTimeout := r.startTimeout(l)
	defer stopTimeout()
	defer l.stopRecheck()

	r.sendTo = wctx
	r.run(wctx, l)
	r.sendTo = ctx
	return r.conclude(ctx, wctx, l)
}

// begin sorts objs out. A non-empty outcome ends the wait at once: there is
// nothing to wait for, or the objects cannot be waited for.
func (r *rolloutRun) begin(objs []*unstructured.Unstructured) (Outcome, error) {
	if err := r.identify(objs); err != nil {
		return OutcomeError, err
	}
	if len(r.watches()) == 0 && len(r.other) == 0 {
		return OutcomeCurrent, nil
	}
	if len(r.other) > 0 && r.others == nil {
		return OutcomeError, fmt.Errorf("%s: no waiter for objects other than Deployments, StatefulSets, Jobs and Pods", r.res.Objects[r.otherIdx[0]].Object)
	}
	return "", nil
}

// finish ends the wait with outcome o.
func (r *rolloutRun) finish(o Outcome, err error) (Result, error) {
	r.res.Outcome = o
	r.res.Elapsed = r.clk.Since(r.start)
	return r.res, err
}

// startInformers starts the informers of every object the watcher follows
// itself and of the events of their namespaces, until the returned function
// stops them and waits for their goroutines.
func (r *rolloutRun) startInformers(wctx context.Context) (stop func()) {
	ictx, stopInformers := context.WithCancel(wctx)
	r.ctx = ictx
	for _, w := range r.watches() {
		w.start(r)
		if ns := w.base().namespace; r.ns[ns] == nil {
			r.ns[ns] = r.startEvents(ns)
		}
	}
	return func() {
		stopInformers()
		r.wg.Wait()
	}
}

// startOthers starts the other waiter on the objects that are neither
// Deployments nor run to completion, concurrently, until the returned function stops it and
// drains its events.
func (r *rolloutRun) startOthers(wctx context.Context, l *loop) (stop func()) {
	if len(r.other) == 0 {
		return func() {}
	}
	events := make(chan rollout.Event)
	l.otherEvents = events
	l.otherDone = make(chan otherResult, 1)
	done := l.otherDone
	octx, stopOthers := context.WithCancel(wctx)
	go func() {
		res, err := r.others.Wait(octx, r.other, Options{Namespace: r.opts.Namespace, Events: events})
		done <- otherResult{res, err}
	}()
	return func() {
		stopOthers()
		for range events {
		}
	}
}

// startTimeout starts the timer of opts.Timeout, if any, until the
// returned function stops it.
func (r *rolloutRun) startTimeout(l *loop) (stop func()) {
	if r.opts.Timeout <= 0 {
		return func() {}
	}
	t := r.clk.NewTimer(r.opts.Timeout)
	l.timeout = t.C()
	return func() { t.Stop() }
}

// run evaluates on every change until every object is ready or the wait
// ends otherwise (recorded in l).
func (r *rolloutRun) run(wctx context.Context, l *loop) {
	for {
		began := r.clk.Now()
		f, allDone, recheck := r.evaluate()
		settle := settleAfter(r.clk.Since(began))
		if f != nil {
			l.fail = f
			return
		}
		if r.opts.Canary != nil {
			if l.until == nil && r.canaryReached() {
				return
			}
		} else if allDone && l.othersCurrent {
			return
		}
		recheckC, now := l.armRecheck(r.clk, recheck)
		if now {
			continue
		}
		if r.o.idle != nil {
			r.o.idle()
		}
		if r.next(wctx, l, recheckC, settle) {
			return
		}
	}
}

// armRecheck sets the recheck timer for at (zero: none). now says at has
// passed already: evaluate again at once.
func (l *loop) armRecheck(clk clock.WithTicker, at time.Time) (c <-chan time.Time, now bool) {
	l.stopRecheck()
	if at.IsZero() {
		return nil, false
	}
	d := at.Sub(clk.Now())
	if d <= 0 {
		return nil, true
	}
	l.recheck = clk.NewTimer(d)
	return l.recheck.C(), false
}

func (l *loop) stopRecheck() {
	if l.recheck != nil {
		l.recheck.Stop()
		l.recheck = nil
	}
}

// next waits for the next thing to happen, and reports whether it ends
// the loop. A change is followed by a pause (see settleAfter).
func (r *rolloutRun) next(wctx context.Context, l *loop, recheck <-chan time.Time, settle pause) (end bool) {
	select {
	case <-wctx.Done():
		return true
	case <-l.timeout:
		l.timedOut = true
		return true
	case err := <-r.fatal:
		l.fatal = err
		return true
	case <-r.kick:
		return r.settle(wctx, l, settle)
	case <-recheck:
	case <-l.until:
		l.until = nil
	case ev, ok := <-l.otherEvents:
		if !ok {
			l.otherEvents = nil
			return false
		}
		r.otherEvent(ev)
	case or := <-l.otherDone:
		l.otherDone = nil
		return r.othersDone(wctx, l, or)
	}
	return false
}

// maxSettle bounds the pause between evaluations of a big rollout.
const maxSettle = 2 * time.Second

// pause is how long the loop lets changes pile up after an evaluation
// before it evaluates again: quiet after routine changes (pods scheduled,
// started, Ready), alarmed after a change that may be a verdict (see
// podTrouble and noteEvent).
type pause struct {
	quiet, alarmed time.Duration
}

// settleAfter is the pause after an evaluation that took cost: 999 times
// the cost after routine changes (at most maxSettle), so that judging
// every pod on each of the thousands of pod updates of a big rollout
// takes at most a thousandth of a core (at a hundredth, judging a
// 1000-replica upgrade's pods was a quarter of vllmctl's CPU time, taken
// from the API server and the controllers on a small machine); 99 times
// the cost (at most a hundredth of a core) once a change may be a
// verdict: a container that terminated, waits on an error or restarted,
// a pod unschedulable, a ReplicaSet failing to create pods, so that a
// failure in a big rollout is judged within a fifth of a second or so
// while the progress of a healthy one costs little. A small rollout
// (microseconds per evaluation) is judged at once. A Deployment that
// rolled out (or failed) ends the pause at once (see settle): the pause
// delays the progress, not the end of the wait.
func settleAfter(cost time.Duration) pause {
	if cost < 100*time.Microsecond {
		return pause{}
	}
	return pause{quiet: min(999*cost, maxSettle), alarmed: min(99*cost, maxSettle)}
}

// settle pauses p after a change, so that the changes meanwhile are
// evaluated together; it reports whether the wait ended meanwhile. A
// Deployment whose rollout status says it rolled out or failed ends the
// pause early; an alarm (see alarm) shortens it to p.alarmed. The
// timeout and a fatal error end it and the loop (as in next), at once
// rather than when the pause is over; the other objects' news are taken
// up by the next wait for news.
func (r *rolloutRun) settle(wctx context.Context, l *loop, p pause) (end bool) {
	if p.quiet <= 0 {
		return false
	}
	began := r.clk.Now()
	t := r.clk.NewTimer(p.quiet)
	defer t.Stop()
	var alarmed clock.Timer
	var alarmedC <-chan time.Time
	defer func() {
		if alarmed != nil {
			alarmed.Stop()
		}
	}()
	for {
		select {
		case <-wctx.Done():
			return true
		case <-l.timeout:
			l.timedOut = true
			return true
		case err := <-r.fatal:
			l.fatal = err
			return true
		case <-t.C():
			return false
		case <-alarmedC:
			return false
		case <-r.alarm:
			left := p.alarmed - r.clk.Since(began)
			if left <= 0 {
				return false
			}
			if alarmed == nil {
				alarmed = r.clk.NewTimer(left)
				alarmedC = alarmed.C()
			}
		case <-r.turned:
			if r.anyTurned() {
				return false
			}
		}
	}
}

// othersDone records the other waiter's result, and reports whether it
// ends the loop: the other objects failed, or could not be waited for.
func (r *rolloutRun) othersDone(wctx context.Context, l *loop, or otherResult) (end bool) {
	for _, s := range or.res.Objects {
		r.setOther(s)
	}
	switch {
	case or.err == nil && or.res.Outcome == OutcomeCurrent:
		l.othersCurrent = true
	case or.res.Outcome == OutcomeFailed:
		l.fail = r.otherFailure()
		return true
	case or.res.Outcome == OutcomeError || (or.err != nil && wctx.Err() == nil):
		l.fatal = or.err
		if l.fatal == nil {
			l.fatal = fmt.Errorf("waiting for the other objects ended with %s", or.res.Outcome)
		}
		return true
	}
	return false
}

// conclude ends the wait as the loop ended: on a cluster error, a failure
// (diagnosed), every object ready, a cancellation, or else a timeout
// (diagnosed).
func (r *rolloutRun) conclude(ctx, wctx context.Context, l *loop) (Result, error) {
	switch {
	case l.fatal != nil:
		return r.finish(OutcomeError, fmt.Errorf("watch rollout: %w", l.fatal))
	case l.fail != nil:
		return r.failed(ctx, l.fail)
	case !l.timedOut && ctx.Err() == nil && wctx.Err() == nil && r.opts.Canary != nil:
		r.canaryReached()
		return r.finish(OutcomeCurrent, nil)
	case !l.timedOut && ctx.Err() == nil && wctx.Err() == nil:
		for _, w := range r.watches() {
			w.rolledOut(r)
		}
		return r.finish(OutcomeCurrent, nil)
	case !l.timedOut && errors.Is(ctx.Err(), context.Canceled):
		return r.finish(OutcomeCanceled, fmt.Errorf("wait canceled: %w", ctx.Err()))
	}
	return r.timedOut(ctx, l.timedOut)
}

// failed ends the wait on failure f, with its diagnosis.
func (r *rolloutRun) failed(ctx context.Context, f *failure) (Result, error) {
	d := r.diagnose(ctx, f)
	sanitize(d)
	if d.Cause == "" {
		d.Cause = vllmcause.CauseUnknown
	}
	r.res.Diagnosis = d
	switch {
	case f.w != nil:
		f.w.failedWith(r, f.verdict, d)
	default:
		r.res.Objects[f.other].Status, r.res.Objects[f.other].Message = rollout.StatusFailed, d.Summary()
	}
	res, _ := r.finish(OutcomeFailed, nil)
	nre := &NotReadyError{Outcome: OutcomeFailed, Objects: failedFirst(res.NotCurrent())}
	return res, &RolloutFailedError{Diagnosis: d, NotReady: nre}
}

// timedOut ends the wait on its timeout (opts.Timeout when timer, else
// ctx's deadline), with a diagnosis.
func (r *rolloutRun) timedOut(ctx context.Context, timer bool) (Result, error) {
	d := r.diagnoseTimeout(ctx)
	sanitize(d)
	if d.Cause == "" {
		d.Cause = vllmcause.CauseUnknown
	}
	r.res.Diagnosis = d
	res, _ := r.finish(OutcomeTimeout, nil)
	nre := &NotReadyError{Outcome: OutcomeTimeout, Objects: res.NotCurrent()}
	if timer {
		nre.Timeout = r.opts.Timeout
	}
	return res, &RolloutFailedError{Diagnosis: d, NotReady: nre}
}

// identify sorts objs into Deployments, StatefulSets, LeaderWorkerSets
// (with a dynamic client), Jobs and Pods that run to completion, and
// others, and fills res.Objects in order, without
// duplicates.
func (r *rolloutRun) identify(objs []*unstructured.Unstructured) error {
	seen := map[object.Ref]bool{}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		ref := object.RefOf(obj)
		isDeployment := gvk.Group == appsv1.GroupName && gvk.Kind == "Deployment"
		isStatefulSet := gvk.Group == appsv1.GroupName && gvk.Kind == "StatefulSet"
		isLWS := isLeaderWorkerSet(gvk) && r.dyn != nil
		isRun, isJob := runsToCompletion(obj)
		if (isDeployment || isStatefulSet || isLWS || isRun) && ref.Namespace == "" {
			if r.opts.Namespace == "" {
				return fmt.Errorf("%s: no namespace, and the wait has no default namespace", ref)
			}
			ref.Namespace = r.opts.Namespace
		}
		key := ref
		key.Version = ""
		if seen[key] {
			continue
		}
		seen[key] = true
		if !isDeployment && !isStatefulSet && r.opts.Canary != nil {
			continue // a canary phase waits for Deployments and StatefulSets only
		}
		idx := len(r.res.Objects)
		r.res.Objects = append(r.res.Objects, rollout.ObjectStatus{Object: ref, Status: rollout.StatusUnknown})
		switch {
		case isRun:
			r.runs = append(r.runs, newRunWatch(idx, ref, isJob, r.newJudge()))
		case isStatefulSet:
			r.stss = append(r.stss, r.newStatefulSetWatch(idx, ref))
		case isLWS:
			r.lwss = append(r.lwss, r.newLWSWatch(idx, ref))
		case !isDeployment:
			r.other = append(r.other, obj)
			r.otherIdx = append(r.otherIdx, idx)
		default:
			r.deps = append(r.deps, &deployWatch{
				rolloutState: newRolloutState(idx, ref, rollout.RolloutProgress{Deployment: ref.Name}), judge: r.newJudge(),
			})
		}
	}
	return nil
}

// findOther returns the Result index of another object's status, matching
// on group, kind and name, and on namespace when ours has one.
func (r *rolloutRun) findOther(ref object.Ref) int {
	for _, i := range r.otherIdx {
		o := r.res.Objects[i].Object
		if o.Group == ref.Group && o.Kind == ref.Kind && o.Name == ref.Name && (o.Namespace == "" || o.Namespace == ref.Namespace) {
			return i
		}
	}
	return -1
}

func (r *rolloutRun) setOther(s rollout.ObjectStatus) int {
	i := r.findOther(s.Object)
	if i >= 0 {
		r.res.Objects[i] = s
	}
	return i
}

// otherEvent records and forwards an event of the other waiter.
func (r *rolloutRun) otherEvent(ev rollout.Event) {
	r.setOther(rollout.ObjectStatus{Object: ev.Object, Status: ev.Status, Message: ev.Message})
	r.emit(ev)
}

// otherFailure is the failure of the first other object that failed.
func (r *rolloutRun) otherFailure() *failure {
	for _, i := range r.otherIdx {
		if s := r.res.Objects[i]; s.Status == rollout.StatusFailed {
			return &failure{verdict: rollout.VerdictObjectFailed, other: i, reason: reasonObjectFailed, message: s.Message}
		}
	}
	return &failure{verdict: rollout.VerdictObjectFailed, other: r.otherIdx[0], reason: reasonObjectFailed}
}
