package diff

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

func TestStripNoise(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "server metadata and status",
			in: `apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  namespace: ns
  uid: 1234
  resourceVersion: "9"
  generation: 2
  creationTimestamp: "2030-01-01T00:00:00Z"
  selfLink: /api/v1/namespaces/ns/configmaps/c
  managedFields: [{manager: vllmctl}]
  labels: {a: b}
data: {k: v}
status: {x: y}
`,
			want: `apiVersion: v1
kind: ConfigMap
metadata:
  name: c
  namespace: ns
  labels: {a: b}
data: {k: v}
`,
		},
		{
			name: "noise annotations go, others stay",
			in: `apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  annotations:
    deployment.kubernetes.io/revision: "4"
    kubectl.kubernetes.io/last-applied-configuration: "{}"
    team: inference
`,
			want: `apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  annotations:
    team: inference
`,
		},
		{
			name: "annotations left empty are dropped",
			in: `apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  annotations:
    deployment.kubernetes.io/revision: "4"
`,
			want: `apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
`,
		},
		{
			name: "spec is never touched",
			in: `apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  replicas: 2
  template:
    spec:
      containers: [{name: c, image: i, imagePullPolicy: IfNotPresent, terminationMessagePath: /dev/termination-log}]
`,
			want: `apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  replicas: 2
  template:
    spec:
      containers: [{name: c, image: i, imagePullPolicy: IfNotPresent, terminationMessagePath: /dev/termination-log}]
`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := obj(t, tc.in)
			orig := in.DeepCopy()
			assert.Equal(t, obj(t, tc.want).Object, StripNoise(in))
			assert.Equal(t, orig, in, "the input is not modified")
		})
	}
	assert.Nil(t, StripNoise(nil))
}

func TestStripAllocated(t *testing.T) {
	svc := func(extra string) map[string]any {
		return obj(t, "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports: [{port: 80}]\n"+extra).Object
	}
	got := svc("  clusterIP: 10.0.0.0\n  clusterIPs: [10.0.0.0]\n")
	stripAllocated(got, &unstructured.Unstructured{Object: svc("")})
	assert.Equal(t, svc(""), got, "placeholder IPs of a dry-run create go")

	got = svc("  clusterIP: None\n  clusterIPs: [None]\n")
	stripAllocated(got, &unstructured.Unstructured{Object: svc("  clusterIP: None\n")})
	assert.Equal(t, svc("  clusterIP: None\n"), got, "a rendered clusterIP stays")
}

func TestMaskSecrets(t *testing.T) {
	secret := func(data map[string]string, stringData map[string]string) map[string]any {
		o := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}}
		if data != nil {
			d := map[string]any{}
			for k, v := range data {
				d[k] = b64(v)
			}
			o["data"] = d
		}
		if stringData != nil {
			d := map[string]any{}
			for k, v := range stringData {
				d[k] = v
			}
			o["stringData"] = d
		}
		return o
	}
	markers := func(o map[string]any) map[string]any {
		if o == nil {
			return nil
		}
		d, _ := o["data"].(map[string]any)
		out := map[string]any{}
		for k, v := range d {
			out[k] = unmask(v.(string))
		}
		return out
	}
	cases := []struct {
		name                  string
		before, after         map[string]any
		wantBefore, wantAfter map[string]any
	}{
		{
			name:       "per-key markers",
			before:     secret(map[string]string{"same": "a1", "chg": "old", "gone": "x"}, nil),
			after:      secret(map[string]string{"same": "a1", "chg": "new", "new": "y"}, nil),
			wantBefore: map[string]any{"same": MarkerUnchanged, "chg": MarkerChanged, "gone": MarkerRemoved},
			wantAfter:  map[string]any{"same": MarkerUnchanged, "chg": MarkerChanged, "new": MarkerAdded},
		},
		{
			name:      "create",
			after:     secret(map[string]string{"k": "v"}, nil),
			wantAfter: map[string]any{"k": MarkerAdded},
		},
		{
			name:       "prune",
			before:     secret(map[string]string{"k": "v"}, nil),
			wantBefore: map[string]any{"k": MarkerRemoved},
		},
		{
			name:       "stringData folds into data",
			before:     secret(map[string]string{"k": "v", "j": "1"}, nil),
			after:      secret(map[string]string{"j": "2"}, map[string]string{"k": "v"}),
			wantBefore: map[string]any{"k": MarkerUnchanged, "j": MarkerChanged},
			wantAfter:  map[string]any{"k": MarkerUnchanged, "j": MarkerChanged},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			MaskSecrets(tc.before, tc.after)
			if tc.before != nil {
				assert.Equal(t, tc.wantBefore, markers(tc.before))
				assert.NotContains(t, tc.before, "stringData")
			}
			if tc.after != nil {
				assert.Equal(t, tc.wantAfter, markers(tc.after))
				assert.NotContains(t, tc.after, "stringData")
			}
		})
	}

	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"}}
	MaskSecrets(cm, nil)
	assert.Equal(t, map[string]any{"k": "v"}, cm["data"], "only Secrets are masked")
}

