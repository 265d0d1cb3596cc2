package preflight

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

// pfGroup is an engine group as a multi-node release renders it: a
// StatefulSet labelled vllmctl.io/group=index of pods pods of gpus GPUs
// each, Parallel, maxUnavailable 100%, one pod per node.
func pfGroup(index int, pods int32, gpus int64, mods ...func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
	idx := fmt.Sprint(index)
	l := map[string]string{"app": "engine", GroupLabel: idx}
	s := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "engine-g" + idx, Namespace: pfNS, Labels: map[string]string{GroupLabel: idx}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(pods),
			Selector:            &metav1.LabelSelector{MatchLabels: l},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromString("100%"))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						TopologyKey:   corev1.LabelHostname,
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{GroupLabel: idx}},
					}}}},
					Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v1", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{vllm.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI), corev1.ResourceCPU: resource.MustParse("1")},
						Limits:   corev1.ResourceList{vllm.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
					}}},
				},
			},
		},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func groupImage(tag string) func(*appsv1.StatefulSet) {
	return func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:" + tag }
}

// pfGroupPods makes the running pods of a live group, one per node.
func pfGroupPods(s *appsv1.StatefulSet, nodes ...string) []runtime.Object {
	var out []runtime.Object
	q := s.Spec.Template.Spec.Containers[0].Resources.Requests[vllm.GPUResource]
	for i, n := range nodes {
		out = append(out, pfPod(fmt.Sprintf("%s-%d", s.Name, i), n, q.Value(), s.Spec.Template.Labels, func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: s.Name, UID: types.UID("uid-" + s.Name), Controller: ptr.To(true)}}
		}))
	}
	return out
}

// dryRunStatefulSets makes the fake's server-side dry-run apply of a
// StatefulSet return the applied object, as pfClient does for
// Deployments.
func dryRunStatefulSets(c *fake.Clientset) {
	c.PrependReactor("patch", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchActionImpl)
		if len(pa.GetPatchOptions().DryRun) == 0 {
			return false, nil, nil
		}
		s := &appsv1.StatefulSet{}
		if err := json.Unmarshal(pa.GetPatch(), s); err != nil {
			return true, nil, err
		}
		return true, s, nil
	})
}

func nodes(names ...string) []runtime.Object {
	var out []runtime.Object
	for _, n := range names {
		out = append(out, pfNode(n))
	}
	return out
}

