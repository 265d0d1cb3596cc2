// The progress of a wait: the events it sends and the statuses they
// carry.

package rollout

import (
	"fmt"
	"time"

	"github.com/vllmctl/vllmctl/internal/object"
)

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