func TestResolveFenceposts(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { return ptr.To(intstr.FromString(s)) }
	num := func(n int) *intstr.IntOrString { return ptr.To(intstr.FromInt32(int32(n))) }
	cases := []struct {
		name                   string
		surge, unavailable     *intstr.IntOrString
		desired                int32
		wantSurge, wantUnavail int32
	}{
		{"integers", num(1), num(0), 4, 1, 0},
		{"25% of 4", pct("25%"), pct("25%"), 4, 1, 1},
		{"surge rounds up", pct("25%"), pct("0%"), 2, 1, 0},
		{"unavailable rounds down", pct("0%"), pct("49%"), 3, 0, 1},
		{"unavailable rounds down to 0 then becomes 1", num(0), pct("10%"), 5, 0, 1},
		{"surge 10% of 1 is 1", pct("10%"), num(0), 1, 1, 0},
		{"33% of 10", pct("33%"), pct("33%"), 10, 4, 3},
		{"defaults are 25%", nil, nil, 10, 3, 2},
		{"zero replicas", pct("25%"), pct("25%"), 0, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, u, err := resolveFenceposts(tc.surge, tc.unavailable, tc.desired)
			require.NoError(t, err)
			assert.Equal(t, tc.wantSurge, s, "surge")
			assert.Equal(t, tc.wantUnavail, u, "unavailable")
		})
	}
	_, _, err := resolveFenceposts(pct("lots"), nil, 2)
	assert.Error(t, err)
}

func TestPodGPUs(t *testing.T) {
	gpu := func(n int64) corev1.ResourceRequirements {
		q := *resource.NewQuantity(n, resource.DecimalSI)
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{vllm.GPUResource: q}}
	}
	req := func(n int64) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{vllm.GPUResource: *resource.NewQuantity(n, resource.DecimalSI)}}
	}
	cases := []struct {
		name string
		spec corev1.PodSpec
		want int64
	}{
		{"none", corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}, 0},
		{"sum of containers", corev1.PodSpec{Containers: []corev1.Container{{Resources: gpu(2)}, {Resources: gpu(1)}}}, 3},
		{"requests without limits", corev1.PodSpec{Containers: []corev1.Container{{Resources: req(4)}}}, 4},
		{"a bigger init container", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: gpu(4)}},
			Containers:     []corev1.Container{{Resources: gpu(1)}},
		}, 4},
		{"sidecars add up", corev1.PodSpec{
			InitContainers: []corev1.Container{{Resources: gpu(1), RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers:     []corev1.Container{{Resources: gpu(1)}},
		}, 2},
		{"an init container runs beside the sidecars started before it", corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Resources: gpu(1), RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
				{Resources: gpu(2)},
			},
			Containers: []corev1.Container{{Resources: gpu(1)}},
		}, 3},
		{"limits and requests mixed across containers", corev1.PodSpec{Containers: []corev1.Container{{Resources: gpu(1)}, {Resources: req(2)}}}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, PodGPUs(&tc.spec))
		})
	}
}

