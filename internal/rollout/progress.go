// RolloutProgress, the rollout state the rollout watcher's events carry,
// with the phases of the new pods.

package rollout

import (
	"strings"
	"time"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// RolloutProgress is where a Deployment's or StatefulSet's rollout stands,
// as a
// rollout watcher (wait.RolloutWatcher) reports it in [Event.Rollout].
type RolloutProgress struct {
	// Deployment is the Deployment's name; empty for a StatefulSet.
	Deployment string `json:"deployment"`
	// StatefulSet is the StatefulSet's name; empty for a Deployment.
	StatefulSet string `json:"statefulSet,omitempty"`
	// LeaderWorkerSet is the LeaderWorkerSet's name (its Desired, Updated
	// and Ready count groups; Available is Ready).
	LeaderWorkerSet string `json:"leaderWorkerSet,omitempty"`
	// UpdateRevision and CurrentRevision are a StatefulSet's
	// status.updateRevision (the revision its pods are updated to, whose
	// pods the verdicts judge) and status.currentRevision; of a
	// LeaderWorkerSet, UpdateRevision is its current template revision
	// (label leaderworkerset.sigs.k8s.io/template-revision-hash).
	UpdateRevision  string `json:"updateRevision,omitempty"`
	CurrentRevision string `json:"currentRevision,omitempty"`
	// NewReplicaSet is the ReplicaSet carrying the Deployment's current pod
	// template (empty until the controller has created it), and
	// PodTemplateHash its pod-template-hash.
	NewReplicaSet   string `json:"newReplicaSet,omitempty"`
	PodTemplateHash string `json:"podTemplateHash,omitempty"`
	// Revision is the new ReplicaSet's Deployment revision.
	Revision string `json:"revision,omitempty"`
	// OldReplicaSets are the Deployment's other ReplicaSets that still have
	// pods.
	OldReplicaSets []string `json:"oldReplicaSets,omitempty"`
	// Desired, Updated, Ready and Available are the Deployment's (or
	// StatefulSet's) spec.replicas and its status' updated, ready and
	// available replicas.
	Desired   int32 `json:"desired"`
	Updated   int32 `json:"updated"`
	Ready     int32 `json:"ready"`
	Available int32 `json:"available"`
	// Verdict is the verdict so far.
	Verdict Verdict `json:"verdict"`
	// Warning, when set, is what this event reports besides the counts: a
	// problem that does not fail the rollout (yet), such as a new pod's
	// first restart, a pod waiting on an image pull, a Warning event, or a
	// failing pod of an old ReplicaSet.
	Warning string `json:"warning,omitempty"`
	// Pods are the phases of the new ReplicaSet's pods (of a StatefulSet:
	// of its update revision's pods) while the rollout progresses.
	Pods []PodPhase `json:"pods,omitempty"`
	// Cause, Evidence and Hints are set on the event of a failure verdict:
	// the diagnosis' cause, the log line or event that decided it, and
	// what to change.
	Cause    vllmcause.Cause `json:"cause,omitempty"`
	Evidence string          `json:"evidence,omitempty"`
	Hints    []string        `json:"hints,omitempty"`
}

// The phases of a new pod, in the order a pod goes through them. A pod
// whose container waits for another reason (CrashLoopBackOff,
// ErrImagePull, ...) has that reason as its phase.
const (
	PhasePending      = "Pending"      // not scheduled yet
	PhaseScheduled    = "Scheduled"    // on a node, containers not created yet
	PhasePulling      = "Pulling"      // the kubelet is pulling an image
	PhaseInitializing = "Initializing" // init containers are running
	PhaseStarting     = "Starting"     // running, not Ready yet
	PhaseLoading      = "Loading"      // running under its startup probe
	PhaseExited       = "Exited"       // a container ended, not restarted yet
	PhaseReady        = "Ready"
)

// PodPhase is where one pod of the new ReplicaSet stands.
type PodPhase struct {
	Pod   string `json:"pod"`
	Phase string `json:"phase"`
	// StartupDeadline, for a Loading pod, is when its startup probe's
	// budget runs out and the kubelet kills the container.
	StartupDeadline time.Time `json:"startupDeadline,omitzero"`
}

// ObjectName names an object as kubectl does in its output: lower-case kind
// and name, "deployment/chat" (kind.group/name outside the core and apps
// groups).
func ObjectName(r object.Ref) string {
	kind := strings.ToLower(r.Kind)
	if r.Group != "" && r.Group != "apps" {
		kind += "." + r.Group
	}
	return kind + "/" + r.Name
}
