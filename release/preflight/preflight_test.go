package preflight

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/vllm"
)

const pfNS = "llm"

// pfNode is a Ready GPU node like the local cluster's.
func pfNode(name string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				vllm.GPUResource: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("64"),
				corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

// pfPod is a running pod bound to node, requesting gpus GPUs and 1 cpu.
func pfPod(name, node string, gpus int64, podLabels map[string]string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pfNS, Labels: podLabels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{vllm.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI), corev1.ResourceCPU: resource.MustParse("1")},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

// pfDeploy is a Deployment of replicas pods of gpus GPUs each, with
// maxSurge 1 / maxUnavailable 0 like the vllm chart.
func pfDeploy(name string, replicas int32, gpus int64, mods ...func(*appsv1.Deployment)) *appsv1.Deployment {
	l := map[string]string{"app": name}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pfNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v1", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{vllm.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI), corev1.ResourceCPU: resource.MustParse("1")},
					Limits:   corev1.ResourceList{vllm.GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)},
				}}}},
			},
		},
	}
	for _, m := range mods {
		m(d)
	}
	return d
}

// image changes the pod template.
func image(tag string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:" + tag }
}

func strategy(surge, unavailable string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{
			MaxSurge: ptr.To(intstr.Parse(surge)), MaxUnavailable: ptr.To(intstr.Parse(unavailable)),
		}
	}
}

func pfUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	return &unstructured.Unstructured{Object: m}
}

// pfOldPods makes the running pods of a live Deployment, one per node.
func pfOldPods(d *appsv1.Deployment, nodes ...string) []runtime.Object {
	var out []runtime.Object
	for i, n := range nodes {
		q := d.Spec.Template.Spec.Containers[0].Resources.Requests[vllm.GPUResource]
		out = append(out, pfPod(fmt.Sprintf("%s-old-%d", d.Name, i), n, q.Value(), d.Spec.Template.Labels))
	}
	return out
}

// pfClient is a fake clientset whose server-side dry-run apply of a
// Deployment returns the applied object (the tests build live and rendered
// objects alike, so no server defaulting is needed) without storing it.
func pfClient(objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchActionImpl)
		if len(pa.GetPatchOptions().DryRun) == 0 {
			return false, nil, nil
		}
		d := &appsv1.Deployment{}
		if err := json.Unmarshal(pa.GetPatch(), d); err != nil {
			return true, nil, err
		}
		return true, d, nil
	})
	return c
}

func gpuQuota(name string, hard, used int64) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pfNS},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": *resource.NewQuantity(hard, resource.DecimalSI)}},
		Status: corev1.ResourceQuotaStatus{
			Hard: corev1.ResourceList{"requests.nvidia.com/gpu": *resource.NewQuantity(hard, resource.DecimalSI)},
			Used: corev1.ResourceList{"requests.nvidia.com/gpu": *resource.NewQuantity(used, resource.DecimalSI)},
		},
	}
}

func pdb(name string, minAvailable, maxUnavailable *intstr.IntOrString, app string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pfNS},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}
}

func TestResolveStrategy(t *testing.T) {
	ios := func(s string) *intstr.IntOrString { return ptr.To(intstr.Parse(s)) }
	tests := []struct {
		name              string
		strategy          appsv1.DeploymentStrategy
		surge, unav       *intstr.IntOrString
		replicas          int32
		wantSurge, wantUn int32
		wantErr           string
	}{
		{name: "defaults 25% of 4", replicas: 4, wantSurge: 1, wantUn: 1},
		{name: "25% of 3: surge rounds up, unavailable down", replicas: 3, wantSurge: 1, wantUn: 0},
		{name: "25% of 1", replicas: 1, wantSurge: 1, wantUn: 0},
		{name: "maxSurge 0 and 25% of 3 rounds to 0: unavailable becomes 1",
			strategy: appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ios("0"), MaxUnavailable: ios("25%")}},
			replicas: 3, wantSurge: 0, wantUn: 1},
		{name: "50%/10% of 10", strategy: appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ios("50%"), MaxUnavailable: ios("10%")}},
			replicas: 10, wantSurge: 5, wantUn: 1},
		{name: "only maxSurge set: maxUnavailable defaults to 25%", strategy: appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ios("2")}},
			replicas: 8, wantSurge: 2, wantUn: 2},
		{name: "overrides win", strategy: appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ios("1"), MaxUnavailable: ios("0")}},
			surge: ios("0"), unav: ios("1"), replicas: 2, wantSurge: 0, wantUn: 1},
		{name: "both 0", strategy: appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ios("0"), MaxUnavailable: ios("0%")}},
			replicas: 2, wantErr: "may not both be 0"},
		{name: "unavailable over 100%", unav: ios("150%"), replicas: 2, wantErr: "more than 100%"},
		{name: "recreate", strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, replicas: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveStrategy(tt.strategy, tt.surge, tt.unav, tt.replicas)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantSurge, got.Surge, "surge")
			assert.Equal(t, tt.wantUn, got.Unavailable, "unavailable")
		})
	}
}

func TestParseFlags(t *testing.T) {
	v, err := ParseIntOrPercent("--max-surge", "25%")
	require.NoError(t, err)
	assert.Equal(t, intstr.FromString("25%"), *v)
	v, err = ParseIntOrPercent("--max-unavailable", " 1 ")
	require.NoError(t, err)
	assert.Equal(t, intstr.FromInt32(1), *v)
	for _, bad := range []string{"-1", "x", "1.5", "-5%", ""} {
		_, err := ParseIntOrPercent("--max-surge", bad)
		var ie *StrategyInputError
		require.ErrorAs(t, err, &ie, bad)
		assert.Equal(t, 2, ie.ExitCode())
		assert.Contains(t, err.Error(), "--max-surge")
	}
	p, err := ParseSurgePolicy("")
	require.NoError(t, err)
	assert.Equal(t, SurgePolicyAuto, p)
	p, err = ParseSurgePolicy("Strict")
	require.NoError(t, err)
	assert.Equal(t, SurgePolicyStrict, p)
	_, err = ParseSurgePolicy("yolo")
	assert.ErrorContains(t, err, `invalid surge policy "yolo"`)
}

