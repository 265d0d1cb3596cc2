// How the RolloutWatcher explains a failure or a timeout: the Diagnosis of
// the failed (or most suspect) pod or ReplicaSet, with its events.

package wait

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vllmctl/vllmctl/internal/rollout"
)

// podEvents returns the events of pod: one list of them, since the
// namespace's informer leaves the routine ones out (see routineReasons);
// the informer's when that list fails.
func (r *rolloutRun) podEvents(ctx context.Context, namespace string, pod *corev1.Pod) []*corev1.Event {
	if events, err := listPodEvents(ctx, r.client, pod); err == nil {
		return events
	}
	nw := r.ns[namespace]
	if nw == nil {
		return nil
	}
	return r.eventsOf(ctx, nw.events, "Pod", pod.Name, pod.UID)
}

func (r *rolloutRun) eventsOf(ctx context.Context, i *informer, kind, name string, uid types.UID) []*corev1.Event {
	i.waitSynced(ctx, 2*time.Second)
	var out []*corev1.Event
	for _, o := range i.list() {
		e, ok := o.(*corev1.Event)
		if !ok || e.InvolvedObject.Kind != kind || e.InvolvedObject.Name != name {
			continue
		}
		if uid != "" && e.InvolvedObject.UID != "" && e.InvolvedObject.UID != uid {
			continue
		}
		out = append(out, e)
	}
	return out
}

// diagnose explains a failure.
func (r *rolloutRun) diagnose(ctx context.Context, f *failure) *rollout.Diagnosis {
	if f.stalled != nil {
		return f.stalled.Diagnosis()
	}
	if f.run != nil {
		return r.diagnoseRun(ctx, f)
	}
	if f.sts != nil {
		return r.diagnoseStatefulSet(ctx, f)
	}
	if f.lws != nil {
		return r.diagnoseLWS(ctx, f)
	}
	g := diagnoser{client: r.client, opts: r.o}
	if f.dw == nil {
		s := r.res.Objects[f.other]
		return &rollout.Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: rollout.ObjectName(s.Object), Namespace: s.Object.Namespace, Message: f.message,
			Hints: []string{fmt.Sprintf("kubectl describe %s%s shows its conditions and events", rollout.ObjectName(s.Object), nsFlag(s.Object.Namespace))}}
	}
	dw := f.dw
	if f.finding != nil {
		return g.fromPod(ctx, f.verdict, dw.object, dw.namespace, f.finding, r.podEvents(ctx, dw.namespace, f.finding.Pod))
	}
	if f.rs == nil {
		r.refresh(ctx, dw)
	}
	var d *rollout.Diagnosis
	switch {
	case f.rs != nil:
		d = &rollout.Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: dw.object, Namespace: dw.namespace, Message: fmt.Sprintf("ReplicaSet %s: %s", f.rs.Name, f.message)}
		if nw := r.ns[dw.namespace]; nw != nil {
			d.Events = formatEvents(r.eventsOf(ctx, nw.events, "ReplicaSet", f.rs.Name, f.rs.UID), r.o.MaxEvents)
		}
		d.LogNote = "no pod was created: there are no logs"
		d.Hints = hints(d, nil, f.reason)
	case dw.suspect != nil:
		d = g.fromPod(ctx, f.verdict, dw.object, dw.namespace, dw.suspect, r.podEvents(ctx, dw.namespace, dw.suspect.Pod))
		d.Hints = append(hints(d, nil, f.reason), d.Hints...)
		d.Reason = f.reason
		d.Message = joinNonEmpty("; ", f.message, suspectMessage(dw.suspect))
	default:
		d = &rollout.Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: dw.object, Namespace: dw.namespace, Message: f.message}
		d.Hints = hints(d, nil, f.reason)
	}
	return d
}

// refresh brings dw's suspect pod up to date before a diagnosis: the
// informer of the pods may have started just before the verdict.
func (r *rolloutRun) refresh(ctx context.Context, dw *deployWatch) {
	dw.pods.waitSynced(ctx, 2*time.Second)
	if dw.dep.synced() {
		_, _ = r.evaluateDeployment(dw, r.clk.Now())
	}
}

