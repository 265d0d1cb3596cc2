// The canary gate: a deploy's rollout held at its first new pods, judged
// by the watcher for a hold and by an optional gate command, then promoted
// (or rolled back) — on the release's own Deployment, with no controller:
// the new revision is applied with a transient strategy (maxSurge N,
// maxUnavailable 0, a minReadySeconds that keeps the canary pods from
// counting as available, so the Deployment controller creates N new pods
// and takes no old pod down), and promoting applies the chart's strategy
// again (no pod template change, so no new ReplicaSet).

package canary

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// Defaults of Options.
const (
	DefaultHold        = 5 * time.Minute
	DefaultGateTimeout = 10 * time.Minute
	// canaryMargin is what the hold and the gate's timeout leave at least
	// below the transient minReadySeconds (MinReadySeconds), so that
	// a canary pod Ready late in the starting phase still does not count
	// as available before promotion.
	canaryMargin = 10 * time.Minute
	// defaultProgressDeadline is the Deployment default (600 s).
	defaultProgressDeadline = 600
)

// Options ask a deploy to roll out through a canary phase.
type Options struct {
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

// InputError is an invalid canary option (exit code 2).
type InputError struct{ Msg string }

func (e *InputError) Error() string { return "invalid canary: " + e.Msg }

// ExitCode is 2: invalid input.
func (e *InputError) ExitCode() int { return exitcode.Invalid }

// ParseCount parses --canary: a positive integer N or a percentage
// P% with 0 < P ≤ 100.
func ParseCount(s string) (intstr.IntOrString, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 100 {
			return intstr.IntOrString{}, &InputError{Msg: fmt.Sprintf("--canary %q: a percentage must be between 1%% and 100%%", s)}
		}
		return intstr.FromString(s), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > math.MaxInt32 {
		return intstr.IntOrString{}, &InputError{Msg: fmt.Sprintf("--canary %q: want a number of pods (at least 1) or a percentage such as 25%%", s)}
	}
	return intstr.FromInt32(int32(n)), nil
}

// Validate checks the options of a deploy (and fills the defaults):
// surgeSet says the deploy also set --max-surge or --max-unavailable,
// dryRun that it applies nothing.
func (o *Options) Validate(surgeSet, dryRun bool) error {
	if o.Count.Type == intstr.Int && o.Count.IntVal <= 0 {
		return &InputError{Msg: "--canary must be at least 1 pod"}
	}
	if o.Count.Type == intstr.String {
		if _, err := ParseCount(o.Count.StrVal); err != nil {
			return err
		}
	}
	switch {
	case o.Hold < 0:
		return &InputError{Msg: "--canary-hold must not be negative"}
	case o.GateTimeout < 0:
		return &InputError{Msg: "--canary-gate-timeout must not be negative"}
	case o.MaxRestarts < 0:
		return &InputError{Msg: "--canary-max-restarts must not be negative"}
	case surgeSet:
		return &InputError{Msg: "--canary sets the rollout's surge itself: it cannot be combined with --max-surge or --max-unavailable"}
	case dryRun:
		return nil
	}
	if o.GateTimeout == 0 {
		o.GateTimeout = DefaultGateTimeout
	}
	if total := o.Hold + o.GateTimeout + canaryMargin; total.Seconds() > MinReadySeconds {
		return &InputError{Msg: fmt.Sprintf("--canary-hold plus --canary-gate-timeout (%s) is too long", o.Hold+o.GateTimeout)}
	}
	return nil
}

// The phases of a canary, as progress and the report name them.
const (
	PhaseStarting = "starting"
	// PhaseServeCheck: the serve check of the Ready canary pods.
	PhaseServeCheck = "serve check"
	PhaseHolding    = "holding"
	PhaseGate       = "gate"
	PhasePromoting  = "promoting"
	PhaseRollout    = "rolling out"
)

// Annotation marks a Deployment that carries a canary's transient
// strategy; its value is the revision whose canary it holds. Promotion
// applies the chart's objects again, which removes it (server-side apply
// drops what the field manager no longer applies); a canary that was
// refused without a rollback, or whose deploy died, leaves it behind.
const Annotation = "vllmctl.io/canary-revision"

// MinReadySeconds is the transient minReadySeconds: so long that a
// canary pod never counts as available, so that the Deployment controller
// never takes an old pod down by itself, even when the deploy that holds
// the canary is gone (killed, or refused with --no-rollback). Only
// promotion (the chart's strategy) or a rollback moves the rollout on.
const MinReadySeconds = math.MaxInt32 / 2