func TestPodRequests(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	tests := []struct {
		name string
		spec corev1.PodSpec
		want map[string]string
	}{
		{name: "containers summed", spec: corev1.PodSpec{Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "1Gi", "nvidia.com/gpu", "1")}},
			{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "512Mi")}},
		}}, want: map[string]string{"cpu": "2500m", "memory": "1536Mi", "nvidia.com/gpu": "1", "pods": "1"}},
		{name: "limits stand for absent requests", spec: corev1.PodSpec{Containers: []corev1.Container{
			{Resources: corev1.ResourceRequirements{Limits: rl("nvidia.com/gpu", "8", "cpu", "4"), Requests: rl("cpu", "1")}},
		}}, want: map[string]string{"cpu": "1", "nvidia.com/gpu": "8", "pods": "1"}},
		{name: "init containers max'd against the sum", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "8", "memory", "1Gi")}},
				{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "64Gi")}},
			},
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "2Gi", "nvidia.com/gpu", "1")}}},
		}, want: map[string]string{"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "1", "pods": "1"}},
		{name: "sidecars add up and run next to later init containers", spec: corev1.PodSpec{
			InitContainers: []corev1.Container{
				{RestartPolicy: always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}},
				{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "4")}},
			},
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2")}}},
		}, want: map[string]string{"cpu": "5", "pods": "1"}},
		{name: "overhead added", spec: corev1.PodSpec{Overhead: rl("cpu", "250m"),
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}}},
			want: map[string]string{"cpu": "1250m", "pods": "1"}},
		{name: "pod-level requests replace cpu and memory", spec: corev1.PodSpec{Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "3")},
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1", "nvidia.com/gpu", "2")}}}},
			want: map[string]string{"cpu": "3", "nvidia.com/gpu": "2", "pods": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, podRequests(&tt.spec).strings())
		})
	}
	lim := usageOf(&corev1.PodSpec{Containers: []corev1.Container{
		{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1"), Limits: rl("cpu", "2", "memory", "1Gi")}},
		{Resources: corev1.ResourceRequirements{Limits: rl("cpu", "1")}},
	}}).limits
	assert.Equal(t, map[string]string{"cpu": "3", "memory": "1Gi"}, lim.strings())
}

func TestNodeMatches(t *testing.T) {
	node := pfNode("n1", func(n *corev1.Node) {
		n.Labels["gpu"] = "a100"
		n.Labels["gpus"] = "8"
		n.Spec.Taints = []corev1.Taint{
			{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule},
			{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule},
		}
	})
	tolerate := []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	affinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	expr := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want bool
	}{
		{name: "untolerated NoSchedule taint", spec: corev1.PodSpec{}, want: false},
		{name: "tolerated; PreferNoSchedule ignored", spec: corev1.PodSpec{Tolerations: tolerate}, want: true},
		{name: "tolerate everything", spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, want: true},
		{name: "toleration for another effect", spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}}, want: false},
		{name: "nodeSelector matches", spec: corev1.PodSpec{Tolerations: tolerate, NodeSelector: map[string]string{"gpu": "a100"}}, want: true},
		{name: "nodeSelector does not", spec: corev1.PodSpec{Tolerations: tolerate, NodeSelector: map[string]string{"gpu": "h100"}}, want: false},
		{name: "nodeName elsewhere", spec: corev1.PodSpec{Tolerations: tolerate, NodeName: "n2"}, want: false},
		{name: "affinity In", spec: corev1.PodSpec{Tolerations: tolerate, Affinity: affinity(expr("gpu", corev1.NodeSelectorOpIn, "h100", "a100"))}, want: true},
		{name: "affinity NotIn", spec: corev1.PodSpec{Tolerations: tolerate, Affinity: affinity(expr("gpu", corev1.NodeSelectorOpNotIn, "a100"))}, want: false},
		{name: "affinity terms ORed", spec: corev1.PodSpec{Tolerations: tolerate, Affinity: affinity(expr("gpu", corev1.NodeSelectorOpNotIn, "a100"), expr("gpu", corev1.NodeSelectorOpExists))}, want: true},
		{name: "affinity DoesNotExist", spec: corev1.PodSpec{Tolerations: tolerate, Affinity: affinity(expr("gpu", corev1.NodeSelectorOpDoesNotExist))}, want: false},
		{name: "affinity Gt", spec: corev1.PodSpec{Tolerations: tolerate, Affinity: affinity(expr("gpus", corev1.NodeSelectorOpGt, "4"))}, want: true},
		{name: "affinity Lt", spec: corev1.PodSpec{Tolerations: tolerate, Affinity: affinity(expr("gpus", corev1.NodeSelectorOpLt, "4"))}, want: false},
		{name: "empty term matches nothing", spec: corev1.PodSpec{Tolerations: tolerate, Affinity: affinity(corev1.NodeSelectorTerm{})}, want: false},
		{name: "matchFields on the name", spec: corev1.PodSpec{Tolerations: tolerate, Affinity: affinity(corev1.NodeSelectorTerm{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}})}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, newPlacement(klog.Background(), &tt.spec).allows(node))
		})
	}
	noExec := pfNode("n2", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute}}
	})
	assert.False(t, newPlacement(klog.Background(), &corev1.PodSpec{}).allows(noExec), "NoExecute taints repel too")
	assert.True(t, newPlacement(klog.Background(), &corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpEqual, Value: "v"}}}).allows(noExec))
}

