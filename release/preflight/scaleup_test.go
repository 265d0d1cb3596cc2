package preflight

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The preflight counts the pods a replica increase adds
// (rendered replicas, or an HPA's minReplicas above the live count), with
// or without a template change.

// scaleCluster is two 8-GPU nodes, a live Deployment web of live pods of
// gpus GPUs each (all on node a) and, on node b, a pod holding filler GPUs:
// 16 − live×gpus − filler GPUs are free.
func scaleCluster(live int32, gpus, filler int64, extra ...runtime.Object) []runtime.Object {
	d := pfDeploy("web", live, gpus)
	nodes := make([]string, live)
	for i := range nodes {
		nodes[i] = "a"
	}
	out := []runtime.Object{pfNode("a"), pfNode("b"), d}
	if filler > 0 {
		out = append(out, pfPod("filler", "b", filler, nil))
	}
	out = append(out, pfOldPods(d, nodes...)...)
	return append(out, extra...)
}

// checkOf returns the check of step and resource.
func checkOf(t *testing.T, d DeploymentPreflight, step, res string) CapacityCheck {
	t.Helper()
	for _, c := range d.Checks {
		if c.Step == step && c.Resource == res {
			return c
		}
	}
	require.Failf(t, "no check", "step %s resource %s in %+v", step, res, d.Checks)
	return CapacityCheck{}
}

func noReplicas(d *appsv1.Deployment) { d.Spec.Replicas = nil }

