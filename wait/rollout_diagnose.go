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
	if f.w == nil {
		s := r.res.Objects[f.other]
		return &rollout.Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: rollout.ObjectName(s.Object), Namespace: s.Object.Namespace, Message: f.message,
			Hints: []string{fmt.Sprintf("kubectl describe %s%s shows its conditions and events", rollout.ObjectName(s.Object), nsFlag(s.Object.Namespace))}}
	}
	return f.w.diagnose(ctx, r, f)
}

// diagnose explains the failure of a Deployment: from its failed pod, its
// new ReplicaSet failing to create pods, or else its most suspect pod.
func (dw *deployWatch) diagnose(ctx context.Context, r *rolloutRun, f *failure) *rollout.Diagnosis {
	if f.finding != nil {
		return r.podDiagnosis(ctx, &dw.watchBase, f.verdict, f.finding)
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
		d = r.podDiagnosis(ctx, &dw.watchBase, f.verdict, dw.suspect)
		d.Hints = append(hints(d, nil, f.reason), d.Hints...)
		d.Reason = f.reason
		d.Message = joinNonEmpty("; ", f.message, suspectMessage(dw.suspect))
	default:
		d = &rollout.Diagnosis{Verdict: f.verdict, Reason: f.reason, Object: dw.object, Namespace: dw.namespace, Message: f.message}
		d.Hints = hints(d, nil, f.reason)
	}
	return d
}

// timeout explains a timeout on a Deployment not rolled out, with its
// most suspect pod.
func (dw *deployWatch) timeout(ctx context.Context, r *rolloutRun) *rollout.Diagnosis {
	return r.rolloutTimeout(ctx, dw, &dw.rolloutState, nil)
}

// diagnoseTimeout explains a timeout: the first Deployment not rolled out,
// with its most suspect pod, or else the first StatefulSet not rolled
// out, likewise, or else the first Job or Pod not completed, or else the
// first other object not Current.
func (r *rolloutRun) diagnoseTimeout(ctx context.Context) *rollout.Diagnosis {
	for _, w := range r.watches() {
		if !w.base().done {
			return w.timeout(ctx, r)
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

// suspectTimeout explains a timeout on b's object (a Deployment,
// StatefulSet or LeaderWorkerSet), whose rollout status says msg, with its
// most suspect pod (nil: none).
func (r *rolloutRun) suspectTimeout(ctx context.Context, b *watchBase, msg string, suspect *podFinding) *rollout.Diagnosis {
	if suspect == nil {
		d := &rollout.Diagnosis{Verdict: rollout.VerdictTimeout, Reason: reasonTimeout, Object: b.object, Namespace: b.namespace, Message: msg}
		d.Hints = hints(d, nil, reasonTimeout)
		return d
	}
	d := r.podDiagnosis(ctx, b, rollout.VerdictTimeout, suspect)
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
