package charts

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// renderVLLM renders the built-in vllm chart as release qwen in namespace
// inference with the multi-node golden values plus set.
func renderVLLM(t *testing.T, set ...string) (*Rendered, error) {
	t.Helper()
	ch, err := Load("vllm")
	require.NoError(t, err)
	return Render(ch, RenderOptions{
		ReleaseName: "qwen", Namespace: "inference",
		ValueFiles: []string{"testdata/values/multinode.yaml"}, Set: set,
	})
}

// objectsOf returns the rendered objects by Kind/name.
func objectsOf(r *Rendered) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range r.Objects {
		out[o.GetKind()+"/"+o.GetName()] = o
	}
	return out
}

func nestedString(t *testing.T, o *unstructured.Unstructured, fields ...string) string {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(o.Object, fields...)
	require.NoError(t, err)
	require.True(t, found, "%s: no %s", ObjectRef(o), strings.Join(fields, "."))
	s, ok := v.(string)
	require.True(t, ok, "%s: %s is %T, not a string", ObjectRef(o), strings.Join(fields, "."), v)
	return s
}

func nestedMap(t *testing.T, o map[string]any, fields ...string) map[string]any {
	t.Helper()
	v, found, err := unstructured.NestedMap(o, fields...)
	require.NoError(t, err)
	require.True(t, found, "no %s", strings.Join(fields, "."))
	return v
}

// serverContainer returns the server container of a pod spec.
func serverContainer(t *testing.T, spec map[string]any) map[string]any {
	t.Helper()
	items, _, err := unstructured.NestedSlice(spec, "containers")
	require.NoError(t, err)
	require.NotEmpty(t, items)
	c := items[0].(map[string]any)
	require.Equal(t, "server", c["name"])
	return c
}

func stringList(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, _ := it.(string)
		out = append(out, s)
	}
	return out
}