func TestPreflightScaleUp(t *testing.T) {
	all := []SurgePolicy{SurgePolicyAuto, SurgePolicyStrict}
	tests := []pfCase{
		{
			name:    "unchanged template, replicas 1→30, 11 GPUs free: refused",
			cluster: scaleCluster(1, 1, 4), rendered: []runtime.Object{pfDeploy("web", 30, 1)},
			policies: all, want: VerdictImpossible,
			wantErr: []string{
				"Deployment llm/web (impossible, 30 replicas): replica increase from 1 to 30 blocked (nvidia.com/gpu: need 29, free 11 on nodes a, b): only 11 of the 29 new pods fit next to the running ones; no rollout strategy changes that",
				"nvidia.com/gpu: need 29, free 11 on nodes a, b (29 new pods of the replica increase from 1 to 30, next to the running ones), short 18",
			},
			check: func(t *testing.T, r *Report) {
				d := r.Deployments[0]
				assert.Equal(t, ChangeUnchanged, d.Change)
				assert.Equal(t, int32(30), d.Replicas)
				assert.Nil(t, d.Effective, "no strategy change helps a scale-up")
				c := checkOf(t, d, StepScaleUp, "nvidia.com/gpu")
				assert.Equal(t, int64(29), c.Pods)
				assert.Equal(t, "29", c.Needed)
				assert.Equal(t, "11", c.Free)
				assert.False(t, c.OK)
			},
		},
		{
			name:    "unchanged template, replicas 1→30: off reports only",
			cluster: scaleCluster(1, 1, 4), rendered: []runtime.Object{pfDeploy("web", 30, 1)},
			policies: []SurgePolicy{SurgePolicyOff}, want: VerdictImpossible,
			check: func(t *testing.T, r *Report) {
				assert.Contains(t, r.Deployments[0].Message, "surge policy off: applying anyway, 18 pods will stay Pending")
			},
		},
		{
			name:    "unchanged template, no GPU free at all",
			cluster: scaleCluster(1, 8, 8), rendered: []runtime.Object{pfDeploy("web", 2, 8)},
			policies: all, want: VerdictImpossible,
			wantErr: []string{"replica increase from 1 to 2 blocked (nvidia.com/gpu: need 8, free 0 on nodes a, b): the new pod does not fit next to the running ones"},
		},
		{
			name:    "unchanged template, replicas 1→12, 11 GPUs free: fits",
			cluster: scaleCluster(1, 1, 4), rendered: []runtime.Object{pfDeploy("web", 12, 1)},
			policies: all, want: VerdictFits,
			check: func(t *testing.T, r *Report) {
				d := r.Deployments[0]
				assert.Equal(t, ChangeUnchanged, d.Change)
				assert.Equal(t, "pod template unchanged; replica increase from 1 to 12: the 11 new pods fit next to the running ones", d.Message)
				c := checkOf(t, d, StepScaleUp, "nvidia.com/gpu")
				assert.Equal(t, CapacityCheck{Step: StepScaleUp, Pods: 11, Resource: "nvidia.com/gpu", Needed: "11", Free: "11",
					Where: "nodes a, b (11 new pods of the replica increase from 1 to 12, next to the running ones)", Nodes: []string{"a", "b"},
					MostOnOneNode: "7", OK: true}, c)
			},
		},
		{
			name:    "the added pods are not free for the next Deployment",
			cluster: scaleCluster(1, 1, 4), rendered: []runtime.Object{pfDeploy("web", 12, 1), pfDeploy("next", 1, 1)},
			policies: all, want: VerdictFits,
			wantErr: []string{"Deployment llm/next (impossible, 1 replica): a new Deployment needs room for all its pods (1) at once", "nvidia.com/gpu: need 1, free 0"},
		},
		{
			name:    "replicas 3→1: a scale-down needs nothing",
			cluster: scaleCluster(3, 1, 8, pfPod("more", "a", 5, nil)), rendered: []runtime.Object{pfDeploy("web", 1, 1)},
			policies: all, want: VerdictFits,
			check: func(t *testing.T, r *Report) {
				d := r.Deployments[0]
				assert.Empty(t, d.Checks)
				assert.Equal(t, "pod template unchanged, replicas 3→1: no new pods", d.Message)
			},
		},
		{
			name:    "template change and replicas 2→4: the added and the surge pods count, 3 free: fits",
			cluster: scaleCluster(2, 1, 3, pfPod("more", "a", 8-2-0, nil)), rendered: []runtime.Object{pfDeploy("web", 4, 1, image("v2"))},
			policies: all, want: VerdictFits,
			check: func(t *testing.T, r *Report) {
				d := r.Deployments[0]
				assert.Equal(t, ChangeChanged, d.Change)
				c := checkOf(t, d, StepSurge, "nvidia.com/gpu")
				assert.Equal(t, int64(3), c.Pods)
				assert.Equal(t, "3", c.Needed)
				assert.Equal(t, "5", c.Free)
				assert.Equal(t, "nodes a, b (2 new pods of the replica increase from 2 to 4 and 1 surge pod, next to the old ones)", c.Where)
				assert.True(t, c.OK)
			},
		},
		{
			name:    "template change and replicas 2→4, 2 free: strict refuses, the need counts both",
			cluster: scaleCluster(2, 1, 8, pfPod("more", "a", 4, nil)), rendered: []runtime.Object{pfDeploy("web", 4, 1, image("v2"))},
			policies: []SurgePolicy{SurgePolicyStrict}, want: VerdictSurgeBlocked,
			wantErr: []string{"surge blocked (nvidia.com/gpu: need 3, free 2 on nodes a, b)",
				"nvidia.com/gpu: need 3, free 2 on nodes a, b (2 new pods of the replica increase from 2 to 4 and 1 surge pod, next to the old ones), short 1"},
		},
		{
			name:    "template change and replicas 2→4, 2 free: auto starts the added pods, then replaces in place",
			cluster: scaleCluster(2, 1, 8, pfPod("more", "a", 4, nil)), rendered: []runtime.Object{pfDeploy("web", 4, 1, image("v2"))},
			want: VerdictSurgeBlocked, wantSurge: "0", wantUnav: "1",
			check: func(t *testing.T, r *Report) {
				d := r.Deployments[0]
				assert.Equal(t, "surge policy auto: Deployment web maxSurge 1→0, maxUnavailable 0→1 (nvidia.com/gpu: need 3, free 2 on nodes a, b)", r.Description())
				c := checkOf(t, d, StepReplace, "nvidia.com/gpu")
				assert.Equal(t, "nodes a, b (1 new pod after removing 1 old, next to the 2 new pods of the replica increase from 2 to 4)", c.Where)
				assert.Equal(t, "1", c.Free, "the 2 free GPUs went to the added pods; removing an old pod frees one")
				assert.True(t, c.OK)
			},
		},
		{
			name:    "template change and replicas 2→4, 1 free: the added pods do not fit, auto refuses too",
			cluster: scaleCluster(2, 1, 8, pfPod("more", "a", 5, nil)), rendered: []runtime.Object{pfDeploy("web", 4, 1, image("v2"))},
			policies: all, want: VerdictImpossible,
			wantErr: []string{"replica increase from 2 to 4 blocked (nvidia.com/gpu: need 2, free 1 on nodes a, b): only 1 of the 2 new pods fit",
				"nvidia.com/gpu: need 2, free 1 on nodes a, b (2 new pods of the replica increase from 2 to 4, next to the running ones), short 1"},
			check: func(t *testing.T, r *Report) {
				assert.Nil(t, r.Deployments[0].Effective)
			},
		},
		{
			name:    "quota: replicas 2→5 with 2 GPUs of the quota left: refused naming the quota",
			cluster: scaleCluster(2, 1, 0, gpuQuota("gpu-quota", 4, 2)), rendered: []runtime.Object{pfDeploy("web", 5, 1)},
			policies: all, want: VerdictImpossible,
			wantErr: []string{"replica increase from 2 to 5 blocked (requests.nvidia.com/gpu: need 3, free 2 on quota gpu-quota)",
				"requests.nvidia.com/gpu: need 3, free 2 on quota gpu-quota (hard 4, used 2; 3 new pods of the replica increase from 2 to 5, next to the running ones), short 1"},
			check: func(t *testing.T, r *Report) {
				assert.True(t, checkOf(t, r.Deployments[0], StepScaleUp, "nvidia.com/gpu").OK, "the nodes have room")
			},
		},
		{
			name:    "quota: replicas 2→4 fits the quota",
			cluster: scaleCluster(2, 1, 0, gpuQuota("gpu-quota", 4, 2)), rendered: []runtime.Object{pfDeploy("web", 4, 1)},
			policies: all, want: VerdictFits,
		},
		{
			name:    "live HPA minReplicas above the live replicas: counted",
			cluster: scaleCluster(2, 1, 8, pfPod("more", "a", 4, nil), pfHPA("web", 5)), rendered: []runtime.Object{pfDeploy("web", 1, 1, noReplicas)},
			policies: all, want: VerdictImpossible,
			wantErr: []string{"(impossible, 5 replicas): replica increase from 2 to 5 blocked (nvidia.com/gpu: need 3, free 2 on nodes a, b)"},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, "HorizontalPodAutoscaler web minReplicas", r.Deployments[0].ReplicasFrom)
			},
		},
		{
			name:    "rendered HPA minReplicas above the live replicas, with room",
			cluster: scaleCluster(2, 1, 4), rendered: []runtime.Object{pfDeploy("web", 1, 1, noReplicas), pfHPA("web", 5)},
			policies: all, want: VerdictFits,
			check: func(t *testing.T, r *Report) {
				d := r.Deployments[0]
				assert.Equal(t, int32(5), d.Replicas)
				assert.Equal(t, "3", checkOf(t, d, StepScaleUp, "nvidia.com/gpu").Needed)
			},
		},
		{
			name:    "HPA minReplicas below the live replicas: the live count, nothing added",
			cluster: scaleCluster(2, 1, 8, pfPod("more", "a", 6, nil), pfHPA("web", 1)), rendered: []runtime.Object{pfDeploy("web", 1, 1, noReplicas)},
			policies: all, want: VerdictFits,
			check: func(t *testing.T, r *Report) {
				d := r.Deployments[0]
				assert.Equal(t, int32(2), d.Replicas)
				assert.Equal(t, "live (HorizontalPodAutoscaler web)", d.ReplicasFrom)
				assert.Empty(t, d.Checks)
			},
		},
		{
			name:    "a paused Deployment does not roll out but scales",
			cluster: scaleCluster(1, 8, 8), rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2"), func(d *appsv1.Deployment) { d.Spec.Paused = true })},
			policies: all, want: VerdictImpossible,
			wantErr: []string{"replica increase from 1 to 2 blocked (nvidia.com/gpu: need 8, free 0"},
		},
		{
			name:    "Recreate with a replica increase: all new pods once the old are gone",
			cluster: scaleCluster(2, 4, 8), rendered: []runtime.Object{pfDeploy("web", 3, 4, image("v2"), func(d *appsv1.Deployment) {
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
			})},
			policies: all, want: VerdictImpossible,
			wantErr: []string{"Recreate: the 3 new pods do not fit even once every old pod is gone", "nvidia.com/gpu: need 12, free 8"},
		},
	}
	for _, tc := range tests {
		policies := tc.policies
		if len(policies) == 0 {
			policies = []SurgePolicy{SurgePolicyAuto}
		}
		for _, policy := range policies {
			t.Run(fmt.Sprintf("%s/%s", tc.name, policy), func(t *testing.T) {
				r, err := runPreflight(t, tc, policy)
				require.NotNil(t, r, "the report comes with any error: %v", err)
				if err != nil {
					t.Log(err)
				}
				if len(tc.wantErr) > 0 {
					var pe *Error
					require.ErrorAs(t, err, &pe)
					assert.Equal(t, 2, pe.ExitCode())
					for _, s := range tc.wantErr {
						assert.Contains(t, err.Error(), s)
					}
				} else {
					require.NoError(t, err)
				}
				require.NotEmpty(t, r.Deployments)
				d := r.Deployments[0]
				assert.Equal(t, tc.want, d.Verdict, "verdict; message %q; checks %+v", d.Message, d.Checks)
				if tc.wantSurge == "" {
					assert.Nil(t, d.Effective, "strategy unchanged")
				} else if assert.NotNil(t, d.Effective) {
					assert.Equal(t, tc.wantSurge, d.Effective.MaxSurge.String())
					assert.Equal(t, tc.wantUnav, d.Effective.MaxUnavailable.String())
				}
				if tc.check != nil {
					tc.check(t, r)
				}
			})
		}
	}
}

