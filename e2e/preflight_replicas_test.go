//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/release/preflight"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The capacity preflight counts the pods a replica
// increase adds, not only a changed pod template's. On the isolated pool
// (2 × 8 GPUs, these tests' alone, see surge_test.go) a release of 1 pod
// of 1 GPU leaves exactly 15 GPUs free.

// newReplicasFixture is newIsolatedFixture for this file's tests: it also
// deletes the namespaces an interrupted run of them left on the pool
// (requireIsolatedPool only knows the surge tests' ones).
func newReplicasFixture(t *testing.T) *relFixture {
	t.Helper()
	f := newRelFixture(t)
	t.Cleanup(func() { f.emptyNamespace(t) })
	ctx := context.Background()
	if list, err := f.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, "e2e-testpreflightreplicas") && ns.Name != f.namespace && ns.DeletionTimestamp == nil {
				t.Logf("deleting namespace %s, left over by an earlier run", ns.Name)
				if err := f.client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Logf("delete namespace %s: %v", ns.Name, err)
				}
			}
		}
	}
	requireIsolatedPool(t, f.env)
	return f
}

func TestPreflightReplicas(t *testing.T) {
	f := newReplicasFixture(t)
	ctx := context.Background()
	base := []string{"--set", "resources.gpu=1"}
	withReplicas := func(n string, args ...string) []string {
		return append(append(append([]string(nil), base...), "--set", "replicaCount="+n), args...)
	}

	r := f.vllm(t, withReplicas("1")...)
	require.Equal(t, 0, r.code, "the first deploy fits: %s", r)
	f.waitRolledOut(t, 1)
	before := f.deployment(t)

	// nothingApplied checks that a refused deploy left the Deployment, its
	// pods and the records as they were.
	nothingApplied := func(t *testing.T, what string, replicas int32, records int) {
		t.Helper()
		d := f.deployment(t)
		assert.Equal(t, replicas, ptr.Deref(d.Spec.Replicas, -1), "%s: the live Deployment keeps its replicas", what)
		revs := f.history(t)
		assert.Len(t, revs, records, "%s: no new record", what)
		assert.Equal(t, storage.StatusDeployed, revs[len(revs)-1].Status, what)
		pods, err := f.client.CoreV1().Pods(f.namespace).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Len(t, pods.Items, int(replicas), "%s: no pod created", what)
	}

	t.Run("replicas 1→30 with 15 GPUs free: strict refuses, nothing applied", func(t *testing.T) {
		r := f.vllm(t, withReplicas("30", "--surge-policy", "strict", "--progress", "json")...)
		assert.Equal(t, 2, r.code, "%s", r)
		assert.Empty(t, r.stdout, "no result document: nothing happened")
		assert.Contains(t, r.stderr, "rollout preflight refused (surge policy strict); nothing was applied")
		assert.Contains(t, r.stderr, "replica increase from 1 to 30 blocked (nvidia.com/gpu: need 29, free 15 on nodes gpu-isolated-1, gpu-isolated-2)")
		assert.Contains(t, r.stderr, "nvidia.com/gpu: need 29, free 15 on nodes gpu-isolated-1, gpu-isolated-2 (29 new pods of the replica increase from 1 to 30, next to the running ones), short 14")
		assert.NotContains(t, r.stderr, "lock:", "no lock taken")
		p := preflightLine(t, r).Deployments[0]
		assert.Equal(t, preflight.ChangeUnchanged, p.Change)
		assert.Equal(t, preflight.VerdictImpossible, p.Verdict)
		assert.Equal(t, int32(30), p.Replicas)
		c := gpuCheck(t, p, preflight.StepScaleUp)
		assert.Equal(t, "29", c.Needed)
		assert.Equal(t, "15", c.Free)
		assert.False(t, c.OK)
		nothingApplied(t, "strict", 1, 1)
		assert.Equal(t, before.Generation, f.deployment(t).Generation, "the live Deployment unchanged")
	})

	t.Run("replicas 1→30: auto refuses too, maxSurge 0 cannot help", func(t *testing.T) {
		r := f.vllm(t, withReplicas("30")...)
		assert.Equal(t, 2, r.code, "%s", r)
		assert.Contains(t, r.stderr, "rollout preflight refused (surge policy auto); nothing was applied")
		assert.Contains(t, r.stderr, "replica increase from 1 to 30 blocked (nvidia.com/gpu: need 29, free 15")
		nothingApplied(t, "auto", 1, 1)
		assert.Equal(t, before.Generation, f.deployment(t).Generation, "the live Deployment unchanged")
	})

	t.Run("replicas 1→16: the 15 added pods fill the pool exactly", func(t *testing.T) {
		r := f.vllm(t, withReplicas("16", "--surge-policy", "strict", "-o", "json")...)
		require.Equal(t, 0, r.code, "%s", r)
		res := result(t, r)
		require.NotNil(t, res.Preflight)
		p := res.Preflight.Deployments[0]
		assert.Equal(t, preflight.VerdictFits, p.Verdict, p.Message)
		c := gpuCheck(t, p, preflight.StepScaleUp)
		assert.Equal(t, "15", c.Needed)
		assert.Equal(t, "15", c.Free)
		assert.True(t, c.OK)
		f.waitRolledOut(t, 16)
	})

	t.Run("replicas 16→17 with no GPU left: refused", func(t *testing.T) {
		r := f.vllm(t, withReplicas("17", "--surge-policy", "strict")...)
		assert.Equal(t, 2, r.code, "%s", r)
		assert.Contains(t, r.stderr, "replica increase from 16 to 17 blocked (nvidia.com/gpu: need 1, free 0 on nodes gpu-isolated-1, gpu-isolated-2): the new pod does not fit next to the running ones")
		nothingApplied(t, "16→17", 16, 2)
	})

	t.Run("replicas 16→2: a scale-down needs nothing", func(t *testing.T) {
		r := f.vllm(t, withReplicas("2", "--surge-policy", "strict", "-o", "json")...)
		require.Equal(t, 0, r.code, "%s", r)
		p := result(t, r).Preflight.Deployments[0]
		assert.Equal(t, preflight.VerdictFits, p.Verdict)
		assert.Empty(t, p.Checks)
		f.waitRolledOut(t, 2)
	})
}