func TestDisruptionsAllowed(t *testing.T) {
	ios := func(s string) *intstr.IntOrString { return ptr.To(intstr.Parse(s)) }
	podLabels := map[string]string{"app": "web"}
	tests := []struct {
		name    string
		pdbs    []policyv1.PodDisruptionBudget
		want    int32
		wantBy  string
		replica int32
	}{
		{name: "none", replica: 3, want: -1},
		{name: "other app", pdbs: []policyv1.PodDisruptionBudget{*pdb("x", ios("1"), nil, "other")}, replica: 3, want: -1},
		{name: "minAvailable 2 of 3", pdbs: []policyv1.PodDisruptionBudget{*pdb("a", ios("2"), nil, "web")}, replica: 3, want: 1, wantBy: "a"},
		{name: "minAvailable 50% of 3 rounds up to 2", pdbs: []policyv1.PodDisruptionBudget{*pdb("a", ios("50%"), nil, "web")}, replica: 3, want: 1, wantBy: "a"},
		{name: "minAvailable 100%", pdbs: []policyv1.PodDisruptionBudget{*pdb("a", ios("100%"), nil, "web")}, replica: 3, want: 0, wantBy: "a"},
		{name: "maxUnavailable 34% of 3 rounds up to 2", pdbs: []policyv1.PodDisruptionBudget{*pdb("b", nil, ios("34%"), "web")}, replica: 3, want: 2, wantBy: "b"},
		{name: "the strictest wins", pdbs: []policyv1.PodDisruptionBudget{*pdb("a", ios("1"), nil, "web"), *pdb("b", nil, ios("1"), "web")}, replica: 4, want: 1, wantBy: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, by, err := disruptionsAllowed(tt.pdbs, podLabels, tt.replica)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantBy, by)
		})
	}
}

// pfCase is one preflight scenario.
type pfCase struct {
	name     string
	cluster  []runtime.Object
	rendered []runtime.Object
	opts     Options
	// want is the verdict of the first Deployment; wantErr a substring of
	// the *Error ("" when none).
	want       Verdict
	wantErr    []string
	wantSurge  string // effective maxSurge, "" when the strategy is not changed
	wantUnav   string
	check      func(t *testing.T, r *Report)
	policies   []SurgePolicy // run with each; default auto
	clientMods func(*fake.Clientset)
}

func runPreflight(t *testing.T, tc pfCase, policy SurgePolicy) (*Report, error) {
	t.Helper()
	c := pfClient(tc.cluster...)
	if tc.clientMods != nil {
		tc.clientMods(c)
	}
	var objs []*unstructured.Unstructured
	for _, o := range tc.rendered {
		objs = append(objs, pfUnstructured(t, o))
	}
	opts := tc.opts
	opts.Policy = policy
	if opts.Namespace == "" {
		opts.Namespace = pfNS
	}
	return Run(context.Background(), c, objs, opts)
}

