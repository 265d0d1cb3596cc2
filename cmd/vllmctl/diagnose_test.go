package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// causeFixture is a real vLLM log of the cause classifier's fixtures
// (internal/vllmcause/testdata/causes).
func causeFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "internal", "vllmcause", "testdata", "causes", name))
	require.NoError(t, err)
	return data
}

// runDiagnose runs `vllmctl diagnose args...` on client (namespace ml
// from the kubeconfig), stdin reading in.
func runDiagnose(t *testing.T, client kubernetes.Interface, in string, args ...string) (string, string, int) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: test
  user: {token: test}
contexts:
- name: test
  context: {cluster: test, user: test, namespace: ml}
current-context: test
`), 0o600))
	var stdout, stderr bytes.Buffer
	g := newGlobalOptions(genericclioptions.NewConfigFlags(true),
		genericiooptions.IOStreams{In: strings.NewReader(in), Out: &stdout, ErrOut: &stderr})
	g.Factory = fakeFactory{client: client}
	root := &cobra.Command{Use: "vllmctl", SilenceUsage: true, SilenceErrors: true}
	root.SetOut(g.Streams.Out)
	root.SetErr(g.Streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	g.ConfigFlags.AddFlags(root.PersistentFlags())
	sub := newDiagnoseCommand(g)
	wrapArgs(sub)
	root.AddCommand(sub)
	root.SetArgs(append(append([]string{"diagnose"}, args...), "--kubeconfig", kubeconfig))
	err := root.ExecuteContext(context.Background())
	code := ExitCode(g.Streams.ErrOut, err)
	require.NoError(t, FlushStreams(root))
	return stdout.String(), stderr.String(), code
}

// diagnoseCluster holds pod chat-0 in namespace ml, crash-looping
// (container server) with log as the log of each instance.
func diagnoseCluster(log []byte) *fake.Clientset {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "chat-0", Namespace: "ml", UID: "u1"},
		Spec: corev1.PodSpec{NodeName: "gpu-1", Containers: []corev1.Container{
			{Name: "server", Image: "vllm/vllm-openai:v0.11.0", Args: []string{"--model", "Qwen/Qwen3-0.6B", "--gpu-memory-utilization", "0.93"}},
			{Name: "proxy", Image: "envoy"},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "server", RestartCount: 3,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}},
			{Name: "proxy", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}},
	}
	c := fake.NewClientset(pod)
	c.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "log" {
			return false, nil, nil
		}
		return true, &runtime.Unknown{Raw: log}, nil
	})
	return c
}

func TestDiagnoseLogCommand(t *testing.T) {
	oom := causeFixture(t, "gpu-oom-weights.log")
	path := filepath.Join(t.TempDir(), "vllm.log")
	require.NoError(t, os.WriteFile(path, oom, 0o600))

	stdout, stderr, code := runDiagnose(t, nil, "", "--log", path)
	require.Equal(t, ExitOK, code, "stderr: %s", stderr)
	assert.True(t, strings.HasPrefix(stdout, "diagnosis\n"), stdout)
	assert.Contains(t, stdout, "  cause:     gpu-oom\n")
	assert.Contains(t, stdout, "CUDA out of memory")
	assert.Contains(t, stdout, "  hints:\n    - ")
	assert.Empty(t, stderr)

	stdout, stderr, code = runDiagnose(t, nil, "", "--log", path, "-o", "json")
	require.Equal(t, ExitOK, code, "stderr: %s", stderr)
	requireValid(t, "diagnose", stdout)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
	assert.Equal(t, "gpu-oom", doc["cause"])
	assert.Equal(t, "", doc["reason"])
	assert.NotContains(t, doc, "pod")

	stdout, stderr, code = runDiagnose(t, nil, string(oom), "--log", "-", "-o", "yaml")
	require.Equal(t, ExitOK, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "cause: gpu-oom\n")

	stdout, stderr, code = runDiagnose(t, nil, string(causeFixture(t, "unknown-keyerror.log")), "--log", "-", "-o", "json")
	assert.Equal(t, 1, code)
	requireValid(t, "diagnose", stdout)
	assert.Contains(t, stdout, `"cause": "unknown"`)
	assert.Contains(t, stderr, "no known cause was found")
}

func TestDiagnosePodCommand(t *testing.T) {
	c := diagnoseCluster(causeFixture(t, "gpu-oom-weights.log"))
	stdout, stderr, code := runDiagnose(t, c, "", "chat-0")
	require.Equal(t, ExitOK, code, "stderr: %s", stderr)
	assert.True(t, strings.HasPrefix(stdout, "diagnosis: CrashLoopBackOff\n"), stdout)
	assert.Contains(t, stdout, "  pod:       chat-0 (node gpu-1)\n")
	assert.Contains(t, stdout, "  container: server (exit code 1, 3 restarts)\n")
	assert.Contains(t, stdout, "  cause:     gpu-oom\n")
	assert.Contains(t, stdout, "now 0.93", "the hints quote the pod's own flag")

	stdout, stderr, code = runDiagnose(t, c, "", "chat-0", "-n", "ml", "-o", "json")
	require.Equal(t, ExitOK, code, "stderr: %s", stderr)
	requireValid(t, "diagnose", stdout)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
	assert.Equal(t, "gpu-oom", doc["cause"])
	assert.Equal(t, "chat-0", doc["pod"])
	assert.Equal(t, "ml", doc["namespace"])
	assert.Equal(t, "server", doc["container"])

	unknown := diagnoseCluster(causeFixture(t, "unknown-keyerror.log"))
	stdout, stderr, code = runDiagnose(t, unknown, "", "chat-0", "-o", "json")
	assert.Equal(t, 1, code)
	requireValid(t, "diagnose", stdout)
	assert.Contains(t, stdout, `"cause": "unknown"`)
	assert.Contains(t, stderr, "no known cause was found")
}

func TestDiagnoseCommandInvalid(t *testing.T) {
	c := diagnoseCluster(causeFixture(t, "gpu-oom-weights.log"))
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"neither pod nor log", nil, "give the POD to diagnose, or --log"},
		{"both pod and log", []string{"chat-0", "--log", "-"}, "not both"},
		{"two pods", []string{"a", "b"}, "accepts at most 1 arg"},
		{"empty --log", []string{"--log", ""}, "--log needs a file name"},
		{"-c with --log", []string{"--log", "-", "-c", "server"}, "not with --log"},
		{"bad output", []string{"chat-0", "-o", "xml"}, "xml"},
		{"unknown flag", []string{"chat-0", "--bogus"}, "unknown flag"},
		{"missing log file", []string{"--log", filepath.Join(t.TempDir(), "nope.log")}, "no such file"},
		{"a directory as --log", []string{"--log", t.TempDir()}, "is a directory, not a log file"},
		{"unknown pod", []string{"ghost"}, `pod "ghost" not found in namespace "ml"`},
		{"unknown container", []string{"chat-0", "-c", "nope"}, `pod chat-0 has no container "nope"; its containers: server, proxy`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runDiagnose(t, c, "", tc.args...)
			assert.Equal(t, ExitInvalid, code, "stderr: %s", stderr)
			assert.Contains(t, stderr, tc.stderr)
			assert.Empty(t, stdout)
		})
	}
}
