package release

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// A canary left behind: a Deployment that still carries a canary's
// transient strategy (CanaryAnnotation) because the canary was refused
// with --no-rollback, or because its deploy died (killed, a lost machine)
// before promoting or rolling back. Its canary pods never count as
// available (canaryMinReadySeconds), so the Deployment controller keeps
// every old pod and never moves the rollout on by itself: the unvetted
// revision runs on the canary pods only, until an operation replaces the
// strategy. Every operation that meets one says so: deploy and rollback
// replace it (a deploy's canary decision is taken against the deployed
// revision, so the canary is held and judged again); wait fails at once
// instead of waiting for a rollout that cannot finish (and rolls back
// with --rollback-on-failure); status shows it.

// VerdictCanaryNotPromoted is the failure of a wait on a revision whose
// Deployment still holds a canary that was never promoted.
const VerdictCanaryNotPromoted = "CanaryNotPromoted"

// CanaryLeftover is a Deployment that carries a canary's transient
// strategy.
type CanaryLeftover struct {
	// Deployment is "namespace/name".
	Deployment string `json:"deployment"`
	// Revision is the revision whose canary it holds.
	Revision        int   `json:"revision"`
	MinReadySeconds int64 `json:"minReadySeconds"`
}

// String says what the leftover is and what it means.
func (l CanaryLeftover) String() string {
	return fmt.Sprintf("Deployment %s still carries the transient canary strategy of revision %d (minReadySeconds %d: its canary pods never count as available, the old pods keep serving and the rollout does not go on): that canary was refused without a rollback, or its deploy ended before promoting it",
		l.Deployment, l.Revision, l.MinReadySeconds)
}

// canaryLeftoverOf returns the leftover obj is (a live Deployment carrying
// CanaryAnnotation), if it is one.
func canaryLeftoverOf(obj *unstructured.Unstructured) (CanaryLeftover, bool) {
	if obj == nil || obj.GetKind() != "Deployment" || obj.GroupVersionKind().Group != "apps" {
		return CanaryLeftover{}, false
	}
	v, ok := obj.GetAnnotations()[CanaryAnnotation]
	if !ok {
		return CanaryLeftover{}, false
	}
	rev, _ := strconv.Atoi(v)
	minReady, _, _ := unstructured.NestedInt64(obj.Object, "spec", "minReadySeconds")
	return CanaryLeftover{Deployment: obj.GetNamespace() + "/" + obj.GetName(), Revision: rev, MinReadySeconds: minReady}, true
}

// canaryLeftovers returns the leftovers among live objects.
func canaryLeftovers(live []*unstructured.Unstructured) []CanaryLeftover {
	var out []CanaryLeftover
	for _, o := range live {
		if l, ok := canaryLeftoverOf(o); ok {
			out = append(out, l)
		}
	}
	return out
}

// emitCanaryLeftovers says, for an operation of rec that replaces them,
// which leftovers among the live objects it read before applying it
// replaces (those of rec's own revision are its own canary).
func (e *Engine) emitCanaryLeftovers(rec *storage.Release, live []*unstructured.Unstructured, replacement string) {
	for _, l := range canaryLeftovers(live) {
		if l.Revision == rec.Revision {
			continue
		}
		e.emit(rec.Name, rec.Revision, PhaseCanary, "Deployment "+l.Deployment, "left behind", l.String()+"; "+replacement)
	}
}

// beforeObjects are the live objects an apply read before applying.
func beforeObjects(applied []cluster.ApplyResult) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, a := range applied {
		if a.Before != nil {
			out = append(out, a.Before)
		}
	}
	return out
}

// liveCanaryLeftovers reads the live copies of the Deployments among objs
// and returns those that carry a canary's transient strategy.
func (e *Engine) liveCanaryLeftovers(ctx context.Context, objs []*unstructured.Unstructured) ([]CanaryLeftover, error) {
	if e.Objects == nil {
		return nil, nil
	}
	var live []*unstructured.Unstructured
	for _, o := range objs {
		ref := refIn(o, e.Namespace())
		if !ref.IsDeployment() {
			continue
		}
		l, err := e.Objects.Get(ctx, o, e.Namespace())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get %s: %w", ref, err)
		}
		live = append(live, l)
	}
	return canaryLeftovers(live), nil
}

// canaryLeftoverFailure is the diagnosis of a wait on a revision whose
// Deployment holds a canary that was never promoted.
func canaryLeftoverFailure(release string, l CanaryLeftover) *rollout.Diagnosis {
	return &rollout.Diagnosis{
		Reason: VerdictCanaryNotPromoted, Verdict: VerdictCanaryNotPromoted, Cause: "unknown",
		Object:  "deployment/" + nameOf(l.Deployment),
		Message: l.String(),
		Hints: []string{
			fmt.Sprintf("deploy again (vllmctl deploy %s ... --canary N): the canary is held and judged again", release),
			fmt.Sprintf("or restore the deployed revision: vllmctl rollback %s", release),
		},
	}
}

// nameOf is the name of "namespace/name".
func nameOf(nsName string) string {
	_, name, _ := strings.Cut(nsName, "/")
	return name
}