func TestPreflight(t *testing.T) {
	web := pfDeploy("web", 2, 8)
	fullNodes := append([]runtime.Object{pfNode("gpu-node-1"), pfNode("gpu-node-2"), web}, pfOldPods(web, "gpu-node-1", "gpu-node-2")...)
	terminating := func(p *corev1.Pod) {
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		p.Finalizers = []string{"test"}
	}
	succeeded := func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	one := pfDeploy("one", 1, 8)

	tests := []pfCase{
		{
			name: "unchanged template needs nothing", cluster: fullNodes, rendered: []runtime.Object{pfDeploy("web", 2, 8)},
			policies: []SurgePolicy{SurgePolicyAuto, SurgePolicyStrict}, want: VerdictFits,
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, ChangeUnchanged, r.Deployments[0].Change)
				assert.Empty(t, r.Deployments[0].Checks)
			},
		},
		{
			name: "2x8 GPUs, both nodes full: strict refuses", cluster: fullNodes, rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2"))},
			policies: []SurgePolicy{SurgePolicyStrict}, want: VerdictSurgeBlocked,
			wantErr: []string{"surge policy strict", "Deployment llm/web (surge-blocked, 2 replicas)", "nvidia.com/gpu: need 8, free 0 on nodes gpu-node-1, gpu-node-2 (1 surge pod next to the old ones), short 8", "--max-surge 0 --max-unavailable 1"},
		},
		{
			name: "2x8 GPUs, both nodes full: auto replaces one pod at a time", cluster: fullNodes, rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2"))},
			want: VerdictSurgeBlocked, wantSurge: "0", wantUnav: "1",
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, "surge policy auto: Deployment web maxSurge 1→0, maxUnavailable 0→1 (nvidia.com/gpu: need 8, free 0 on nodes gpu-node-1, gpu-node-2)", r.Description())
				require.Len(t, r.Messages(), 1)
				assert.Contains(t, r.Messages()[0], "WARNING: surge policy auto")
				d := r.Deployments[0]
				assert.True(t, d.Adjusted)
				assert.Equal(t, map[string]string{"cpu": "1", "nvidia.com/gpu": "8", "pods": "1"}, d.PerPod)
				var replace *CapacityCheck
				for i, c := range d.Checks {
					if c.Step == StepReplace && c.Resource == "nvidia.com/gpu" {
						replace = &d.Checks[i]
					}
				}
				require.NotNil(t, replace, "the chosen step's checks are reported: %+v", d.Checks)
				assert.Equal(t, "8", replace.Free)
				assert.True(t, replace.OK)
			},
		},
		{
			name: "2x8 GPUs, both nodes full: off only reports", cluster: fullNodes, rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2"))},
			policies: []SurgePolicy{SurgePolicyOff}, want: VerdictSurgeBlocked,
			check: func(t *testing.T, r *Report) { assert.False(t, r.Changed()) },
		},
		{
			name: "a pod asking 16 GPUs is impossible", cluster: fullNodes, rendered: []runtime.Object{pfDeploy("web", 2, 16)},
			policies: []SurgePolicy{SurgePolicyAuto, SurgePolicyStrict}, want: VerdictImpossible,
			wantErr: []string{"(impossible, 2 replicas): one pod needs more than any matching node has allocatable", "nvidia.com/gpu: need 16, free 8 on allocatable of the largest matching node gpu-node-1, short 8"},
		},
		{
			name: "a pod asking 16 GPUs: off does not refuse", cluster: fullNodes, rendered: []runtime.Object{pfDeploy("web", 2, 16)},
			policies: []SurgePolicy{SurgePolicyOff}, want: VerdictImpossible,
		},
		{
			name:     "3x1 GPU with room: no change",
			cluster:  append([]runtime.Object{pfNode("gpu-node-1"), pfDeploy("small", 3, 1)}, pfOldPods(pfDeploy("small", 3, 1), "gpu-node-1", "gpu-node-1", "gpu-node-1")...),
			rendered: []runtime.Object{pfDeploy("small", 3, 1, image("v2"))}, policies: []SurgePolicy{SurgePolicyAuto, SurgePolicyStrict}, want: VerdictFits,
			check: func(t *testing.T, r *Report) {
				assert.False(t, r.Changed())
				assert.Empty(t, r.Description())
				gpu := r.Deployments[0].Checks[0]
				assert.Equal(t, CapacityCheck{Step: StepSurge, Pods: 1, Resource: "nvidia.com/gpu", Needed: "1", Free: "5",
					Where: "nodes gpu-node-1 (1 surge pod next to the old ones)", Nodes: []string{"gpu-node-1"}, MostOnOneNode: "5", OK: true}, gpu)
			},
		},
		{
			name:     "per-node fit: 8 free GPUs split 4+4 do not hold an 8-GPU pod",
			cluster:  []runtime.Object{pfNode("a"), pfNode("b"), pfPod("x", "a", 4, nil), pfPod("y", "b", 4, nil)},
			rendered: []runtime.Object{one}, policies: []SurgePolicy{SurgePolicyAuto, SurgePolicyStrict}, want: VerdictImpossible,
			wantErr: []string{"a new Deployment needs room for all its pods (1) at once", "nvidia.com/gpu: need 8, free 0 on nodes a, b (1 new pod), short 8 (at most 4 free on one node)"},
		},
		{
			name:    "terminating pods still hold their node",
			cluster: []runtime.Object{pfNode("a"), pfPod("x", "a", 8, nil, terminating)}, rendered: []runtime.Object{one},
			want: VerdictImpossible, wantErr: []string{"nvidia.com/gpu: need 8, free 0"},
			check: func(t *testing.T, r *Report) {
				assert.Contains(t, r.Notes, "pods being deleted still count against their nodes until they are gone: 1")
			},
		},
		{
			name: "completed pods hold nothing", cluster: []runtime.Object{pfNode("a"), pfPod("x", "a", 8, nil, succeeded)},
			rendered: []runtime.Object{one}, want: VerdictFits,
		},
		{
			name: "NotReady and cordoned nodes are left out",
			cluster: []runtime.Object{
				pfNode("sick", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }),
				pfNode("cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true }),
			},
			rendered: []runtime.Object{one}, want: VerdictImpossible,
			wantErr: []string{"no Ready, schedulable node matches"},
			check: func(t *testing.T, r *Report) {
				assert.Contains(t, r.Notes, "nodes left out: cordoned unschedulable (cordoned), sick NotReady")
			},
		},
		{
			name: "tainted free node needs a toleration",
			cluster: []runtime.Object{pfNode("a", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
			})},
			rendered: []runtime.Object{one}, want: VerdictImpossible, wantErr: []string{"no Ready, schedulable node matches"},
		},
		{
			name: "tolerated taint",
			cluster: []runtime.Object{pfNode("a", func(n *corev1.Node) {
				n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
			})},
			rendered: []runtime.Object{pfDeploy("one", 1, 8, func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
			})},
			want: VerdictFits,
		},
		{
			name:    "nodeSelector keeps pods off the free node",
			cluster: []runtime.Object{pfNode("a"), pfNode("b"), pfPod("x", "a", 8, nil)},
			rendered: []runtime.Object{pfDeploy("one", 1, 8, func(d *appsv1.Deployment) {
				d.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "a"}
			})},
			want: VerdictImpossible, wantErr: []string{"nvidia.com/gpu: need 8, free 0 on nodes a (1 new pod)"},
		},
		{
			name:     "quota: 2x2 GPUs using all 4 of the quota, maxSurge 1: strict names the quota",
			cluster:  append([]runtime.Object{pfNode("a"), gpuQuota("gpu-quota", 4, 4), pfDeploy("q", 2, 2)}, pfOldPods(pfDeploy("q", 2, 2), "a", "a")...),
			rendered: []runtime.Object{pfDeploy("q", 2, 2, image("v2"))}, policies: []SurgePolicy{SurgePolicyStrict}, want: VerdictSurgeBlocked,
			wantErr: []string{"requests.nvidia.com/gpu: need 2, free 0 on quota gpu-quota (hard 4, used 4; 1 surge pod next to the old ones), short 2"},
		},
		{
			name:     "quota: auto replaces in place",
			cluster:  append([]runtime.Object{pfNode("a"), gpuQuota("gpu-quota", 4, 4), pfDeploy("q", 2, 2)}, pfOldPods(pfDeploy("q", 2, 2), "a", "a")...),
			rendered: []runtime.Object{pfDeploy("q", 2, 2, image("v2"))}, want: VerdictSurgeBlocked, wantSurge: "0", wantUnav: "1",
			check: func(t *testing.T, r *Report) {
				assert.Contains(t, r.Description(), "maxSurge 1→0, maxUnavailable 0→1 (requests.nvidia.com/gpu: need 2, free 0 on quota gpu-quota)")
			},
		},
		{
			name:     "quota whose hard limit is below one pod",
			cluster:  []runtime.Object{pfNode("a"), gpuQuota("tiny", 1, 0)},
			rendered: []runtime.Object{pfDeploy("q", 2, 2)}, policies: []SurgePolicy{SurgePolicyAuto, SurgePolicyStrict}, want: VerdictImpossible,
			wantErr: []string{"one pod needs more than the hard limit of quota tiny", "requests.nvidia.com/gpu: need 2, free 1 on hard limit of quota tiny, short 1"},
		},
		{
			name: "a pod-count quota",
			cluster: append([]runtime.Object{pfNode("a"), pfDeploy("q", 2, 1), &corev1.ResourceQuota{
				ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: pfNS},
				Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/pods": resource.MustParse("2"), "limits.cpu": resource.MustParse("1")}},
				Status:     corev1.ResourceQuotaStatus{Used: corev1.ResourceList{"count/pods": resource.MustParse("2")}},
			}}, pfOldPods(pfDeploy("q", 2, 1), "a", "a")...),
			rendered: []runtime.Object{pfDeploy("q", 2, 1, image("v2"))}, policies: []SurgePolicy{SurgePolicyStrict}, want: VerdictSurgeBlocked,
			wantErr: []string{"count/pods: need 1, free 0 on quota pods (hard 2, used 2; 1 surge pod next to the old ones), short 1"},
			check: func(t *testing.T, r *Report) {
				for _, c := range r.Deployments[0].Checks {
					assert.NotEqual(t, "limits.cpu", c.Resource, "pods without cpu limits do not count against limits.cpu")
				}
			},
		},
		{
			name: "quota scoped to BestEffort pods does not count GPU pods",
			cluster: []runtime.Object{pfNode("a"), func() *corev1.ResourceQuota {
				q := gpuQuota("be", 0, 0)
				q.Spec.Scopes = []corev1.ResourceQuotaScope{"BestEffort"}
				return q
			}()},
			rendered: []runtime.Object{pfDeploy("q", 2, 2)}, want: VerdictFits,
		},
		{
			// QoS counts cpu and memory only: a pod whose only resource
			// is a GPU is BestEffort, and the API server admits it under
			// a NotBestEffort quota whatever that quota's GPU limit.
			name: "quota scoped to NotBestEffort pods does not count a GPU-only pod",
			cluster: []runtime.Object{pfNode("a"), func() *corev1.ResourceQuota {
				q := gpuQuota("not-be", 0, 0)
				q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}
				return q
			}()},
			rendered: []runtime.Object{pfDeploy("q", 2, 2, func(d *appsv1.Deployment) {
				delete(d.Spec.Template.Spec.Containers[0].Resources.Requests, corev1.ResourceCPU)
			})},
			policies: []SurgePolicy{SurgePolicyStrict}, want: VerdictFits,
		},
		{
			name:     "PDB allowing no disruption stops auto",
			cluster:  fullNodes,
			rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2")), pdb("web", ptr.To(intstr.FromInt32(2)), nil, "web")},
			want:     VerdictSurgeBlocked, wantErr: []string{"needs more than 0 unavailable at once (PodDisruptionBudget web allows 0 of 2 pods down)"},
		},
		{
			name:     "live PDB allowing one disruption lets auto proceed",
			cluster:  append(fullNodes[:len(fullNodes):len(fullNodes)], pdb("web-pdb", nil, ptr.To(intstr.FromInt32(1)), "web")),
			rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2"))}, want: VerdictSurgeBlocked, wantSurge: "0", wantUnav: "1",
		},
		{
			name: "live PDB of this release that is not rendered is about to be pruned",
			cluster: append(fullNodes[:len(fullNodes):len(fullNodes)], func() runtime.Object {
				b := pdb("old", ptr.To(intstr.FromString("100%")), nil, "web")
				b.Labels = map[string]string{owner.LabelManagedBy: owner.ManagedByVllmctl, owner.LabelRelease: "rel"}
				return b
			}()),
			opts:     Options{Release: "rel"},
			rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2"))}, want: VerdictSurgeBlocked, wantSurge: "0", wantUnav: "1",
		},
		{
			name:     "a single replica is never taken down by auto",
			cluster:  append([]runtime.Object{pfNode("a"), one}, pfOldPods(one, "a")...),
			rendered: []runtime.Object{pfDeploy("one", 1, 8, image("v2"))}, want: VerdictSurgeBlocked,
			wantErr: []string{"with 1 replica, maxUnavailable 1 takes the service down"},
		},
		{
			name: "new pods twice the size need two old pods gone",
			cluster: append([]runtime.Object{pfNode("a"), pfDeploy("w", 4, 2)},
				pfOldPods(pfDeploy("w", 4, 2), "a", "a", "a", "a")...), // 8 of 8 GPUs used
			rendered: []runtime.Object{pfDeploy("w", 4, 4, image("v2"))}, want: VerdictSurgeBlocked, wantSurge: "0", wantUnav: "2",
		},
		{
			name: "surge does not fit but maxUnavailable 25% already replaces in place",
			cluster: append([]runtime.Object{pfNode("a"), pfDeploy("w", 4, 2, strategy("25%", "25%"))},
				pfOldPods(pfDeploy("w", 4, 2), "a", "a", "a", "a")...),
			rendered: []runtime.Object{pfDeploy("w", 4, 2, image("v2"), strategy("25%", "25%"))},
			policies: []SurgePolicy{SurgePolicyAuto, SurgePolicyStrict}, want: VerdictFits,
			check: func(t *testing.T, r *Report) {
				assert.Contains(t, r.Deployments[0].Message, "replacing up to 1 old pods at a time")
				assert.False(t, r.Changed())
			},
		},
		{
			name: "only one of two surge pods fits: the rollout still progresses",
			cluster: append([]runtime.Object{pfNode("a"), pfDeploy("w", 3, 2, strategy("2", "0"))},
				pfOldPods(pfDeploy("w", 3, 2), "a", "a", "a")...),
			rendered: []runtime.Object{pfDeploy("w", 3, 2, image("v2"), strategy("2", "0"))},
			policies: []SurgePolicy{SurgePolicyStrict}, want: VerdictFits,
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, "1 of 2 surge pods fit now; the others wait for old pods to go", r.Deployments[0].Message)
			},
		},
		{
			name: "a maxSurge far beyond the replicas adds no more surge pods than there are old ones",
			cluster: append([]runtime.Object{pfNode("a"), pfDeploy("w", 3, 2, strategy("1000%", "0"))},
				pfOldPods(pfDeploy("w", 3, 2), "a", "a", "a")...), // 6 of 8 GPUs used
			rendered: []runtime.Object{pfDeploy("w", 3, 2, image("v2"), strategy("1000%", "0"))},
			policies: []SurgePolicy{SurgePolicyStrict}, want: VerdictFits,
			check: func(t *testing.T, r *Report) {
				d := r.Deployments[0]
				assert.Equal(t, int32(30), d.Strategy.Surge, "as the controller resolves it")
				assert.Equal(t, "1 of 3 surge pods fit now; the others wait for old pods to go", d.Message)
				require.NotEmpty(t, d.Checks)
				assert.Equal(t, "6", d.Checks[0].Needed, "3 surge pods of 2 GPUs, not 30")
			},
		},
		{
			name: "HPA-targeted Deployment uses the live replica count",
			cluster: append([]runtime.Object{pfNode("a"), pfNode("b"), pfDeploy("web", 5, 1),
				&autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: pfNS},
					Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 8,
						ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}},
				pfOldPods(pfDeploy("web", 5, 1), "a", "a", "a", "b", "b")...),
			rendered: []runtime.Object{pfDeploy("web", 1, 1, image("v2"), strategy("25%", "0"), func(d *appsv1.Deployment) { d.Spec.Replicas = nil })},
			want:     VerdictFits,
			check: func(t *testing.T, r *Report) {
				d := r.Deployments[0]
				assert.Equal(t, int32(5), d.Replicas)
				assert.Equal(t, "live (HorizontalPodAutoscaler web)", d.ReplicasFrom)
				assert.Equal(t, int32(2), d.Strategy.Surge, "25% of 5 rounds up")
				assert.Equal(t, "2", d.Checks[0].Needed)
			},
		},
		{
			name:     "rendered HPA of a new Deployment: minReplicas",
			cluster:  []runtime.Object{pfNode("a")},
			rendered: []runtime.Object{pfDeploy("web", 1, 4), pfHPA("web", 3)}, want: VerdictImpossible,
			wantErr: []string{"a new Deployment needs room for all its pods (3) at once", "nvidia.com/gpu: need 12, free 8 on nodes a (3 new pods), short 4"},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, int32(3), r.Deployments[0].Replicas)
				assert.Equal(t, "HorizontalPodAutoscaler web minReplicas", r.Deployments[0].ReplicasFrom)
			},
		},
		{
			name:     "overrides are applied and checked",
			cluster:  fullNodes,
			rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2"))},
			opts:     Options{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromString("50%"))},
			policies: []SurgePolicy{SurgePolicyAuto, SurgePolicyStrict}, want: VerdictFits, wantSurge: "0", wantUnav: "50%",
			check: func(t *testing.T, r *Report) {
				assert.True(t, r.Deployments[0].Overridden)
				assert.Equal(t, "strategy override: Deployment web maxSurge 1→0, maxUnavailable 0→50%", r.Description())
			},
		},
		{
			name:     "auto does not change what the user set",
			cluster:  fullNodes,
			rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2"))},
			opts:     Options{MaxSurge: ptr.To(intstr.FromInt32(2))},
			want:     VerdictSurgeBlocked, wantSurge: "2", wantUnav: "0", wantErr: []string{"the surge policy does not change values the user set"},
		},
		{
			name:     "overrides already in the objects still count as the user's",
			cluster:  fullNodes,
			rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2"), strategy("2", "0"))},
			opts:     Options{MaxSurge: ptr.To(intstr.FromInt32(2))},
			want:     VerdictSurgeBlocked, wantErr: []string{"the surge policy does not change values the user set"},
			check: func(t *testing.T, r *Report) {
				assert.True(t, r.Deployments[0].Overridden)
				assert.Empty(t, r.Description())
			},
		},
		{
			name: "Deployments share the room: the second one is blocked",
			cluster: append([]runtime.Object{pfNode("a"), pfNode("b"), pfNode("c"), pfDeploy("x", 1, 8), pfDeploy("y", 1, 8)},
				append(pfOldPods(pfDeploy("x", 1, 8), "a"), pfOldPods(pfDeploy("y", 1, 8), "b")...)...),
			rendered: []runtime.Object{pfDeploy("x", 1, 8, image("v2")), pfDeploy("y", 1, 8, image("v2"))},
			policies: []SurgePolicy{SurgePolicyStrict}, want: VerdictFits,
			wantErr: []string{"Deployment llm/y (surge-blocked"},
			check: func(t *testing.T, r *Report) {
				assert.Equal(t, VerdictSurgeBlocked, r.Deployments[1].Verdict)
			},
		},
		{
			name:    "Recreate needs room once the old pods are gone",
			cluster: fullNodes,
			rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2"), func(d *appsv1.Deployment) {
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
			})},
			want: VerdictFits,
		},
		{
			name:     "nodes not readable: quotas only, with a note",
			cluster:  fullNodes,
			rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2"))},
			clientMods: func(c *fake.Clientset) {
				c.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no"))
				})
			},
			policies: []SurgePolicy{SurgePolicyStrict}, want: VerdictFits,
			check: func(t *testing.T, r *Report) {
				require.NotEmpty(t, r.Notes)
				assert.Contains(t, r.Notes[0], "nodes not readable")
			},
		},
		{
			name:     "a failing dry run counts the template as changed",
			cluster:  fullNodes,
			rendered: []runtime.Object{pfDeploy("web", 2, 8)},
			clientMods: func(c *fake.Clientset) {
				c.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewBadRequest("nope")
				})
			},
			policies: []SurgePolicy{SurgePolicyStrict}, want: VerdictSurgeBlocked, wantErr: []string{"nvidia.com/gpu: need 8, free 0"},
			check: func(t *testing.T, r *Report) {
				assert.Contains(t, r.Notes[0], "its pod template is taken as changed")
			},
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
				var buf bytes.Buffer
				require.NoError(t, r.Print(&buf))
				assert.Contains(t, buf.String(), "DEPLOYMENT")
				_, err = json.Marshal(r)
				require.NoError(t, err)
			})
		}
	}
}

