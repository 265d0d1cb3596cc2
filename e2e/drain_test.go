//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The built-in chart's drain (docs/deploying.md, "Drain"): a preStop hook
// on the server container and a termination grace period that covers it.
// The local cluster runs no hook and deletes pods at once
// (docs/local-cluster.md, "Drain: what the local cluster does not
// simulate"): what is checked here is that a rollout with drain enabled
// completes and that the pods the cluster runs carry the hook and the
// grace period as rendered.

// drainValues run the built-in chart without GPUs and with tiny requests,
// leaving drain and terminationGracePeriodSeconds at the chart's defaults.
var drainValues = []string{"--set", "resources.gpu=0,resources.requests.cpu=10m,resources.requests.memory=16Mi," +
	"resources.limits.cpu=10m,resources.limits.memory=16Mi,shm.enabled=false"}

func (f *relFixture) deployDrain(t *testing.T, args ...string) relRun {
	t.Helper()
	return f.run(t, append(append([]string{"deploy", relName, "vllm", "--progress", "plain", "--timeout", "2m"}, drainValues...), args...)...)
}

// releasePods returns the release's pods, those being deleted left out.
func (f *relFixture) releasePods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := f.client.CoreV1().Pods(f.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: releaseSelector})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Labels["app.kubernetes.io/component"] == "inference" {
			out = append(out, p)
		}
	}
	return out
}

// assertDrainHook checks a pod's server container carries the chart's
// drain hook with delay and seconds, and the pod the grace period.
func assertDrainHook(t *testing.T, p corev1.Pod, delay, seconds string, grace int64) {
	t.Helper()
	require.NotNil(t, p.Spec.TerminationGracePeriodSeconds, "pod %s", p.Name)
	assert.Equal(t, grace, *p.Spec.TerminationGracePeriodSeconds, "pod %s: terminationGracePeriodSeconds", p.Name)
	c := p.Spec.Containers[0]
	require.Equal(t, "server", c.Name)
	require.NotNil(t, c.Lifecycle, "pod %s: no lifecycle", p.Name)
	require.NotNil(t, c.Lifecycle.PreStop, "pod %s: no preStop", p.Name)
	require.NotNil(t, c.Lifecycle.PreStop.Exec, "pod %s: preStop is not an exec", p.Name)
	cmd := c.Lifecycle.PreStop.Exec.Command
	require.Len(t, cmd, 6, "pod %s: %q", p.Name, cmd)
	assert.Equal(t, []string{"python3", "-c"}, cmd[:2])
	assert.True(t, strings.HasPrefix(cmd[2], "# vllmctl drain hook"), "pod %s: %q", p.Name, cmd[2])
	assert.Contains(t, cmd[2], "vllm:num_requests_running")
	assert.Equal(t, []string{"127.0.0.1", delay, seconds}, cmd[3:], "pod %s: host, delaySeconds, seconds", p.Name)
}

func TestDrainRollout(t *testing.T) {
	f := newRelFixture(t)

	r := f.deployDrain(t, "-o", "json")
	require.Equal(t, 0, r.code, "revision 1\n%s", r)
	pods := f.releasePods(t)
	require.Len(t, pods, 1)
	assertDrainHook(t, pods[0], "10", "120", 180)
	old := pods[0].Name

	// An upgrade with other drain values, vLLM's own flag among them (the
	// simulated engine serves, and passes the serve check, as any other).
	r = f.deployDrain(t, "-o", "json", "--set", "drain.delaySeconds=5,drain.seconds=300,drain.engineFlag=true,"+
		"drain.engineTimeoutSeconds=60,terminationGracePeriodSeconds=400")
	require.Equal(t, 0, r.code, "revision 2\n%s", r)
	res := result(t, r)
	assert.Equal(t, 2, res.Revision)
	pods = f.releasePods(t)
	require.Len(t, pods, 1, "the old pod is gone: the local cluster deletes at once, it runs no hook")
	assert.NotEqual(t, old, pods[0].Name)
	assertDrainHook(t, pods[0], "5", "300", 400)
	args := strings.Join(pods[0].Spec.Containers[0].Args, " ")
	assert.Contains(t, args, "--shutdown-timeout 60")

	// The Deployment's template says the same as its pods.
	d := f.deployment(t)
	require.NotNil(t, d.Spec.Template.Spec.TerminationGracePeriodSeconds)
	assert.Equal(t, int64(400), *d.Spec.Template.Spec.TerminationGracePeriodSeconds)

	// Drain off: no hook, and the grace period is the value as given.
	r = f.deployDrain(t, "-o", "json", "--set", "drain.enabled=false,terminationGracePeriodSeconds=0")
	require.Equal(t, 0, r.code, "revision 3\n%s", r)
	pods = f.releasePods(t)
	require.Len(t, pods, 1)
	assert.Nil(t, pods[0].Spec.Containers[0].Lifecycle, "no hook with drain.enabled=false")
	assert.NotContains(t, strings.Join(pods[0].Spec.Containers[0].Args, " "), "--shutdown-timeout")
	require.NotNil(t, pods[0].Spec.TerminationGracePeriodSeconds)
	assert.Equal(t, int64(0), *pods[0].Spec.TerminationGracePeriodSeconds)
}

// TestDrainGroups: in a multi-node group (a StatefulSet of 2 pods) both
// pods carry the hook, the workers' pointed at their leader, and the same
// grace period; a group whose drain values change is replaced in place
// and its new pods carry the new ones.
func TestDrainGroups(t *testing.T) {
	f := newRelFixture(t)
	r := f.deployGroups(t, "--set", "replicaCount=1")
	require.Equal(t, 0, r.code, "revision 1\n%s", r)
	leader := "chat-g0-0.chat-nodes." + f.namespace + ".svc"
	check := func(seconds string, grace int64) {
		t.Helper()
		pods := f.groupPods(t, "chat-g0")
		require.Len(t, pods, 2)
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				continue
			}
			lc := p.Spec.Containers[0].Lifecycle
			require.True(t, lc != nil && lc.PreStop != nil && lc.PreStop.Exec != nil, "pod %s: no preStop exec", p.Name)
			cmd := lc.PreStop.Exec.Command
			require.Len(t, cmd, 6, "pod %s", p.Name)
			assert.Equal(t, []string{leader, "10", seconds}, cmd[3:], "pod %s: every rank gets the leader; rank 0 asks itself", p.Name)
			require.NotNil(t, p.Spec.TerminationGracePeriodSeconds)
			assert.Equal(t, grace, *p.Spec.TerminationGracePeriodSeconds, "pod %s", p.Name)
			var rank bool
			for _, e := range p.Spec.Containers[0].Env {
				rank = rank || e.Name == "VLLM_NODE_RANK"
			}
			assert.True(t, rank, "pod %s: VLLM_NODE_RANK, which the hook reads", p.Name)
		}
	}
	check("120", 180)

	r = f.deployGroups(t, "--set", "replicaCount=1", "--set", "drain.seconds=60", "--set", "terminationGracePeriodSeconds=90")
	require.Equal(t, 0, r.code, "revision 2\n%s", r)
	check("60", 90)
}