func TestPreflightGroups(t *testing.T) {
	g0, g1 := pfGroup(0, 2, 8), pfGroup(1, 2, 8)
	// live0 is a cluster of 2 nodes that group 0 fills, with extra
	// objects (a fresh slice each time).
	live0 := func(extra ...runtime.Object) []runtime.Object {
		out := append(nodes("gpu-node-1", "gpu-node-2"), g0)
		return append(append(out, pfGroupPods(g0, "gpu-node-1", "gpu-node-2")...), extra...)
	}
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	}
	pool := func(v string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels["pool"] = v } }
	big := func(n *corev1.Node) { n.Status.Allocatable[vllm.GPUResource] = resource.MustParse("16") }
	noAntiAffinity := func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Affinity = nil }
	withMods := func(mods ...func(*corev1.Node)) func(names ...string) []runtime.Object {
		return func(names ...string) []runtime.Object {
			var out []runtime.Object
			for _, n := range names {
				out = append(out, pfNode(n, mods...))
			}
			return out
		}
	}
	both := []SurgePolicy{SurgePolicyStrict, SurgePolicyAuto}
	tests := []pfCase{
		{
			name: "install: 2 groups of 2 on 4 free 8-GPU nodes fit, each on its own nodes", policies: both,
			cluster: nodes("gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4"), rendered: []runtime.Object{g0, g1},
			check: func(t *testing.T, r *Report) {
				require.Len(t, r.Groups, 2)
				a, b := r.Groups[0], r.Groups[1]
				assert.Equal(t, VerdictFits, a.Verdict)
				assert.Equal(t, VerdictFits, b.Verdict)
				assert.Equal(t, ChangeNew, a.Change)
				assert.True(t, a.OnePerNode)
				assert.Equal(t, 4, a.CandidateNodes)
				assert.Equal(t, 4, a.FitNodes)
				assert.Equal(t, 2, b.FitNodes, "the first group's nodes are taken")
				assert.Len(t, a.PlacedOn, 2)
				assert.Len(t, b.PlacedOn, 2)
				assert.NotContains(t, b.PlacedOn, a.PlacedOn[0])
				assert.NotContains(t, b.PlacedOn, a.PlacedOn[1])
				assert.Equal(t, map[string]string{"nvidia.com/gpu": "8", "cpu": "1", "pods": "1"}, a.PerPod)
				assert.Contains(t, a.Message, "the 2 pods fit at once, one per node, on ")
			},
		},
		{
			name: "install: on 3 free nodes the second group does not fit", policies: both,
			cluster: nodes("gpu-node-1", "gpu-node-2", "gpu-node-3"), rendered: []runtime.Object{g1, g0},
			wantErr: []string{
				"StatefulSet llm/engine-g1 (group 1, impossible, 2 pods): gang does not fit: its 2 pods must all run at once, one per node (required podAntiAffinity on kubernetes.io/hostname), each needing nvidia.com/gpu 8, cpu 1; 1 of 3 candidate nodes can host one (gpu-node-3); the others cannot: gpu-node-1: nvidia.com/gpu free 0, needs 8 (taken by StatefulSet engine-g0), gpu-node-2: nvidia.com/gpu free 0, needs 8 (taken by StatefulSet engine-g0)",
				"cannot help: no rollout strategy makes a group fit, as it serves only when all its 2 pods run at once",
			},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, "engine-g0", r.Groups[0].StatefulSet, "groups are placed by index")
				assert.Equal(t, VerdictFits, r.Groups[0].Verdict)
				assert.Equal(t, VerdictImpossible, r.Groups[1].Verdict)
				assert.Equal(t, 1, r.Groups[1].FitNodes)
				assert.Empty(t, r.Groups[1].PlacedOn)
			},
		},
		{
			name: "surge policy off checks nothing", policies: []SurgePolicy{SurgePolicyOff},
			cluster: nodes("gpu-node-1"), rendered: []runtime.Object{g0, g1},
			check: func(t *testing.T, r *Report) {
				for _, g := range r.Groups {
					assert.Equal(t, VerdictUnchecked, g.Verdict)
					assert.Contains(t, g.Message, "surge policy off")
				}
			},
		},
		{
			name: "upgrade: the group's own old pods free their nodes", policies: both,
			cluster: live0(), rendered: []runtime.Object{pfGroup(0, 2, 8, groupImage("v2"))},
			check: func(t *testing.T, r *Report) {
				g := r.Groups[0]
				assert.Equal(t, ChangeChanged, g.Change)
				assert.Equal(t, VerdictFits, g.Verdict)
				assert.Equal(t, []string{"gpu-node-1", "gpu-node-2"}, g.PlacedOn)
				assert.Equal(t, "the 2 pods fit at once, one per node, on gpu-node-1, gpu-node-2, counting the room its 2 old pods free", g.Message)
				for _, n := range r.Notes {
					assert.NotContains(t, n, "updateStrategy")
				}
			},
		},
		{
			name: "upgrade of a group replaced a pod at a time: noted", policies: both,
			cluster: live0(), rendered: []runtime.Object{pfGroup(0, 2, 8, groupImage("v2"), func(s *appsv1.StatefulSet) {
				s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
			})},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, VerdictFits, r.Groups[0].Verdict)
				assert.Contains(t, r.Notes, "StatefulSet llm/engine-g0: updateStrategy RollingUpdate with maxUnavailable 1 replaces fewer than its 2 pods at once; the check counts all its old pods as gone, as with maxUnavailable 100%")
			},
		},
		{
			name: "upgrade of a wave of 2 groups on full nodes: each counts its own old pods", policies: both,
			cluster: func() []runtime.Object {
				out := live0(pfNode("gpu-node-3"), pfNode("gpu-node-4"), g1)
				return append(out, pfGroupPods(g1, "gpu-node-3", "gpu-node-4")...)
			}(),
			rendered: []runtime.Object{pfGroup(0, 2, 8, groupImage("v2")), pfGroup(1, 2, 8, groupImage("v2"))},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, []string{"gpu-node-1", "gpu-node-2"}, r.Groups[0].PlacedOn)
				assert.Equal(t, []string{"gpu-node-3", "gpu-node-4"}, r.Groups[1].PlacedOn)
				assert.Equal(t, 2, r.Groups[1].FitNodes, "the first group's nodes are taken")
			},
		},
		{
			name: "upgrade: another group's pods do not free anything", policies: both,
			cluster: live0(), rendered: []runtime.Object{pfGroup(1, 2, 8)},
			wantErr: []string{"StatefulSet llm/engine-g1", "0 of 2 candidate nodes can host one", "gpu-node-1: nvidia.com/gpu free 0, needs 8"},
		},
		{
			name: "unchanged group needs nothing", policies: both,
			cluster: live0(), rendered: []runtime.Object{pfGroup(0, 2, 8)},
			check: func(t *testing.T, r *Report) {
				g := r.Groups[0]
				assert.Equal(t, ChangeUnchanged, g.Change)
				assert.Equal(t, VerdictFits, g.Verdict)
				assert.Equal(t, msgUnchanged, g.Message)
				assert.Zero(t, g.NewPods)
				assert.Zero(t, g.CandidateNodes)
			},
		},
		{
			name: "unchanged group growing: the added pod needs a node without one of its pods", policies: both,
			cluster: live0(pfNode("gpu-node-3")), rendered: []runtime.Object{pfGroup(0, 3, 8)},
			check: func(t *testing.T, r *Report) {
				g := r.Groups[0]
				assert.Equal(t, VerdictFits, g.Verdict)
				assert.Equal(t, int32(1), g.NewPods)
				assert.Equal(t, []string{"gpu-node-3"}, g.PlacedOn)
			},
		},
		{
			name: "nodes that do not tolerate or select are not counted", policies: both,
			cluster: append(append(withMods(pool("gpu"))("gpu-node-1", "gpu-node-2"), withMods(pool("gpu"), tainted)("gpu-node-3")...), withMods(pool("cpu"))("cpu-node-1")...),
			rendered: []runtime.Object{pfGroup(0, 3, 8, func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
			})},
			wantErr: []string{"StatefulSet llm/engine-g0 (group 0, impossible, 3 pods)", "2 of 2 candidate nodes can host one (gpu-node-1, gpu-node-2)"},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, 2, r.Groups[0].CandidateNodes)
			},
		},
		{
			name: "a toleration makes the tainted node a candidate", policies: both,
			cluster: append(append(withMods(pool("gpu"))("gpu-node-1", "gpu-node-2"), withMods(pool("gpu"), tainted)("gpu-node-3")...), withMods(pool("cpu"))("cpu-node-1")...),
			rendered: []runtime.Object{pfGroup(0, 3, 8, func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
				s.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
			})},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, []string{"gpu-node-1", "gpu-node-2", "gpu-node-3"}, r.Groups[0].PlacedOn)
			},
		},
		{
			name: "no node matches at all", policies: both,
			cluster: withMods(pool("cpu"))("cpu-node-1"),
			rendered: []runtime.Object{pfGroup(0, 2, 8, func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"}
			})},
			wantErr: []string{"StatefulSet llm/engine-g0", "no Ready, schedulable node matches the pod's nodeSelector, required node affinity and tolerations"},
		},
		{
			name: "a pod larger than any node", policies: both,
			cluster: nodes("gpu-node-1", "gpu-node-2"), rendered: []runtime.Object{pfGroup(0, 2, 16)},
			wantErr: []string{"one pod (nvidia.com/gpu 16, cpu 1) needs more than any matching node has allocatable (nvidia.com/gpu: at most 8 on gpu-node-1)"},
		},
		{
			name: "3 pods on 2 nodes: refused though the GPUs would suffice (one pod per node)", policies: both,
			cluster: withMods(big)("gpu-node-1", "gpu-node-2"), rendered: []runtime.Object{pfGroup(0, 3, 4)},
			wantErr: []string{"StatefulSet llm/engine-g0 (group 0, impossible, 3 pods)", "its 3 pods must all run at once, one per node", "2 of 2 candidate nodes can host one"},
		},
		{
			name: "3 pods on 2 nodes without the anti-affinity: they share nodes", policies: both,
			cluster: withMods(big)("gpu-node-1", "gpu-node-2"), rendered: []runtime.Object{pfGroup(0, 3, 4, noAntiAffinity)},
			check: func(t *testing.T, r *Report) {
				assert.False(t, r.Groups[0].OnePerNode)
				assert.Equal(t, VerdictFits, r.Groups[0].Verdict)
			},
		},
		{
			name: "groups after a Deployment count what it reserves", policies: both,
			cluster: nodes("gpu-node-1", "gpu-node-2"), rendered: []runtime.Object{pfDeploy("router", 1, 8), pfGroup(0, 2, 8)},
			wantErr: []string{"StatefulSet llm/engine-g0", "1 of 2 candidate nodes can host one"},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, VerdictFits, r.Deployments[0].Verdict)
			},
		},
		{
			name: "the namespace's quota counts", policies: both,
			cluster: append(nodes("gpu-node-1", "gpu-node-2", "gpu-node-3", "gpu-node-4"), gpuQuota("gpus", 24, 0)), rendered: []runtime.Object{g0, g1},
			wantErr: []string{"StatefulSet llm/engine-g1", "the namespace's quotas admit 1 of the 2 pods (requests.nvidia.com/gpu: need 16, free 8 on quota gpus)",
				"requests.nvidia.com/gpu: need 16, free 8 on quota gpus (hard 24, used 0; 2 pods of the group, its old pods gone), short 8"},
		},
		{
			name: "upgrade within a full quota: the old pods' usage counts as free", policies: both,
			cluster: live0(gpuQuota("gpus", 16, 16)), rendered: []runtime.Object{pfGroup(0, 2, 8, groupImage("v2"))},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, VerdictFits, r.Groups[0].Verdict)
			},
		},
		{
			name: "0 replicas: no pods", policies: both,
			cluster: nodes("gpu-node-1"), rendered: []runtime.Object{pfGroup(0, 0, 8)},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, VerdictFits, r.Groups[0].Verdict)
				assert.Equal(t, "0 replicas: no pods", r.Groups[0].Message)
			},
		},
		{
			name: "huge replicas: refused, no panic", policies: both,
			cluster: nodes("gpu-node-1", "gpu-node-2"), rendered: []runtime.Object{pfGroup(0, 1<<30, 8)},
			wantErr: []string{"(group 0, impossible, 1073741824 pods)", "2 of 2 candidate nodes can host one"},
		},
		{
			name: "huge replicas of pods requesting 512Gi within a memory quota: no overflow", policies: both,
			cluster: append(nodes("gpu-node-1", "gpu-node-2"), &corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Name: "mem", Namespace: pfNS},
				Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.memory": resource.MustParse("2Ti")}},
				Status:     corev1.ResourceQuotaStatus{Used: corev1.ResourceList{"requests.memory": resource.MustParse("0")}},
			}),
			rendered: []runtime.Object{pfGroup(0, 1<<30, 1, func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("256Gi")
			})},
			wantErr: []string{"the namespace's quotas admit 8 of the 1073741824 pods", "free 2Ti on quota mem (hard 2Ti, used 0; 1073741824 pods of the group, its old pods gone), short 4"},
		},
		{
			name: "negative replicas: refused", policies: both,
			cluster: nodes("gpu-node-1"), rendered: []runtime.Object{pfGroup(0, -1, 8)},
			wantErr: []string{"spec.replicas -1 is negative"},
		},
		{
			name: "missing requests: each pod still needs its own node", policies: both,
			cluster: nodes("gpu-node-1", "gpu-node-2"),
			rendered: []runtime.Object{pfGroup(0, 2, 0, func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
			}), pfGroup(1, 3, 0, func(s *appsv1.StatefulSet) {
				s.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
			})},
			wantErr: []string{"StatefulSet llm/engine-g1", "each needing no resources; 2 of 2 candidate nodes can host one"},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, map[string]string{"pods": "1"}, r.Groups[0].PerPod)
				assert.Equal(t, VerdictFits, r.Groups[0].Verdict)
			},
		},
		{
			name: "pending pods of other workloads that may take the nodes are named", policies: both,
			cluster:  append(nodes("gpu-node-1", "gpu-node-2"), pfPod("waiting", "", 8, nil, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })),
			rendered: []runtime.Object{pfGroup(0, 2, 8)},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, VerdictFits, r.Groups[0].Verdict)
				assert.Contains(t, r.Notes, "StatefulSet engine-g0: 1 pending pod(s) of other workloads may take the same nodes first (llm/waiting), requesting nvidia.com/gpu 8; the scheduler places pods by priority, so the room counted here may go to them")
			},
		},
		{
			name: "other StatefulSets are left out, with a note", policies: both,
			cluster: nodes("gpu-node-1"), rendered: []runtime.Object{pfGroup(0, 5, 8, func(s *appsv1.StatefulSet) { s.Labels = nil })},
			check: func(t *testing.T, r *Report) {
				assert.Empty(t, r.Groups)
				assert.Contains(t, r.Notes, "StatefulSet llm/engine-g0 is not an engine group (no vllmctl.io/group label): its capacity is not checked")
			},
		},
	}
	for _, tc := range tests {
		mods := tc.clientMods
		tc.clientMods = func(c *fake.Clientset) {
			dryRunStatefulSets(c)
			if mods != nil {
				mods(c)
			}
		}
		for _, policy := range tc.policies {
			t.Run(tc.name+"/"+string(policy), func(t *testing.T) {
				r, err := runPreflight(t, tc, policy)
				if len(tc.wantErr) > 0 {
					var pe *Error
					require.True(t, errors.As(err, &pe), "want a refusal, got %v", err)
					assert.Equal(t, 2, pe.ExitCode())
					assert.NotEmpty(t, pe.RefusedGroups)
					assert.Contains(t, err.Error(), "rollout preflight refused (surge policy "+string(policy)+"); nothing was applied")
					for _, want := range tc.wantErr {
						assert.Contains(t, err.Error(), want)
					}
				} else {
					require.NoError(t, err)
				}
				require.NotNil(t, r)
				if tc.check != nil {
					tc.check(t, r)
				}
			})
		}
	}
}

