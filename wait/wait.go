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

	"github.com/vllmctl/vllmctl/internal/object"
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
	Events chan<- Event
	// Canary, when set, makes a RolloutWatcher's wait one phase of a
	// canary rollout, ending at its goal (see CanaryGoal); other Waiters
	// ignore it.
	Canary *CanaryGoal
	// Values is the values mapping of the chart whose objects are waited
	// for: the failure hints name its values paths (nil: the watcher's
	// RolloutOptions.Values).
	Values vllm.ValuesMap
}

// Status is the computed status of an object, as kstatus defines it.
type Status string

// The statuses an object can have.
const (
	// StatusInProgress: the object is being reconciled.
	StatusInProgress Status = "InProgress"
	// StatusCurrent: the object is reconciled and ready.
	StatusCurrent Status = "Current"
	// StatusFailed: reconciling the object failed.
	StatusFailed Status = "Failed"
	// StatusTerminating: the object is being deleted.
	StatusTerminating Status = "Terminating"
	// StatusNotFound: the object does not exist.
	StatusNotFound Status = "NotFound"
	// StatusUnknown: no status is known yet.
	StatusUnknown Status = "Unknown"
)

// Event is one change of an object's status during a wait.
type Event struct {
	Time    time.Time  `json:"time"`
	Object  object.Ref `json:"object"`
	Status  Status     `json:"status"`
	Message string     `json:"message,omitempty"`
	// Rollout, set by a RolloutWatcher for Deployments, details the
	// rollout's progress.
	Rollout *RolloutProgress `json:"rollout,omitempty"`
}

// ObjectStatus is the last known status of an object.
type ObjectStatus struct {
	Object  object.Ref `json:"object"`
	Status  Status     `json:"status"`
	Message string     `json:"message,omitempty"`
}

// String formats the status as "apps/v1 Deployment ns/web: InProgress: msg".
func (s ObjectStatus) String() string {
	if s.Message == "" {
		return fmt.Sprintf("%s: %s", s.Object, s.Status)
	}
	return fmt.Sprintf("%s: %s: %s", s.Object, s.Status, s.Message)
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
	Objects []ObjectStatus `json:"objects"`
	// Elapsed is how long the wait took.
	Elapsed time.Duration `json:"elapsed"`
	// Diagnosis, set by a RolloutWatcher when the wait failed or timed out,
	// explains why.
	Diagnosis *Diagnosis `json:"diagnosis,omitempty"`
	// CanaryPods are the Ready canary pods when the wait was a canary
	// phase (Options.Canary), by name.
	CanaryPods []string `json:"canaryPods,omitempty"`
}

// NotCurrent returns the objects whose last status is not Current.
func (r Result) NotCurrent() []ObjectStatus {
	var out []ObjectStatus
	for _, s := range r.Objects {
		if s.Status != StatusCurrent {
			out = append(out, s)
		}
	}
	return out
}

// Failed returns the objects whose last status is Failed.
func (r Result) Failed() []ObjectStatus {
	var out []ObjectStatus
	for _, s := range r.Objects {
		if s.Status == StatusFailed {
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
	Objects []ObjectStatus
}

func (e *NotReadyError) Error() string {
	var b strings.Builder
	switch e.Outcome {
	case OutcomeFailed:
		fmt.Fprintf(&b, "%d object(s) failed", countStatus(e.Objects, StatusFailed))
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

func countStatus(objs []ObjectStatus, s Status) int {
	n := 0
	for _, o := range objs {
		if o.Status == s {
			n++
		}
	}
	return n
}