func pfHPA(target string, minReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: target, Namespace: pfNS},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To(minReplicas), MaxReplicas: 8,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target}},
	}
}

func TestPreflightInputErrors(t *testing.T) {
	recreate := pfDeploy("web", 2, 1, func(d *appsv1.Deployment) {
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	})
	tests := []struct {
		name string
		dep  *appsv1.Deployment
		opts Options
		want string
	}{
		{name: "overrides on Recreate", dep: recreate, opts: Options{MaxSurge: ptr.To(intstr.FromInt32(1))}, want: "uses the Recreate strategy"},
		{name: "both zero", dep: pfDeploy("web", 2, 1), opts: Options{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromString("0%"))}, want: "may not both be 0"},
		{name: "bad policy", dep: pfDeploy("web", 2, 1), opts: Options{Policy: "sometimes"}, want: "invalid surge policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Namespace = pfNS
			_, err := Run(context.Background(), pfClient(pfNode("a")), []*unstructured.Unstructured{pfUnstructured(t, tt.dep)}, tt.opts)
			var ie *StrategyInputError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, 2, ie.ExitCode())
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestPreflightSkip(t *testing.T) {
	c := pfClient()
	dep := pfUnstructured(t, pfDeploy("web", 2, 8))
	r, err := Run(context.Background(), c, []*unstructured.Unstructured{dep},
		Options{Namespace: pfNS, Skip: true, MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1))})
	require.NoError(t, err)
	assert.Empty(t, c.Actions(), "a skipped preflight reads nothing")
	assert.True(t, r.Skipped)
	require.Len(t, r.Deployments, 1)
	assert.Equal(t, VerdictUnchecked, r.Deployments[0].Verdict)
	require.NotNil(t, r.Deployments[0].Effective)
	out, err := ApplyOverrides([]*unstructured.Unstructured{dep}, r)
	require.NoError(t, err)
	surge, _, _ := unstructured.NestedFieldNoCopy(out[0].Object, "spec", "strategy", "rollingUpdate", "maxSurge")
	assert.Equal(t, int64(0), surge)
}