func TestRolloutString(t *testing.T) {
	cases := []struct {
		r    Rollout
		want string
	}{
		{Rollout{Strategy: "RollingUpdate", Pods: 2, MaxSurge: 1, GPUsPerPod: 1, ExtraGPUs: 1},
			"rolls out a new ReplicaSet: 2 pods, maxSurge 1, maxUnavailable 0, needs up to 1 extra GPU"},
		{Rollout{Strategy: "RollingUpdate", Pods: 4, MaxSurge: 1, MaxSurgeSpec: "25%", MaxUnavailable: 1, MaxUnavailableSpec: "25%", GPUsPerPod: 2, ExtraGPUs: 2},
			"rolls out a new ReplicaSet: 4 pods, maxSurge 1 (25%), maxUnavailable 1 (25%), needs up to 2 extra GPUs"},
		{Rollout{Strategy: "RollingUpdate", Pods: 1, MaxUnavailable: 1},
			"rolls out a new ReplicaSet: 1 pod, maxSurge 0, maxUnavailable 1, needs no extra GPUs"},
		{Rollout{Strategy: "Recreate", Pods: 3, GPUsPerPod: 1},
			"rolls out a new ReplicaSet: 3 pods, strategy Recreate (all old pods stop first), needs no extra GPUs"},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, tc.r.String())
	}
}

func TestRolloutOf(t *testing.T) {
	dep := func(image string, extra string) map[string]any {
		return obj(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  replicas: 3
`+extra+`
  template:
    spec:
      containers:
      - name: c
        image: `+image+`
        resources: {limits: {nvidia.com/gpu: 2}}
`).Object
	}
	r, err := rolloutOf(dep("a", ""), dep("a", ""))
	require.NoError(t, err)
	assert.Nil(t, r, "same template: no new ReplicaSet")

	r, err = rolloutOf(dep("a", ""), dep("b", "  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 50%, maxUnavailable: 0}}"))
	require.NoError(t, err)
	require.NotNil(t, r)
	assert.Equal(t, Rollout{Strategy: "RollingUpdate", Pods: 3, MaxSurge: 2, MaxSurgeSpec: "50%", GPUsPerPod: 2, ExtraGPUs: 4}, *r)

	r, err = rolloutOf(dep("a", ""), dep("b", "  strategy: {type: Recreate}"))
	require.NoError(t, err)
	assert.Equal(t, Rollout{Strategy: "Recreate", Pods: 3, GPUsPerPod: 2}, *r)

	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}
	r, err = rolloutOf(cm, cm)
	require.NoError(t, err)
	assert.Nil(t, r)
}

func TestUnified(t *testing.T) {
	lines := func(s ...string) []string {
		for i := range s {
			s[i] += "\n"
		}
		return s
	}
	a := lines("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l")
	b := lines("a", "b", "c", "d", "E", "f", "g", "h", "i", "j", "k", "l", "m")
	assert.Equal(t, "--- x\n+++ y\n"+
		"@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"+
		"@@ -10,3 +10,4 @@\n j\n k\n l\n+m\n", Unified(a, b, "x", "y", 3), "7 equal lines apart: two hunks")
	c := lines("a", "b", "c", "d", "E", "f", "g", "h", "i", "j", "K", "l")
	assert.Equal(t, "--- x\n+++ y\n"+
		"@@ -2,11 +2,11 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n i\n j\n-k\n+K\n l\n", Unified(a, c, "x", "y", 3), "6 apart: one hunk")
	assert.Equal(t, "", Unified(a, a, "x", "y", 3), "equal: no diff")
	assert.Equal(t, "--- x\n+++ y\n@@ -0,0 +1,2 @@\n+a\n+b\n", Unified(nil, lines("a", "b"), "x", "y", 3))
	assert.Equal(t, "--- x\n+++ y\n@@ -1 +0,0 @@\n-a\n", Unified(lines("a"), nil, "x", "y", 3))
	// Repeated lines (as YAML has) still give the minimal diff.
	rep := make([]string, 0, 400)
	for i := 0; i < 200; i++ {
		rep = append(rep, "  protocol: TCP\n", "  x\n")
	}
	changed := append(append([]string(nil), rep...), "end\n")
	assert.Equal(t, "--- x\n+++ y\n@@ -398,3 +398,4 @@\n   x\n   protocol: TCP\n   x\n+end\n", Unified(rep, changed, "x", "y", 3))
}