// TestPreflightGroupReads checks that a group's reads are bounded by its
// candidate nodes as a Deployment's are: the pods of nodes it cannot use
// are not listed.
func TestPreflightGroupReads(t *testing.T) {
	cpuOnly := func(n *corev1.Node) { delete(n.Status.Allocatable, vllm.GPUResource) }
	cluster := nodes("gpu-node-1", "gpu-node-2")
	for i := range 20 {
		cluster = append(cluster, pfNode(fmt.Sprintf("cpu-%02d", i), cpuOnly))
	}
	var seen listsSeen
	_, err := runPreflight(t, pfCase{cluster: cluster, rendered: []runtime.Object{pfGroup(0, 2, 8)},
		clientMods: func(c *fake.Clientset) { dryRunStatefulSets(c); countLists(c, &seen) }}, SurgePolicyStrict)
	require.NoError(t, err)
	var perNode []string
	for _, s := range seen.podSelectors {
		if strings.HasPrefix(s, "spec.nodeName=") && s != pendingSelector {
			perNode = append(perNode, s)
		}
	}
	assert.ElementsMatch(t, []string{
		"spec.nodeName=gpu-node-1,status.phase!=Succeeded,status.phase!=Failed",
		"spec.nodeName=gpu-node-2,status.phase!=Succeeded,status.phase!=Failed",
	}, perNode)
}

