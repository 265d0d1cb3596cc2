package canary

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/rollout"
)

// A canary left behind: a Deployment that still carries a canary's
// transient strategy (Annotation) because the canary was refused
// with --no-rollback, or because its deploy died (killed, a lost machine)
// before promoting or rolling back. Its canary pods never count as
// available (MinReadySeconds), so the Deployment controller keeps
// every old pod and never moves the rollout on by itself: the unvetted
// revision runs on the canary pods only, until an operation replaces the
// strategy. Every operation that meets one says so: deploy and rollback
// replace it (a deploy's canary decision is taken against the deployed
// revision, so the canary is held and judged again); wait fails at once
// instead of waiting for a rollout that cannot finish (and rolls back
// with --rollback-on-failure); status shows it.

// VerdictNotPromoted is the failure of a wait on a revision whose
// Deployment still holds a canary that was never promoted.
const VerdictNotPromoted = "CanaryNotPromoted"

// Leftover is a Deployment that carries a canary's transient
// strategy.
type Leftover struct {
	// Deployment is "namespace/name".
	Deployment string `json:"deployment"`
	// Revision is the revision whose canary it holds.
	Revision        int   `json:"revision"`
	MinReadySeconds int64 `json:"minReadySeconds"`
}

// String says what the leftover is and what it means.
func (l Leftover) String() string {
	return fmt.Sprintf("Deployment %s still carries the transient canary strategy of revision %d (minReadySeconds %d: its canary pods never count as available, the old pods keep serving and the rollout does not go on): that canary was refused without a rollback, or its deploy ended before promoting it",
		l.Deployment, l.Revision, l.MinReadySeconds)
}

// LeftoverOf returns the leftover obj is (a live Deployment carrying
// Annotation), if it is one.
func LeftoverOf(obj *unstructured.Unstructured) (Leftover, bool) {
	if obj == nil || obj.GetKind() != "Deployment" || obj.GroupVersionKind().Group != "apps" {
		return Leftover{}, false
	}
	v, ok := obj.GetAnnotations()[Annotation]
	if !ok {
		return Leftover{}, false
	}
	rev, _ := strconv.Atoi(v)
	minReady, _, _ := unstructured.NestedInt64(obj.Object, "spec", "minReadySeconds")
	return Leftover{Deployment: obj.GetNamespace() + "/" + obj.GetName(), Revision: rev, MinReadySeconds: minReady}, true
}

// Leftovers returns the leftovers among live objects.
func Leftovers(live []*unstructured.Unstructured) []Leftover {
	var out []Leftover
	for _, o := range live {
		if l, ok := LeftoverOf(o); ok {
			out = append(out, l)
		}
	}
	return out
}

// Getter reads the live copy of an object (release.ObjectClient's Get).
type Getter interface {
	Get(ctx context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error)
}

// LiveLeftovers reads the live copies of the Deployments among objs (in
// namespace when they name none) through client, and returns those that
// carry a canary's transient strategy.
func LiveLeftovers(ctx context.Context, client Getter, objs []*unstructured.Unstructured, namespace string) ([]Leftover, error) {
	var live []*unstructured.Unstructured
	for _, o := range objs {
		ref := charts.RefIn(o, namespace)
		if !ref.IsDeployment() {
			continue
		}
		l, err := client.Get(ctx, o, namespace)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get %s: %w", ref, err)
		}
		live = append(live, l)
	}
	return Leftovers(live), nil
}

// LeftoverFailure is the diagnosis of a wait on a revision whose
// Deployment holds a canary that was never promoted.
func LeftoverFailure(release string, l Leftover) *rollout.Diagnosis {
	return &rollout.Diagnosis{
		Reason: VerdictNotPromoted, Verdict: VerdictNotPromoted, Cause: "unknown",
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