func TestPreflightScaleUpPrint(t *testing.T) {
	r, err := runPreflight(t, pfCase{cluster: scaleCluster(1, 1, 4), rendered: []runtime.Object{pfDeploy("web", 30, 1)}}, SurgePolicyStrict)
	require.Error(t, err)
	var buf bytes.Buffer
	require.NoError(t, r.Print(&buf))
	want := `DEPLOYMENT  RESOURCE        NEEDED  FREE  WHERE                                                                                                            VERDICT
web         nvidia.com/gpu  29      11    nodes a, b (29 new pods of the replica increase from 1 to 30, next to the running ones) (at most 7 on one node)  impossible
web: replica increase from 1 to 30 blocked (nvidia.com/gpu: need 29, free 11 on nodes a, b): only 11 of the 29 new pods fit next to the running ones; no rollout strategy changes that (maxSurge 0 does not help a scale-up): free capacity or lower the replica count
`
	assert.Equal(t, want, buf.String())

	r, err = runPreflight(t, pfCase{cluster: scaleCluster(3, 1, 0), rendered: []runtime.Object{pfDeploy("web", 1, 1)}}, SurgePolicyStrict)
	require.NoError(t, err)
	buf.Reset()
	require.NoError(t, r.Print(&buf))
	assert.Contains(t, buf.String(), "pod template unchanged, replicas 3→1: no new pods")
}

