// The Waiter interface and the types of a wait: options, statuses, events,
// results and NotReadyError.

package wait

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllm"
)

// Waiter waits for objects to become Current.
//
// Wait returns a nil error only when every object is Current. When the wait
// ends otherwise, the Result says which objects were not Current, and the
// error is a *NotReadyError (timeout or failure), the context's error
// (canceled), or an error from the cluster. If opts.Events is not nil, Wait
// sends progress on it and closes it before returning.
type Waiter interface {
	Wait(ctx context.Context, objs []*unstructured.Unstructured, opts Options) (Result, error)
}

// Options tune a wait.
type Options struct {
	// Timeout bounds the wait; 0 leaves only ctx to bound it.
	Timeout time.Duration
	// Namespace is given to namespaced objects that have none (the release
	// namespace).
	Namespace string
	// Events, when not nil, receives progress: one Event whenever an
	// object's status or message changes. Wait closes it before returning.
	// Sends block until received or until the wait ends, so the receiver
	// should keep reading until the channel is closed.
	Events chan<- rollout.Event
	// Canary, when set, makes a RolloutWatcher's wait one phase of a
	// canary rollout, ending at its goal (see CanaryGoal); other Waiters
	// ignore it.
	Canary *CanaryGoal
	// Values is the values mapping of the chart whose objects are waited
	// for: the failure hints name its values paths (nil: the watcher's
	// RolloutOptions.Values).
	Values vllm.ValuesMap
}

// Outcome is how a wait ended.
type Outcome string

// The outcomes of a wait.
const (
	// OutcomeCurrent: every object became Current.
	OutcomeCurrent Outcome = "Current"
	// OutcomeFailed: an object's status became Failed.
	OutcomeFailed Outcome = "Failed"
	// OutcomeTimeout: the timeout (or ctx's deadline) passed first.
	OutcomeTimeout Outcome = "Timeout"
	// OutcomeCanceled: ctx was canceled.
	OutcomeCanceled Outcome = "Canceled"
	// OutcomeError: watching failed (e.g. the cluster refused).
	OutcomeError Outcome = "Error"
)

// Result is the outcome of a wait.
type Result struct {
	Outcome Outcome `json:"outcome"`
	// Objects holds the last known status of every object, in the order
	// given (duplicates removed).
	Objects []rollout.ObjectStatus `json:"objects"`
	// Elapsed is how long the wait took.
	Elapsed time.Duration `json:"elapsed"`
	// Diagnosis, set by a RolloutWatcher when the wait failed or timed out,
	// explains why.
	Diagnosis *rollout.Diagnosis `json:"diagnosis,omitempty"`
	// CanaryPods are the Ready canary pods when the wait was a canary
	// phase (Options.Canary), by name.
	CanaryPods []string `json:"canaryPods,omitempty"`
}

// NotCurrent returns the objects whose last status is not Current.
func (r Result) NotCurrent() []rollout.ObjectStatus {
	var out []rollout.ObjectStatus
	for _, s := range r.Objects {
		if s.Status != rollout.StatusCurrent {
			out = append(out, s)
		}
	}
	return out
}

// Failed returns the objects whose last status is Failed.
func (r Result) Failed() []rollout.ObjectStatus {
	var out []rollout.ObjectStatus
	for _, s := range r.Objects {
		if s.Status == rollout.StatusFailed {
			out = append(out, s)
		}
	}
	return out
}

// Errors matched (errors.Is) by a *NotReadyError.
var (
	// ErrTimeout: the wait timed out before every object was Current.
	ErrTimeout = errors.New("timed out waiting for objects to become Current")
	// ErrFailed: an object failed.
	ErrFailed = errors.New("object failed")
)

// NotReadyError reports a wait that ended with objects not Current, by
// timeout or by failure.
type NotReadyError struct {
	Outcome Outcome
	// Timeout is the timeout that passed (0 when ctx's deadline did).
	Timeout time.Duration
	// Objects are the objects that were not Current: for a failure, the
	// failed ones first.
	Objects []rollout.ObjectStatus
}

func (e *NotReadyError) Error() string {
	var b strings.Builder
	switch e.Outcome {
	case OutcomeFailed:
		fmt.Fprintf(&b, "%d object(s) failed", countStatus(e.Objects, rollout.StatusFailed))
	default:
		b.WriteString("timed out")
		if e.Timeout > 0 {
			fmt.Fprintf(&b, " after %s", e.Timeout)
		}
		fmt.Fprintf(&b, " with %d object(s) not Current", len(e.Objects))
	}
	for i, s := range e.Objects {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// Is matches ErrTimeout or ErrFailed, by outcome.
func (e *NotReadyError) Is(target error) bool {
	switch e.Outcome {
	case OutcomeFailed:
		return target == ErrFailed
	case OutcomeTimeout:
		return target == ErrTimeout
	}
	return false
}

func countStatus(objs []rollout.ObjectStatus, s rollout.Status) int {
	n := 0
	for _, o := range objs {
		if o.Status == s {
			n++
		}
	}
	return n
}

// RolloutFailedError is the error of a rollout wait that failed or timed
// out with a diagnosis. It wraps the *NotReadyError of the wait, so
// errors.Is(err, ErrFailed) and errors.Is(err, ErrTimeout) keep working.
type RolloutFailedError struct {
	// Diagnosis explains the failure.
	Diagnosis *rollout.Diagnosis
	// NotReady is the wait's NotReadyError.
	NotReady *NotReadyError
}

func (e *RolloutFailedError) Error() string {
	object := e.Diagnosis.Object
	if object == "" {
		object = "the release"
	}
	if e.NotReady != nil && e.NotReady.Outcome == OutcomeTimeout {
		if e.NotReady.Timeout > 0 {
			return fmt.Sprintf("rollout of %s timed out after %s: %s", object, e.NotReady.Timeout, e.Diagnosis.Summary())
		}
		return fmt.Sprintf("rollout of %s timed out: %s", object, e.Diagnosis.Summary())
	}
	return fmt.Sprintf("rollout of %s failed: %s", object, e.Diagnosis.Summary())
}

// Unwrap returns the NotReadyError.
func (e *RolloutFailedError) Unwrap() error {
	if e.NotReady == nil {
		return nil
	}
	return e.NotReady
}
