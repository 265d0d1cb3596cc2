package vllmcausetest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/vllm"
)

// ChartPod is a pod as the built-in chart renders it: container server
// with --gpu-memory-utilization 0.9, one GPU, a memory-backed /dev/shm of
// 8Gi, the startup probe of 180 × 10s; edit changes its server container.
func ChartPod(edit func(p *corev1.Pod, c *corev1.Container)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "chat-7557874574-jtdj8", Namespace: "llm"},
		Spec: corev1.PodSpec{
			NodeName: "gpu-node-1",
			Containers: []corev1.Container{{
				Name:  "server",
				Image: "vllm/vllm-openai:v0.11.0",
				Args: []string{"--model", "Qwen/Qwen3-0.6B", "--served-model-name", "Qwen/Qwen3-0.6B", "--host", "0.0.0.0", "--port", "8000",
					"--tensor-parallel-size", "1", "--gpu-memory-utilization", "0.9"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{vllm.GPUResource: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("32Gi")},
					Limits:   corev1.ResourceList{vllm.GPUResource: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("32Gi")},
				},
				StartupProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("http")}},
					PeriodSeconds: 10, TimeoutSeconds: 5, FailureThreshold: 180,
				},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString("http")}},
					PeriodSeconds: 5,
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "model-cache", MountPath: "/models"}, {Name: "dshm", MountPath: "/dev/shm"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "model-cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("8Gi"))}}},
			},
		},
	}
	if edit != nil {
		edit(p, &p.Spec.Containers[0])
	}
	return p
}

// SetArg sets (or adds) a flag of c's args.
func SetArg(c *corev1.Container, name, value string) {
	for i := 0; i+1 < len(c.Args); i++ {
		if c.Args[i] == name {
			c.Args[i+1] = value
			return
		}
	}
	c.Args = append(c.Args, name, value)
}

// Fixture returns the lines of the log fixture name of
// internal/vllmcause/testdata/causes (README.md there says where each
// comes from), as Lines splits them.
func Fixture(t *testing.T, name string) []string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	require.True(t, ok, "the fixtures' directory")
	data, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "testdata", "causes", name))
	require.NoError(t, err)
	return Lines(data)
}

// Lines splits a log into its non-empty lines (a trailing "\r" cut), as
// the watcher reads a log tail.
func Lines(data []byte) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l := strings.TrimRight(sc.Text(), "\r"); strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// BuiltinValues is the built-in chart's values mapping, as its Chart.yaml
// declares it.
func BuiltinValues(t *testing.T) vllm.ValuesMap {
	t.Helper()
	m := charts.BuiltinValuesMap("vllm")
	require.NotEmpty(t, m)
	return m
}
