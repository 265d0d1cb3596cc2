// The canary gate: a deploy's rollout held at its first new pods, judged
// by the watcher for a hold and by an optional gate command, then promoted
// (or rolled back) — on the release's own Deployment, with no controller:
// the new revision is applied with a transient strategy (maxSurge N,
// maxUnavailable 0, a minReadySeconds that keeps the canary pods from
// counting as available, so the Deployment controller creates N new pods
// and takes no old pod down), and promoting applies the chart's strategy
// again (no pod template change, so no new ReplicaSet).

package release

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/object"
)

// Defaults of CanaryOptions.
const (
	DefaultCanaryHold        = 5 * time.Minute
	DefaultCanaryGateTimeout = 10 * time.Minute
	// canaryMargin is what the hold and the gate's timeout leave at least
	// below the transient minReadySeconds (canaryMinReadySeconds), so that
	// a canary pod Ready late in the starting phase still does not count
	// as available before promotion.
	canaryMargin = 10 * time.Minute
	// defaultProgressDeadline is the Deployment default (600 s).
	defaultProgressDeadline = 600
)

// CanaryOptions ask a deploy to roll out through a canary phase.
type CanaryOptions struct {
	// Count is how many new pods come first: N, or P% of the replicas
	// (rounded up, as the Deployment controller rounds maxSurge), at least
	// 1 and at most the replicas.
	Count intstr.IntOrString
	// Hold is how long the Ready canary pods are watched before the gate.
	Hold time.Duration
	// Gate, when set, is a shell command run once after the hold: exit 0
	// promotes, anything else fails the rollout.
	Gate string
	// GateTimeout bounds the gate command.
	GateTimeout time.Duration
	// MaxRestarts is how many restarts a canary container may have.
	MaxRestarts int32
}

// CanaryInputError is an invalid canary option (exit code 2).
type CanaryInputError struct{ Msg string }

func (e *CanaryInputError) Error() string { return "invalid canary: " + e.Msg }

// ExitCode is 2: invalid input.
func (e *CanaryInputError) ExitCode() int { return exitcode.Invalid }

// ParseCanaryCount parses --canary: a positive integer N or a percentage
// P% with 0 < P ≤ 100.
func ParseCanaryCount(s string) (intstr.IntOrString, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 100 {
			return intstr.IntOrString{}, &CanaryInputError{Msg: fmt.Sprintf("--canary %q: a percentage must be between 1%% and 100%%", s)}
		}
		return intstr.FromString(s), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > math.MaxInt32 {
		return intstr.IntOrString{}, &CanaryInputError{Msg: fmt.Sprintf("--canary %q: want a number of pods (at least 1) or a percentage such as 25%%", s)}
	}
	return intstr.FromInt32(int32(n)), nil
}

// Validate checks the options (and fills the defaults).
func (o *CanaryOptions) Validate(opts DeployOptions) error {
	if o.Count.Type == intstr.Int && o.Count.IntVal <= 0 {
		return &CanaryInputError{Msg: "--canary must be at least 1 pod"}
	}
	if o.Count.Type == intstr.String {
		if _, err := ParseCanaryCount(o.Count.StrVal); err != nil {
			return err
		}
	}
	switch {
	case o.Hold < 0:
		return &CanaryInputError{Msg: "--canary-hold must not be negative"}
	case o.GateTimeout < 0:
		return &CanaryInputError{Msg: "--canary-gate-timeout must not be negative"}
	case o.MaxRestarts < 0:
		return &CanaryInputError{Msg: "--canary-max-restarts must not be negative"}
	case opts.MaxSurge != nil || opts.MaxUnavailable != nil:
		return &CanaryInputError{Msg: "--canary sets the rollout's surge itself: it cannot be combined with --max-surge or --max-unavailable"}
	case opts.DryRun:
		return nil
	}
	if o.GateTimeout == 0 {
		o.GateTimeout = DefaultCanaryGateTimeout
	}
	if total := o.Hold + o.GateTimeout + canaryMargin; total.Seconds() > canaryMinReadySeconds {
		return &CanaryInputError{Msg: fmt.Sprintf("--canary-hold plus --canary-gate-timeout (%s) is too long", o.Hold+o.GateTimeout)}
	}
	return nil
}

// The phases of a canary, as progress and the report name them.
const (
	CanaryStarting = "starting"
	// CanaryServeCheck: the serve check of the Ready canary pods.
	CanaryServeCheck = "serve check"
	CanaryHolding    = "holding"
	CanaryGate       = "gate"
	CanaryPromoting  = "promoting"
	CanaryRollout    = "rolling out"
)

// canaryTarget is one Deployment the canary holds.
type canaryTarget struct {
	ref      object.Ref
	replicas int32
	pods     int32 // canary pods
}

// CanaryAnnotation marks a Deployment that carries a canary's transient
// strategy; its value is the revision whose canary it holds. Promotion
// applies the chart's objects again, which removes it (server-side apply
// drops what the field manager no longer applies); a canary that was
// refused without a rollback, or whose deploy died, leaves it behind.
const CanaryAnnotation = "vllmctl.io/canary-revision"