// TestPreflightScaleUpNoSurge: with maxSurge 0, a template change and a
// replica increase: the added pods start next to the old ones, then the
// old pods are replaced in place.
func TestPreflightScaleUpNoSurge(t *testing.T) {
	for _, tc := range []struct {
		free    int64
		want    Verdict
		wantErr string
	}{
		{free: 2, want: VerdictFits},
		{free: 1, want: VerdictImpossible, wantErr: "replica increase from 2 to 4 blocked (nvidia.com/gpu: need 2, free 1 on nodes a, b)"},
	} {
		t.Run(fmt.Sprintf("%d free", tc.free), func(t *testing.T) {
			live := pfDeploy("web", 2, 1, strategy("0", "1"))
			cluster := append([]runtime.Object{pfNode("a"), pfNode("b"), live, pfPod("filler", "b", 8, nil), pfPod("more", "a", 6-tc.free, nil)}, pfOldPods(live, "a", "a")...)
			r, err := runPreflight(t, pfCase{cluster: cluster, rendered: []runtime.Object{pfDeploy("web", 4, 1, strategy("0", "1"), image("v2"))}}, SurgePolicyStrict)
			require.NotNil(t, r)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			d := r.Deployments[0]
			assert.Equal(t, tc.want, d.Verdict, d.Message)
			up := checkOf(t, d, StepScaleUp, "nvidia.com/gpu")
			assert.Equal(t, "2", up.Needed)
			if tc.want == VerdictFits {
				rep := checkOf(t, d, StepReplace, "nvidia.com/gpu")
				assert.Equal(t, "nodes a, b (1 new pod after removing 1 old, next to the 2 new pods of the replica increase from 2 to 4)", rep.Where)
				assert.True(t, rep.OK)
			}
		})
	}
}