func TestPreflightGroupsPrint(t *testing.T) {
	r, err := runPreflight(t, pfCase{cluster: nodes("gpu-node-1", "gpu-node-2", "gpu-node-3"),
		rendered:   []runtime.Object{pfGroup(0, 2, 8), pfGroup(1, 2, 8)},
		clientMods: dryRunStatefulSets}, SurgePolicyStrict)
	require.Error(t, err)
	var buf bytes.Buffer
	require.NoError(t, r.Print(&buf))
	out := buf.String()
	assert.True(t, strings.HasPrefix(out, `GROUP  STATEFULSET  PODS  PER POD                  CANDIDATE NODES  NODES THAT FIT  VERDICT
0      engine-g0    2     nvidia.com/gpu 8, cpu 1  3                3               fits
1      engine-g1    2     nvidia.com/gpu 8, cpu 1  3                1               impossible
engine-g0: the 2 pods fit at once, one per node, on gpu-node-1, gpu-node-2
`), out)
	assert.Contains(t, out, "engine-g1: gang does not fit: ")
	assert.NotContains(t, out, "DEPLOYMENT", "no Deployment table without Deployments")

	data, err := json.Marshal(r)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, []any{}, back["deployments"], "the deployments field stays")
	groups := back["groups"].([]any)
	require.Len(t, groups, 2)
	g := groups[1].(map[string]any)
	assert.Equal(t, "engine-g1", g["statefulSet"])
	assert.Equal(t, "1", g["group"])
	assert.Equal(t, float64(2), g["pods"])
	assert.Equal(t, float64(3), g["candidateNodes"])
	assert.Equal(t, float64(1), g["fitNodes"])
	assert.Equal(t, "impossible", g["verdict"])
	assert.Equal(t, map[string]any{"nvidia.com/gpu": "8", "cpu": "1", "pods": "1"}, g["perPod"])

	// Without groups, the report's JSON has no groups field.
	r, err = runPreflight(t, pfCase{cluster: nodes("gpu-node-1"), rendered: []runtime.Object{pfDeploy("web", 1, 8)}}, SurgePolicyStrict)
	require.NoError(t, err)
	data, err = json.Marshal(r)
	require.NoError(t, err)
	assert.NotContains(t, string(data), `"groups"`)
}

func TestPreflightGroupsSkip(t *testing.T) {
	r, err := runPreflight(t, pfCase{cluster: nodes("gpu-node-1"), rendered: []runtime.Object{pfGroup(0, 4, 8)},
		opts: Options{Skip: true}, clientMods: dryRunStatefulSets}, SurgePolicyStrict)
	require.NoError(t, err)
	require.Len(t, r.Groups, 1)
	assert.Equal(t, VerdictUnchecked, r.Groups[0].Verdict)
}
