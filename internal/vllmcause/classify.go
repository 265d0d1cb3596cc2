// What the rollout watcher asks of the classifier: an Input gathered from
// a failing container (PodInput, LogInput), a Classifier that names its
// Cause, the evidence and the hints, and whether that cause is Decisive.

package vllmcause

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

// Input is what the classifier reads about one failing container: its
// log tails, its last termination, the pod's events and its spec.
type Input struct {
	in causeInput
}

// PodInput gathers the input for container of pod: its last termination,
// the pod's events (formatted "Type Reason: message", oldest first) and
// its spec. The logs are added with AddLog.
func PodInput(pod *corev1.Pod, container string, events []string) *Input {
	return &Input{in: podCauseInput(pod, container, events)}
}

// SetValues sets the values mapping of the chart that rendered the pod
// (nil: none known), so that the hints name its values paths.
func (i *Input) SetValues(values vllm.ValuesMap) {
	if i.in.spec != nil {
		i.in.spec.values = values
	}
}

// LogInput is the input of log lines alone, with the termination they
// ended with (t may be nil): a log read from a file, or the log of one
// terminated instance.
func LogInput(lines []string, t *corev1.ContainerStateTerminated) *Input {
	return &Input{in: causeInput{logs: [][]string{lines}, term: t}}
}

// AddLog adds a log tail (oldest line first); the first added is the most
// telling (the previous instance's, then the current one's).
func (i *Input) AddLog(lines []string) {
	i.in.logs = append(i.in.logs, lines)
}

// Line is the input of one log line with i's spec: it gives the hints of
// the cause that line names, for the container i describes.
func (i *Input) Line(line string) *Input {
	return &Input{in: causeInput{logs: [][]string{{line}}, spec: i.in.spec}}
}

// Classifier names the cause of an Input. Its patterns are compiled once;
// it is not safe for concurrent use.
type Classifier struct {
	c *classifier
}

// NewClassifier returns a Classifier with every rule of the table.
func NewClassifier() *Classifier {
	return &Classifier{c: newClassifier()}
}

// Classify returns the cause of in, its evidence and the hints (none for
// CauseUnknown).
func (c *Classifier) Classify(in *Input) (Cause, string, []string) {
	return c.c.classify(in.in)
}

// Decisive reports whether c fails a rollout at the first termination
// whose log names it: gpu-oom, kv-cache, model-auth, model-not-found,
// dtype-unsupported, tensor-parallel, gpu-not-visible and cuda-driver,
// which a restart does not cure. shm, nccl, startup-probe and unknown
// can be transient: they wait for the watcher's MaxRestarts.
func (c Cause) Decisive() bool {
	switch c {
	case CauseGPUOOM, CauseKVCache, CauseModelAuth, CauseModelNotFound,
		CauseDtypeUnsupported, CauseTensorParallel, CauseGPUNotVisible, CauseCUDADriver:
		return true
	}
	return false
}

// TerminationMessage describes a termination: "OOMKilled, exit code 137".
func TerminationMessage(t *corev1.ContainerStateTerminated) string {
	s := fmt.Sprintf("%s, exit code %d", t.Reason, t.ExitCode)
	if t.Reason == "" {
		s = fmt.Sprintf("exit code %d", t.ExitCode)
	}
	if t.Signal != 0 {
		s += fmt.Sprintf(", signal %d", t.Signal)
	}
	if m := strings.TrimSpace(t.Message); m != "" {
		s += ": " + m
	}
	return s
}

// StartupBudget is how long the kubelet lets a container start before its
// startup probe kills it: initialDelaySeconds + failureThreshold ×
// periodSeconds (with the API's defaults); 0 when p is nil.
func StartupBudget(p *corev1.Probe) time.Duration { return startupBudget(p) }

// DescribeStartupBudget explains a startup probe's budget: "30m0s
// (failureThreshold 180 × periodSeconds 10 + initialDelaySeconds 0)".
func DescribeStartupBudget(p *corev1.Probe) string { return describeStartupBudget(p) }