// diagnoseTimeout explains a timeout: the first Deployment not rolled out,
// with its most suspect pod, or else the first StatefulSet not rolled
// out, likewise, or else the first Job or Pod not completed, or else the
// first other object not Current.
func (r *rolloutRun) diagnoseTimeout(ctx context.Context) *rollout.Diagnosis {
	for _, dw := range r.deps {
		if dw.done {
			continue
		}
		r.refresh(ctx, dw)
		dw.progress.Verdict = rollout.VerdictTimeout
		msg := dw.msg
		if msg == "" {
			msg = r.res.Objects[dw.idx].Message
		}
		d := r.suspectTimeout(ctx, dw.object, dw.namespace, "waiting for rollout to finish: "+msg, dw.suspect)
		r.set(dw, r.res.Objects[dw.idx].Status, r.res.Objects[dw.idx].Message, "")
		return d
	}
	for _, sw := range r.stss {
		if !sw.done {
			return r.statefulSetTimeout(ctx, sw)
		}
	}
	for _, lw := range r.lwss {
		if !lw.done {
			return r.lwsTimeout(ctx, lw)
		}
	}
	for _, rw := range r.runs {
		if !rw.done {
			return r.runTimeout(ctx, rw)
		}
	}
	for _, i := range r.otherIdx {
		s := r.res.Objects[i]
		if s.Status == rollout.StatusCurrent {
			continue
		}
		return &rollout.Diagnosis{Verdict: rollout.VerdictTimeout, Reason: reasonTimeout, Object: rollout.ObjectName(s.Object), Namespace: s.Object.Namespace,
			Message: fmt.Sprintf("%s: %s", s.Status, s.Message),
			Hints:   []string{fmt.Sprintf("kubectl describe %s%s shows its conditions and events", rollout.ObjectName(s.Object), nsFlag(s.Object.Namespace))}}
	}
	return &rollout.Diagnosis{Verdict: rollout.VerdictTimeout, Reason: reasonTimeout, Message: "timed out"}
}

// suspectTimeout explains a timeout on the Deployment or StatefulSet
// object, whose rollout status says msg, with its most suspect pod (nil:
// none).
func (r *rolloutRun) suspectTimeout(ctx context.Context, object, namespace, msg string, suspect *podFinding) *rollout.Diagnosis {
	if suspect == nil {
		d := &rollout.Diagnosis{Verdict: rollout.VerdictTimeout, Reason: reasonTimeout, Object: object, Namespace: namespace, Message: msg}
		d.Hints = hints(d, nil, reasonTimeout)
		return d
	}
	g := diagnoser{client: r.client, opts: r.o}
	d := g.fromPod(ctx, rollout.VerdictTimeout, object, namespace, suspect, r.podEvents(ctx, namespace, suspect.Pod))
	if ph := podPhase(suspect.Pod, false); ph.Phase == rollout.PhaseLoading && ph.StartupDeadline.After(r.clk.Now()) {
		d.Hints = append([]string{fmt.Sprintf("pod %s was still loading under its startup probe, which lets it load for %s more: raise --timeout above the probe's budget, or keep waiting with vllmctl wait --timeout",
			suspect.Pod.Name, ph.StartupDeadline.Sub(r.clk.Now()).Round(time.Second))}, d.Hints...)
	}
	d.Reason = reasonTimeout
	d.Message = joinNonEmpty("; ", msg, suspectMessage(suspect))
	return d
}

// suspectMessage describes a suspicion: "pod chat-x: ErrImagePull: ...".
func suspectMessage(s *podFinding) string {
	m := "pod " + s.Pod.Name
	if s.Container != "" {
		m += " container " + s.Container
	}
	m += ": " + s.Reason
	if s.Message != "" {
		m += ": " + s.Message
	}
	return m
}

func nsFlag(ns string) string {
	if ns == "" {
		return ""
	}
	return " -n " + ns
}