// canaryMinReadySeconds is the transient minReadySeconds: so long that a
// canary pod never counts as available, so that the Deployment controller
// never takes an old pod down by itself, even when the deploy that holds
// the canary is gone (killed, or refused with --no-rollback). Only
// promotion (the chart's strategy) or a rollback moves the rollout on.
const canaryMinReadySeconds = math.MaxInt32 / 2

// canaryTargets are the Deployments whose pod template the deploy changes
// against the release's deployed revision (deployed: its objects; none on
// a first install) and that have pods today, with their canary counts.
// The decision is never taken against the live object: after a refused or
// interrupted canary the live template already is the new one, and the
// canary must still hold. The replica count is the server-side dry run's
// (live when there is none), so an HPA's live replica count counts.
func canaryTargets(objs, deployed []*unstructured.Unstructured, live, dryRun map[string]*unstructured.Unstructured, count intstr.IntOrString, namespace string) []canaryTarget {
	before := map[string]*unstructured.Unstructured{}
	for _, o := range deployed {
		if r := refIn(o, namespace); r.IsDeployment() {
			before[r.String()] = o
		}
	}
	var out []canaryTarget
	for _, o := range objs {
		ref := refIn(o, namespace)
		if !ref.IsDeployment() {
			continue
		}
		key := ref.String()
		prev, cur := before[key], live[key]
		if prev == nil || cur == nil || sameTemplate(prev, o) {
			continue // a new Deployment, or the deployed pod template
		}
		replicas := replicasOf(dryRun[key])
		if dryRun[key] == nil {
			replicas = replicasOf(cur)
		}
		if replicas <= 0 {
			continue
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(&count, int(replicas), true)
		if err != nil || n < 1 {
			n = 1
		}
		out = append(out, canaryTarget{ref: ref, replicas: replicas, pods: int32(min(n, int(replicas)))})
	}
	return out
}

// sameTemplate reports whether two Deployments have the same pod template.
func sameTemplate(a, b *unstructured.Unstructured) bool {
	ta, _, _ := unstructured.NestedFieldNoCopy(a.Object, "spec", "template")
	tb, _, _ := unstructured.NestedFieldNoCopy(b.Object, "spec", "template")
	return reflect.DeepEqual(ta, tb)
}

// replicasOf is a Deployment's spec.replicas (1 when unset, 0 for nil).
func replicasOf(o *unstructured.Unstructured) int32 {
	if o == nil {
		return 0
	}
	n, found, err := unstructured.NestedInt64(o.Object, "spec", "replicas")
	if err != nil || !found {
		return 1
	}
	return int32(min(max(n, 0), math.MaxInt32))
}

// canaryPods is the number of canary pods of targets.
func canaryPods(targets []canaryTarget) int32 {
	var n int32
	for _, t := range targets {
		n += t.pods
	}
	return n
}

// canaryObjects returns copies of objs with the transient canary strategy
// on every target Deployment: maxSurge its canary count, maxUnavailable 0,
// a minReadySeconds no canary pod reaches (canaryMinReadySeconds: no old
// pod is ever taken down before promotion), a progress deadline above
// that, and CanaryAnnotation naming revision.
func canaryObjects(objs []*unstructured.Unstructured, targets []canaryTarget, revision int, namespace string) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, obj := range objs {
		out[i] = obj
		t := targetOf(targets, refIn(obj, namespace))
		if t == nil {
			continue
		}
		c := obj.DeepCopy()
		deadline, found, _ := unstructured.NestedInt64(c.Object, "spec", "progressDeadlineSeconds")
		if !found || deadline <= 0 {
			deadline = defaultProgressDeadline
		}
		strategy := map[string]any{
			"type":          "RollingUpdate",
			"rollingUpdate": map[string]any{"maxSurge": int64(t.pods), "maxUnavailable": int64(0)},
		}
		if err := unstructured.SetNestedField(c.Object, strategy, "spec", "strategy"); err != nil {
			return nil, fmt.Errorf("%s: set the canary strategy: %w", t.ref, err)
		}
		if err := unstructured.SetNestedField(c.Object, int64(canaryMinReadySeconds), "spec", "minReadySeconds"); err != nil {
			return nil, fmt.Errorf("%s: set the canary minReadySeconds: %w", t.ref, err)
		}
		progress := min(int64(canaryMinReadySeconds)+deadline, math.MaxInt32)
		if err := unstructured.SetNestedField(c.Object, progress, "spec", "progressDeadlineSeconds"); err != nil {
			return nil, fmt.Errorf("%s: set the canary progress deadline: %w", t.ref, err)
		}
		annotations := c.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[CanaryAnnotation] = strconv.Itoa(revision)
		c.SetAnnotations(annotations)
		out[i] = c
	}
	return out, nil
}

// targetOf returns the target of ref, or nil.
func targetOf(targets []canaryTarget, ref object.Ref) *canaryTarget {
	for i := range targets {
		t := &targets[i].ref
		if t.Kind == ref.Kind && t.Group == ref.Group && t.Namespace == ref.Namespace && t.Name == ref.Name {
			return &targets[i]
		}
	}
	return nil
}

// targetObjects returns the objects of objs that are targets.
func targetObjects(objs []*unstructured.Unstructured, targets []canaryTarget, namespace string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		if targetOf(targets, refIn(obj, namespace)) != nil {
			out = append(out, obj)
		}
	}
	return out
}
