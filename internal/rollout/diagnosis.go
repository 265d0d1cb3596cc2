// Diagnosis: why a rollout failed, as the user and the release record see
// it.

package rollout

import (
	"fmt"
	"strings"

	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// Diagnosis explains why a rollout failed: the reason, the cause in
// vLLM's terms (see package vllmcause) and its evidence, the object, pod and
// container concerned, what the cluster said, and hints. It is vllmctl's
// one failure type: the watcher returns it, the release record stores it
// as its failure (docs/release-record.md) and the result of deploy,
// rollback and wait reports it. The JSON fields keep the record's order.
type Diagnosis struct {
	// Reason is Kubernetes' reason: the container's waiting or terminated
	// reason (CrashLoopBackOff, OOMKilled, ErrImagePull, ...), the
	// condition's reason (Unschedulable, ProgressDeadlineExceeded), the
	// event's reason (FailedCreate), or Timeout; or vllmctl's own when no
	// rollout was watched (ApplyFailed, CanaryGateFailed, ...).
	Reason string `json:"reason"`
	// Cause is why the server failed in vLLM's terms (gpu-oom, kv-cache,
	// ...; unknown when no rule of the classifier matched), and Evidence
	// the log line or event that decided it.
	Cause    vllmcause.Cause `json:"cause,omitempty"`
	Evidence string          `json:"evidence,omitempty"`
	// Object is the object that failed, as kind/name: "deployment/chat".
	Object string `json:"object,omitempty"`
	// Namespace is the object's namespace.
	Namespace string `json:"namespace,omitempty"`
	// Pod and Container name the pod of the new ReplicaSet concerned and
	// its container.
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
	// ExitCode and RestartCount are the container's last exit code and its
	// restart count.
	ExitCode     int32 `json:"exitCode,omitempty"`
	RestartCount int32 `json:"restartCount,omitempty"`
	// Message says what happened, in the cluster's words where it has any
	// (the scheduler's, the kubelet's, the controller's).
	Message string `json:"message,omitempty"`
	// Events are the pod's (or the ReplicaSet's) most recent events, oldest
	// first, as "Warning BackOff: Back-off restarting failed container".
	Events []string `json:"events,omitempty"`
	// LogTail holds the last lines of the log of the container's previous
	// instance (kubectl logs --previous).
	LogTail []string `json:"logTail,omitempty"`
	// Verdict is the watcher's verdict (or vllmctl's, as
	// CanaryNotPromoted); Node the node the pod runs on (empty when
	// unscheduled).
	Verdict Verdict `json:"verdict,omitempty"`
	Node    string  `json:"node,omitempty"`
	// LogNote says why LogTail is empty, or where it comes from when not
	// from the previous instance.
	LogNote string `json:"logNote,omitempty"`
	// Hints suggest what to check: for a known cause, the settings to
	// change.
	Hints []string `json:"hints,omitempty"`
}

// Summary is a one-line account: "OOMKilled: pod chat-7d9f-x (node
// gpu-node-1) container vllm, exit code 137, 1 restart: OOMKilled, exit code
// 137"; a known cause follows the reason: "CrashLoopBackOff (cause
// gpu-oom): pod ...".
func (d *Diagnosis) Summary() string {
	if d == nil {
		return ""
	}
	var where []string
	if d.Pod != "" {
		p := "pod " + d.Pod
		if d.Node != "" {
			p += " (node " + d.Node + ")"
		}
		where = append(where, p)
	}
	if d.Container != "" {
		where = append(where, "container "+d.Container)
	}
	if d.ExitCode != 0 {
		where = append(where, fmt.Sprintf("exit code %d", d.ExitCode))
	}
	if d.RestartCount == 1 {
		where = append(where, "1 restart")
	} else if d.RestartCount > 1 {
		where = append(where, fmt.Sprintf("%d restarts", d.RestartCount))
	}
	s := d.Reason
	if s == "" {
		s = string(d.Verdict)
	}
	if d.Cause != "" && d.Cause != vllmcause.CauseUnknown {
		s += " (cause " + string(d.Cause) + ")"
	}
	if len(where) > 0 {
		s += ": " + strings.Join(where, ", ")
	}
	if d.Message != "" {
		s += ": " + d.Message
	}
	return s
}
