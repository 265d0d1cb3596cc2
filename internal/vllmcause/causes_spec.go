// What the cause classifier reads from the pod spec: the vLLM server's
// arguments, GPUs, Hugging Face token, /dev/shm and startup probe, so that
// hints quote the values the pod runs with.

package vllmcause

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

// Probe defaults of the Kubernetes API (a field left at zero).
const (
	defaultProbePeriod    = 10 * time.Second
	defaultProbeThreshold = 3
)

// hfTokenEnv are the environment variables Hugging Face libraries read a
// token from.
func hfTokenEnv() []string {
	return []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACEHUB_API_TOKEN"}
}

// serverSpec is the container the classifier diagnoses, as its pod spec
// defines it.
type serverSpec struct {
	name  string
	image string
	// flags are the vLLM flags of command and args, by name without
	// dashes, "-" for "_" ("gpu-memory-utilization" → "0.95"); a flag
	// without a value maps to "".
	flags map[string]string
	// model is --model, or the positional argument of `vllm serve`.
	model string
	// gpus is the nvidia.com/gpu limit (else request); gpuSet says one is
	// set to a non-zero value.
	gpus   int64
	gpuSet bool
	// memoryLimit is the container's memory limit ("" when none).
	memoryLimit string
	// token says where a Hugging Face token comes from: "" (none),
	// "secret NAME key KEY" or "literal"; tokenEnv names its variable.
	token    string
	tokenEnv string
	// offline: HF_HUB_OFFLINE is set to a true value.
	offline bool
	// shm describes /dev/shm: shmMount names the mounted volume ("" when
	// nothing is mounted there), shmMemory says it is an emptyDir with
	// medium Memory, shmSize its sizeLimit ("" when unlimited).
	shmMount  string
	shmMemory bool
	shmSize   string
	// startup is the startup probe (nil when none); readinessDelay the
	// readiness probe's initialDelaySeconds.
	startup        *corev1.Probe
	readinessDelay time.Duration
	// values is the chart's values mapping (nil: the hints name flags and
	// the pod's values only; see causes_values.go).
	values vllm.ValuesMap
}

// newServerSpec reads container name of pod (nil when pod or the
// container is unknown).
func newServerSpec(pod *corev1.Pod, name string) *serverSpec {
	if pod == nil {
		return nil
	}
	var c *corev1.Container
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				c = &list[i]
			}
		}
	}
	if c == nil {
		return nil
	}
	s := &serverSpec{name: c.Name, image: c.Image, flags: map[string]string{}}
	s.parseCommand(vllm.ContainerCommand(c))
	s.gpus, s.gpuSet = containerGPUCount(c)
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		s.memoryLimit = q.String()
	}
	for _, e := range c.Env {
		switch {
		case e.Name == "HF_HUB_OFFLINE":
			s.offline = e.Value == "1" || strings.EqualFold(e.Value, "true")
		case s.token == "" && slices.Contains(hfTokenEnv(), e.Name):
			s.tokenEnv = e.Name
			switch {
			case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
				s.token = fmt.Sprintf("secret %s key %s", e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)
			case e.Value != "":
				s.token = "literal"
			}
		}
	}
	s.readShm(pod, c)
	s.startup = c.StartupProbe
	if c.ReadinessProbe != nil {
		s.readinessDelay = time.Duration(c.ReadinessProbe.InitialDelaySeconds) * time.Second
	}
	return s
}

// parseCommand records the flags and the model of the container's vLLM
// command line ($(VAR) expanded, `sh -c` scripts split).
func (s *serverSpec) parseCommand(cmd vllm.Command) {
	for k, v := range cmd.Flags {
		s.flags[k] = v
	}
	s.model = cmd.Model
}

// readShm finds what container c mounts at /dev/shm.
func (s *serverSpec) readShm(pod *corev1.Pod, c *corev1.Container) {
	for _, m := range c.VolumeMounts {
		if strings.TrimRight(m.MountPath, "/") == "/dev/shm" {
			s.shmMount = m.Name
		}
	}
	if s.shmMount == "" {
		return
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name != s.shmMount || v.EmptyDir == nil {
			continue
		}
		s.shmMemory = v.EmptyDir.Medium == corev1.StorageMediumMemory
		if v.EmptyDir.SizeLimit != nil {
			s.shmSize = v.EmptyDir.SizeLimit.String()
		}
	}
}

// containerGPUCount returns the container's GPU limit (else request) and
// whether a non-zero one is set.
func containerGPUCount(c *corev1.Container) (int64, bool) {
	for _, list := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
		if q, ok := list[vllm.GPUResource]; ok && !q.IsZero() {
			return q.Value(), true
		}
	}
	return 0, false
}

// flagInt returns the integer value of a flag, def when unset or not an
// integer.
func (s *serverSpec) flagInt(name string, def int64) int64 {
	if v, err := strconv.ParseInt(s.flags[name], 10, 64); err == nil {
		return v
	}
	return def
}

// tensorParallel is --tensor-parallel-size (default 1).
func (s *serverSpec) tensorParallel() int64 { return s.flagInt("tensor-parallel-size", 1) }

// pipelineParallel is --pipeline-parallel-size (default 1).
func (s *serverSpec) pipelineParallel() int64 { return s.flagInt("pipeline-parallel-size", 1) }

// now quotes a flag's value for a hint: "now 0.95", or the fallback when
// the flag is unset.
func (s *serverSpec) now(flag, unset string) string {
	if v, ok := s.flags[flag]; ok && v != "" {
		return "now " + v
	}
	return unset
}

// gpuNow quotes the GPU count for a hint.
func (s *serverSpec) gpuNow() string {
	if !s.gpuSet {
		return "none requested now"
	}
	return fmt.Sprintf("now %d", s.gpus)
}

// startupBudget is how long the kubelet lets a container start before its
// startup probe kills it: initialDelaySeconds + failureThreshold ×
// periodSeconds (with the API's defaults).
func startupBudget(p *corev1.Probe) time.Duration {
	if p == nil {
		return 0
	}
	period := time.Duration(p.PeriodSeconds) * time.Second
	if period <= 0 {
		period = defaultProbePeriod
	}
	threshold := int64(p.FailureThreshold)
	if threshold <= 0 {
		threshold = defaultProbeThreshold
	}
	return time.Duration(p.InitialDelaySeconds)*time.Second + time.Duration(threshold)*period
}

// describeStartupBudget explains a startup probe's budget: "30m0s
// (failureThreshold 180 × periodSeconds 10 + initialDelaySeconds 0)".
func describeStartupBudget(p *corev1.Probe) string {
	period := p.PeriodSeconds
	if period <= 0 {
		period = int32(defaultProbePeriod / time.Second)
	}
	threshold := p.FailureThreshold
	if threshold <= 0 {
		threshold = defaultProbeThreshold
	}
	return fmt.Sprintf("%s (failureThreshold %d × periodSeconds %d + initialDelaySeconds %d)",
		startupBudget(p), threshold, period, p.InitialDelaySeconds)
}

// probeTarget describes what a probe checks: "GET :8000/health".
func probeTarget(p *corev1.Probe) string {
	switch {
	case p == nil:
		return ""
	case p.HTTPGet != nil:
		return fmt.Sprintf("GET :%s%s", p.HTTPGet.Port.String(), p.HTTPGet.Path)
	case p.TCPSocket != nil:
		return "TCP :" + p.TCPSocket.Port.String()
	case p.Exec != nil:
		return "exec " + strings.Join(p.Exec.Command, " ")
	case p.GRPC != nil:
		return fmt.Sprintf("gRPC :%d", p.GRPC.Port)
	}
	return ""
}
