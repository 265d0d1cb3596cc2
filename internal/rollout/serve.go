// The serve check's report: a Ready pod must also serve (the check itself
// is the watcher's, wait.CheckServing).

package rollout

// The outcomes of a serve check, of the whole and of each pod.
const (
	ServePassed  = "passed"
	ServeFailed  = "failed"
	ServeSkipped = "skipped"
)

// ServePod is the serve check of one pod.
type ServePod struct {
	Pod string `json:"pod"`
	// Model is the model checked (the one listed, when the spec named
	// none).
	Model string `json:"model,omitempty"`
	// Status is the HTTP status of the last answer (0: none).
	Status int `json:"status"`
	// LatencyMs is how long the completion took (or the request that
	// failed the check).
	LatencyMs int64 `json:"latencyMs"`
	// Outcome is passed or failed.
	Outcome string `json:"outcome"`
	// Message says why the pod failed the check.
	Message string `json:"message,omitempty"`
	// Body is a sanitised excerpt of the answer that failed the check.
	Body string `json:"body,omitempty"`
}

// ServeReport is a serve check of a revision's pods, as the release
// record and the result document keep it.
type ServeReport struct {
	// Outcome is passed, failed or skipped.
	Outcome string `json:"outcome"`
	// Reason says why the check was skipped (or failed before any pod).
	Reason string `json:"reason,omitempty"`
	// Model is the model asked for ("" when any listed model).
	Model string `json:"model,omitempty"`
	// Timeout is the check's timeout per pod.
	Timeout string     `json:"timeout,omitempty"`
	Pods    []ServePod `json:"pods"`
}

// Failed returns the first pod that failed the check, or nil.
func (r *ServeReport) Failed() *ServePod {
	if r == nil {
		return nil
	}
	for i := range r.Pods {
		if r.Pods[i].Outcome == ServeFailed {
			return &r.Pods[i]
		}
	}
	return nil
}
