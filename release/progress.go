package release

import (
	"fmt"
	"strings"
	"time"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release/preflight"
	"github.com/vllmctl/vllmctl/release/storage"
)

// Phase names the step of an operation a progress event belongs to.
type Phase string

// The phases of the release operations, in the order they happen.
const (
	PhaseRender     Phase = "render"
	PhasePreflight  Phase = "preflight"
	PhaseDiff       Phase = "diff"
	PhaseLock       Phase = "lock"
	PhaseHook       Phase = "hook"
	PhaseApply      Phase = "apply"
	PhaseReplicaSet Phase = "replicaset"
	PhaseWait       Phase = "wait"
	PhaseCanary     Phase = "canary"
	// PhaseAnalysis: the canary analysis, one event per measurement.
	PhaseAnalysis Phase = "analysis"
	PhasePrune    Phase = "prune"
	PhaseDelete   Phase = "delete"
	PhaseRollback Phase = "rollback"
	PhaseHistory  Phase = "history"
	PhaseDone     Phase = "done"
)

// ProgressEvent is one change during an operation: an object applied, a
// status seen while waiting, a record written.
type ProgressEvent struct {
	Time     time.Time `json:"time"`
	Release  string    `json:"release"`
	Revision int       `json:"revision,omitempty"`
	Phase    Phase     `json:"phase"`
	// Object is the object concerned, e.g. "apps/v1 Deployment ml/chat".
	Object string `json:"object,omitempty"`
	// Status is the object's or the record's new state, e.g. "configured",
	// "InProgress", "deployed".
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	// Rollout is where a Deployment's rollout stands (wait phase, when the
	// Waiter reports it).
	Rollout *rollout.RolloutProgress `json:"rollout,omitempty"`
	// Wait is the Waiter's own event (wait phase), for printers that
	// render rollouts (termout.ProgressPrinter).
	Wait *rollout.Event `json:"-"`
	// Preflight is the capacity preflight's report (preflight phase).
	Preflight *preflight.Report `json:"preflight,omitempty"`
	// Diff is what the deploy changes (diff phase), for printers that
	// render it as a diff.
	Diff *diff.Report `json:"-"`
	// Measurement is one measurement of the canary analysis (analysis
	// phase).
	Measurement *storage.AnalysisMeasurement `json:"measurement,omitempty"`
}

// String formats the event as one plain progress line, "<time>
// <release>#<revision> <phase>: [<object>: ]<status>[: <message>]":
//
//	2026-03-01T10:00:00Z chat#3 apply: apps/v1 Deployment ml/chat: configured
//	2026-03-01T10:00:09Z chat#3 done: deployed: Upgrade complete
func (ev ProgressEvent) String() string {
	var b strings.Builder
	b.WriteString(ev.Time.UTC().Format(time.RFC3339))
	b.WriteString(" " + ev.Release)
	if ev.Revision > 0 {
		fmt.Fprintf(&b, "#%d", ev.Revision)
	}
	fmt.Fprintf(&b, " %s:", ev.Phase)
	// Object, status and message may quote the cluster: sanitised.
	if ev.Object != "" {
		b.WriteString(" " + termout.SanitizeLine(ev.Object) + ":")
	}
	if ev.Status != "" {
		b.WriteString(" " + termout.SanitizeLine(ev.Status))
	}
	if ev.Message != "" {
		if ev.Status != "" {
			b.WriteString(":")
		}
		b.WriteString(" " + termout.SanitizeLine(strings.Join(strings.Fields(ev.Message), " ")))
	}
	return strings.TrimSuffix(b.String(), ":")
}