// flagValue returns the value after flag in args ("" when absent).
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func TestRenderMultiNodeStatefulSets(t *testing.T) {
	r, err := renderVLLM(t)
	require.NoError(t, err)
	objs := objectsOf(r)
	assert.Len(t, objs, 5, "two StatefulSets, two Services, a PDB")
	assert.NotContains(t, objs, "Deployment/qwen")

	selector := map[string]any{"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "qwen"}
	for i, group := range []string{"0", "1"} {
		name := "qwen-g" + group
		sts := objs["StatefulSet/"+name]
		require.NotNil(t, sts, "StatefulSet %s", name)
		leader := name + "-0.qwen-nodes.inference.svc"

		assert.Equal(t, group, sts.GetLabels()["vllmctl.io/group"])
		assert.Equal(t, "vllm", sts.GetLabels()["app.kubernetes.io/name"])
		replicas, _, _ := unstructured.NestedInt64(sts.Object, "spec", "replicas")
		assert.Equal(t, int64(2), replicas, "replicas = multiNode.nodes")
		assert.Equal(t, "Parallel", nestedString(t, sts, "spec", "podManagementPolicy"))
		assert.Equal(t, "qwen-nodes", nestedString(t, sts, "spec", "serviceName"))
		assert.Equal(t, "RollingUpdate", nestedString(t, sts, "spec", "updateStrategy", "type"))
		assert.Equal(t, "100%", nestedString(t, sts, "spec", "updateStrategy", "rollingUpdate", "maxUnavailable"))

		wantSelector := map[string]any{"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "qwen", "vllmctl.io/group": group}
		assert.Equal(t, wantSelector, nestedMap(t, sts.Object, "spec", "selector", "matchLabels"))
		podLabels := nestedMap(t, sts.Object, "spec", "template", "metadata", "labels")
		for k, v := range wantSelector {
			assert.Equal(t, v, podLabels[k], "pod label %s", k)
		}

		spec := nestedMap(t, sts.Object, "spec", "template", "spec")
		// One pod per node: required anti-affinity within the group, the
		// user's node affinity kept.
		anti, _, _ := unstructured.NestedSlice(spec, "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
		require.Len(t, anti, 1)
		term := anti[0].(map[string]any)
		assert.Equal(t, "kubernetes.io/hostname", term["topologyKey"])
		assert.Equal(t, wantSelector, nestedMap(t, term, "labelSelector", "matchLabels"))
		_, found, _ := unstructured.NestedSlice(spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
		assert.True(t, found, "the user's affinity is merged, not replaced")

		c := serverContainer(t, spec)
		env, _, _ := unstructured.NestedSlice(c, "env")
		require.NotEmpty(t, env)
		assert.Equal(t, map[string]any{"name": "VLLM_NODE_RANK", "valueFrom": map[string]any{
			"fieldRef": map[string]any{"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"},
		}}, env[0])

		args := stringList(c["args"])
		assert.Equal(t, "2", flagValue(args, "--nnodes"))
		assert.Equal(t, "$(VLLM_NODE_RANK)", flagValue(args, "--node-rank"))
		assert.Equal(t, leader, flagValue(args, "--master-addr"), "group %d", i)
		assert.Equal(t, "29500", flagValue(args, "--master-port"))
		assert.Equal(t, "mp", flagValue(args, "--distributed-executor-backend"))
		assert.Equal(t, "8", flagValue(args, "--tensor-parallel-size"), "as today: model.tensorParallelSize")
		assert.Equal(t, "--pipeline-parallel-size=2", args[len(args)-1], "extraArgs come last")
		assert.Equal(t, "Qwen/Qwen3-0.6B", flagValue(args, "--model"))
		// Workers add --headless: the wrapper does it when the rank is not 0.
		command := stringList(c["command"])
		require.Len(t, command, 4)
		assert.Equal(t, []string{"/bin/sh", "-c"}, command[:2])
		assert.Contains(t, command[2], `if [ "$VLLM_NODE_RANK" != 0 ]; then set -- "$@" --headless; fi; exec vllm serve "$@"`)
		assert.Equal(t, int64(8), nestedMap(t, c, "resources", "limits")["nvidia.com/gpu"])

		// Probes: the leader checks its own /health; workers succeed on
		// startup/liveness and are ready while their leader is.
		startup := strings.Join(stringList(nestedMap(t, c, "startupProbe", "exec")["command"]), " ")
		assert.Contains(t, startup, `[ "$VLLM_NODE_RANK" != 0 ] ||`)
		assert.Contains(t, startup, "http://127.0.0.1:8000/health")
		threshold, _, _ := unstructured.NestedInt64(c, "startupProbe", "failureThreshold")
		assert.Equal(t, int64(180), threshold, "the startup budget is kept")
		readiness := strings.Join(stringList(nestedMap(t, c, "readinessProbe", "exec")["command"]), " ")
		assert.Contains(t, readiness, "host="+leader)
		_, found, _ = unstructured.NestedMap(c, "livenessProbe")
		assert.False(t, found, "liveness stays off by default")
	}

	headless := objs["Service/qwen-nodes"]
	require.NotNil(t, headless)
	assert.Equal(t, "None", nestedString(t, headless, "spec", "clusterIP"))
	pub, _, _ := unstructured.NestedBool(headless.Object, "spec", "publishNotReadyAddresses")
	assert.True(t, pub)
	assert.Equal(t, selector, nestedMap(t, headless.Object, "spec", "selector"))

	svc := objs["Service/qwen"]
	require.NotNil(t, svc)
	assert.Equal(t, map[string]any{
		"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": "qwen", "apps.kubernetes.io/pod-index": "0",
	}, nestedMap(t, svc.Object, "spec", "selector"), "the Service selects only leaders")

	pdb := objs["PodDisruptionBudget/qwen"]
	require.NotNil(t, pdb)
	assert.Equal(t, "AlwaysAllow", nestedString(t, pdb, "spec", "unhealthyPodEvictionPolicy"))
	maxUnavailable, _, _ := unstructured.NestedInt64(pdb.Object, "spec", "maxUnavailable")
	assert.Equal(t, int64(2), maxUnavailable, "maxUnavailable 1 group = 2 pods")
}

func TestRenderMultiNodePDBCountsGroups(t *testing.T) {
	tests := []struct {
		name  string
		set   []string
		field string
		want  any
	}{
		{"minAvailable groups", []string{"podDisruptionBudget.minAvailable=1", "podDisruptionBudget.maxUnavailable=", "multiNode.nodes=4"}, "minAvailable", int64(4)},
		{"percentage as is", []string{"podDisruptionBudget.maxUnavailable=50%"}, "maxUnavailable", "50%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := renderVLLM(t, tt.set...)
			require.NoError(t, err)
			pdb := objectsOf(r)["PodDisruptionBudget/qwen"]
			require.NotNil(t, pdb)
			v, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", tt.field)
			assert.Equal(t, tt.want, v)
		})
	}
}

func TestRenderMultiNodeLeaderWorkerSet(t *testing.T) {
	r, err := renderVLLM(t, "multiNode.controller=leaderworkerset")
	require.NoError(t, err)
	objs := objectsOf(r)
	assert.Len(t, objs, 3)
	lws := objs["LeaderWorkerSet/qwen"]
	require.NotNil(t, lws)
	assert.Equal(t, "leaderworkerset.x-k8s.io/v1", lws.GetAPIVersion())
	replicas, _, _ := unstructured.NestedInt64(lws.Object, "spec", "replicas")
	assert.Equal(t, int64(2), replicas, "replicas = replicaCount")
	size, _, _ := unstructured.NestedInt64(lws.Object, "spec", "leaderWorkerTemplate", "size")
	assert.Equal(t, int64(2), size, "size = multiNode.nodes")
	assert.Equal(t, "RecreateGroupOnPodRestart", nestedString(t, lws, "spec", "leaderWorkerTemplate", "restartPolicy"))
	assert.Equal(t, "RollingUpdate", nestedString(t, lws, "spec", "rolloutStrategy", "type"))
	maxUnavailable, _, _ := unstructured.NestedInt64(lws.Object, "spec", "rolloutStrategy", "rollingUpdateConfiguration", "maxUnavailable")
	assert.Equal(t, int64(1), maxUnavailable)

	leader := serverContainer(t, nestedMap(t, lws.Object, "spec", "leaderWorkerTemplate", "leaderTemplate", "spec"))
	worker := serverContainer(t, nestedMap(t, lws.Object, "spec", "leaderWorkerTemplate", "workerTemplate", "spec"))
	leaderArgs, workerArgs := stringList(leader["args"]), stringList(worker["args"])
	assert.Equal(t, "0", flagValue(leaderArgs, "--node-rank"))
	assert.NotContains(t, leaderArgs, "--headless")
	assert.Equal(t, "$(LWS_WORKER_INDEX)", flagValue(workerArgs, "--node-rank"))
	assert.Contains(t, workerArgs, "--headless")
	for _, args := range [][]string{leaderArgs, workerArgs} {
		assert.Equal(t, "$(LWS_LEADER_ADDRESS)", flagValue(args, "--master-addr"))
		assert.Equal(t, "2", flagValue(args, "--nnodes"))
		assert.Equal(t, "29500", flagValue(args, "--master-port"))
	}
	assert.NotContains(t, leader, "command", "the image's entrypoint (vllm serve) runs")
	_, found, _ := unstructured.NestedMap(leader, "readinessProbe", "httpGet")
	assert.True(t, found, "the leader serves HTTP")
	startup := strings.Join(stringList(nestedMap(t, worker, "startupProbe", "exec")["command"]), " ")
	assert.Contains(t, startup, `[ "$VLLM_NODE_RANK" != 0 ] ||`, "workers serve no HTTP: their startup succeeds")
	readiness := strings.Join(stringList(nestedMap(t, worker, "readinessProbe", "exec")["command"]), " ")
	assert.Contains(t, readiness, "host=$LWS_LEADER_ADDRESS")

	anti, _, _ := unstructured.NestedSlice(nestedMap(t, lws.Object, "spec", "leaderWorkerTemplate", "workerTemplate", "spec"),
		"affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
	require.Len(t, anti, 1)
	assert.Equal(t, []any{"leaderworkerset.sigs.k8s.io/group-key"}, anti[0].(map[string]any)["matchLabelKeys"])

	svc := objs["Service/qwen"]
	require.NotNil(t, svc)
	assert.Equal(t, "0", nestedMap(t, svc.Object, "spec", "selector")["leaderworkerset.sigs.k8s.io/worker-index"])
	assert.NotContains(t, objs, "Service/qwen-nodes", "LWS makes its own headless Service")
}

// nodes 1 (the default) renders the Deployment exactly as before: the
// golden files vllm-*.yaml hold it; here only the absence of groups.
func TestRenderMultiNodeOneNodeIsADeployment(t *testing.T) {
	r, err := renderVLLM(t, "multiNode.nodes=1")
	require.NoError(t, err)
	objs := objectsOf(r)
	require.Contains(t, objs, "Deployment/qwen")
	assert.NotContains(t, objs, "Service/qwen-nodes")
	assert.NotContains(t, r.Manifest, "vllmctl.io/group")
	assert.NotContains(t, r.Manifest, "pod-index")
	assert.NotContains(t, r.Manifest, "unhealthyPodEvictionPolicy")
}

func TestRenderMultiNodeRefusals(t *testing.T) {
	tests := []struct {
		name string
		set  []string
		want []string // substrings of the error
	}{
		{"nodes 0", []string{"multiNode.nodes=0"}, []string{"multiNode.nodes", "minimum"}},
		{"nodes huge", []string{"multiNode.nodes=1000"}, []string{"multiNode.nodes", "maximum"}},
		{"nodes a string", []string{"multiNode.nodes=two"}, []string{"multiNode.nodes", "want integer"}},
		{"nodes a fraction", []string{"multiNode.nodes=1.5"}, []string{"multiNode.nodes", "integer"}},
		{"unknown controller", []string{"multiNode.controller=deployment"}, []string{"multiNode.controller", "statefulset", "leaderworkerset"}},
		{"master port 0", []string{"multiNode.masterPort=0"}, []string{"multiNode.masterPort", "minimum"}},
		{"master port too big", []string{"multiNode.masterPort=70000"}, []string{"multiNode.masterPort", "maximum"}},
		{"unknown key", []string{"multiNode.node=2"}, []string{"multiNode", "node"}},
		{"autoscaling", []string{"autoscaling.enabled=true"}, []string{"autoscaling.enabled=true", "multiNode.nodes=2", "replicaCount"}},
		{"autoscaling with lws", []string{"autoscaling.enabled=true", "multiNode.controller=leaderworkerset"}, []string{"autoscaling.enabled=true", "multiNode.nodes=2"}},
		{"StatefulSet name too long", []string{"fullnameOverride=" + strings.Repeat("a", 50)}, []string{"multiNode.nodes=2", strings.Repeat("a", 50) + "-g1", "52", "fullnameOverride"}},
		{"StatefulSet name too long at group 10", []string{"fullnameOverride=" + strings.Repeat("a", 49), "replicaCount=11"}, []string{strings.Repeat("a", 49) + "-g10", "(53 characters)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderVLLM(t, tt.set...)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	// At the limit: 49 + "-g0" = 52 characters.
	r, err := renderVLLM(t, "fullnameOverride="+strings.Repeat("a", 49), "replicaCount=1")
	require.NoError(t, err)
	assert.Contains(t, objectsOf(r), "StatefulSet/"+strings.Repeat("a", 49)+"-g0")
	// The LeaderWorkerSet is one object named <fullname>: no such limit.
	_, err = renderVLLM(t, "fullnameOverride="+strings.Repeat("a", 50), "multiNode.controller=leaderworkerset")
	require.NoError(t, err)
}