func TestApplyOverrides(t *testing.T) {
	manifest := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template: {spec: {containers: [{name: c, image: i}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: other, namespace: elsewhere}
spec:
  template: {spec: {containers: [{name: c, image: i}]}}
---
apiVersion: v1
kind: Service
metadata: {name: web}
`
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(manifest), 4096)
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			break
		}
		objs = append(objs, o)
	}
	require.Len(t, objs, 3)
	before := objs[0].DeepCopy()
	report := &Report{namespace: pfNS, Deployments: []DeploymentPreflight{
		{Namespace: pfNS, Name: "web", Effective: &Strategy{Type: "RollingUpdate", MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromString("50%"))}},
		{Namespace: pfNS, Name: "other", Effective: &Strategy{Type: "RollingUpdate", MaxSurge: ptr.To(intstr.FromInt32(0))}},
	}}
	out, err := ApplyOverrides(objs, report)
	require.NoError(t, err)
	require.Len(t, out, 3)
	ru, _, _ := unstructured.NestedMap(out[0].Object, "spec", "strategy", "rollingUpdate")
	assert.Equal(t, map[string]any{"maxSurge": int64(0), "maxUnavailable": "50%"}, ru)
	assert.Equal(t, before, objs[0], "the input is not modified")
	assert.Same(t, objs[1], out[1], "a Deployment of another namespace is not the report's")
	assert.Same(t, objs[2], out[2])

	same, err := ApplyOverrides(objs, nil)
	require.NoError(t, err)
	assert.Equal(t, objs, same)
}

func TestPreflightPrint(t *testing.T) {
	web := pfDeploy("web", 2, 8)
	cluster := append([]runtime.Object{pfNode("gpu-node-1"), pfNode("gpu-node-2"), web}, pfOldPods(web, "gpu-node-1", "gpu-node-2")...)
	r, err := runPreflight(t, pfCase{cluster: cluster, rendered: []runtime.Object{pfDeploy("web", 2, 8, image("v2")), pfDeploy("new", 1, 0, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	})}}, SurgePolicyAuto)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, r.Print(&buf))
	want := `DEPLOYMENT  RESOURCE        NEEDED  FREE  WHERE                                                            VERDICT
web         nvidia.com/gpu  8       0     nodes gpu-node-1, gpu-node-2 (1 surge pod next to the old ones)  surge-blocked
web         nvidia.com/gpu  8       8     nodes gpu-node-1, gpu-node-2 (1 new pod after removing 1 old)    surge-blocked
new         pods            1       62    nodes gpu-node-1, gpu-node-2 (1 new pod)                         fits
web: surge policy auto: Deployment web maxSurge 1→0, maxUnavailable 0→1 (nvidia.com/gpu: need 8, free 0 on nodes gpu-node-1, gpu-node-2)
`
	assert.Equal(t, want, buf.String())

	data, err := json.Marshal(r)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, "auto", back["policy"])
	deps := back["deployments"].([]any)
	first := deps[0].(map[string]any)
	assert.Equal(t, "surge-blocked", first["verdict"])
	assert.Equal(t, map[string]any{"type": "RollingUpdate", "maxSurge": float64(0), "maxUnavailable": float64(1), "surge": float64(0), "unavailable": float64(1)}, first["effective"])
}

func TestQuotaKeys(t *testing.T) {
	per := usageOf(&pfDeploy("x", 1, 2, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
	}).Spec.Template.Spec)
	tests := map[corev1.ResourceName]string{
		"requests.nvidia.com/gpu": "2", "cpu": "1", "requests.cpu": "1", "pods": "1", "count/pods": "1",
		"limits.memory": "1Gi", "limits.nvidia.com/gpu": "2", "requests.memory": "1Gi", "limits.cpu": "0",
	}
	for key, want := range tests {
		k, ok := quotaKeyOf(key)
		require.True(t, ok, key)
		assert.Equal(t, want, formatAmount(k.name, per.amount(k)), key)
	}
	for _, key := range []corev1.ResourceName{"services", "requests.storage", "count/deployments.apps"} {
		_, ok := quotaKeyOf(key)
		assert.False(t, ok, key)
	}
}

func TestPreflightRenderedQuotas(t *testing.T) {
	web := pfDeploy("web", 2, 2)
	cluster := append([]runtime.Object{pfNode("a"), web, gpuQuota("gpu-quota", 8, 4)}, pfOldPods(web, "a", "a")...)
	lowered := gpuQuota("gpu-quota", 4, 0)
	lowered.Status = corev1.ResourceQuotaStatus{}
	fresh := gpuQuota("new-quota", 5, 0)
	fresh.Status = corev1.ResourceQuotaStatus{}
	tests := []struct {
		name  string
		quota *corev1.ResourceQuota
		want  string
	}{
		{name: "a rendered quota's hard limit replaces the live one's", quota: lowered,
			want: "requests.nvidia.com/gpu: need 2, free 0 on quota gpu-quota (hard 4, used 4; 1 surge pod next to the old ones), short 2"},
		{name: "a quota not created yet counts the pods already there", quota: fresh,
			want: "requests.nvidia.com/gpu: need 2, free 1 on quota new-quota (hard 5, used 4; 1 surge pod next to the old ones), short 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.quota.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"}
			_, err := runPreflight(t, pfCase{cluster: cluster, rendered: []runtime.Object{tt.quota, pfDeploy("web", 2, 2, image("v2"))}}, SurgePolicyStrict)
			preflightErr := &Error{}
			require.ErrorAs(t, err, &preflightErr)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestPreflightChartGolden runs the preflight on the vllm chart's rendering
// with 4 GPUs per pod on H100 nodes, a ResourceQuota and a PDB.
func TestPreflightChartGolden(t *testing.T) {
	data, err := os.ReadFile("../../charts/testdata/golden/vllm-gpu4.yaml")
	require.NoError(t, err)
	objs, err := parseManifest(string(data))
	require.NoError(t, err)
	h100 := func(n *corev1.Node) {
		n.Labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
		n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	}
	ctx := context.Background()

	r, err := Run(ctx, pfClient(pfNode("a100")), objs, Options{Namespace: "inference"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no Ready, schedulable node matches the pod's nodeSelector")
	require.NotNil(t, r)

	r, err = Run(ctx, pfClient(pfNode("h1", h100), pfNode("h2", h100)), objs, Options{Namespace: "inference", Policy: SurgePolicyStrict})
	require.NoError(t, err)
	require.Len(t, r.Deployments, 1)
	d := r.Deployments[0]
	assert.Equal(t, ChangeNew, d.Change)
	assert.Equal(t, VerdictFits, d.Verdict)
	var quotaRow *CapacityCheck
	for i, c := range d.Checks {
		if c.Quota != "" && c.Resource == "requests.nvidia.com/gpu" {
			quotaRow = &d.Checks[i]
		}
	}
	require.NotNil(t, quotaRow, "the rendered quota is checked: %+v", d.Checks)
	assert.Equal(t, "8", quotaRow.Needed)
	assert.Equal(t, "16", quotaRow.Free)
	var buf bytes.Buffer
	require.NoError(t, r.Print(&buf))
	t.Log("\n" + buf.String())
}

// parseManifest parses a "---" separated YAML stream as cluster.ParseManifest
// does (this package cannot import release), skipping empty documents.
func parseManifest(manifest string) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
}

// TestParseMaxUnavailable: a --max-unavailable percentage over 100% is
// refused (exit 2) whatever the release (grouped ones included), as is a
// negative value; --max-surge percentages may exceed 100%.
func TestParseMaxUnavailable(t *testing.T) {
	cases := []struct {
		value string
		want  *intstr.IntOrString
		says  string
	}{
		{value: "100%", want: ptr.To(intstr.FromString("100%"))},
		{value: "0%", want: ptr.To(intstr.FromString("0%"))},
		{value: "3", want: ptr.To(intstr.FromInt32(3))},
		{value: "101%", says: `invalid --max-unavailable "101%": a percentage may not be more than 100%`},
		{value: "150%", says: "more than 100%"},
		{value: "-1%", says: "want a non-negative integer or a percentage"},
		{value: "-1", says: "want a non-negative integer or a percentage"},
	}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			v, err := ParseMaxUnavailable("--max-unavailable", tc.value)
			if tc.says == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.want, v)
				return
			}
			var ie *StrategyInputError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, 2, ie.ExitCode())
			assert.Contains(t, err.Error(), tc.says)
		})
	}
	v, err := ParseIntOrPercent("--max-surge", "200%")
	require.NoError(t, err, "a surge may exceed 100%")
	assert.Equal(t, intstr.FromString("200%"), *v)
}
