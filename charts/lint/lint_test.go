package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// goodDeployment passes every rule: a Guaranteed 1-GPU vLLM server with
// probes (10 minutes to start), /dev/shm, a pinned image and no surge,
// outside "default".
const goodDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: good
  namespace: inference
spec:
  replicas: 2
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 0, maxUnavailable: 1}
  selector:
    matchLabels: {app: good}
  template:
    metadata:
      labels: {app: good, tier: gpu}
    spec:
      containers:
        - name: server
          image: vllm/vllm-openai:v0.11.0
          resources:
            requests: {cpu: "8", memory: 32Gi, nvidia.com/gpu: 1}
            limits: {cpu: "8", memory: 32Gi, nvidia.com/gpu: 1}
          readinessProbe: {httpGet: {path: /health, port: 8000}}
          startupProbe: {httpGet: {path: /health, port: 8000}, periodSeconds: 10, failureThreshold: 60}
          volumeMounts:
            - {name: dshm, mountPath: /dev/shm}
      volumes:
        - name: dshm
          emptyDir: {medium: Memory, sizeLimit: 8Gi}
`

// serverPath is the JSON path of the good Deployment's server container.
const serverPath = "spec.template.spec.containers[0]"

// decodeAll decodes a multi-document YAML stream into objects.
func decodeAll(t *testing.T, data string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(raw))
		out = append(out, u)
	}
}

func good(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	objs := decodeAll(t, goodDeployment)
	require.Len(t, objs, 1)
	return objs[0]
}

// podSpec returns the pod spec map of a Deployment, for in-place edits.
func podSpec(u *unstructured.Unstructured) map[string]any {
	return u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
}

// ctr returns container i of a Deployment, for in-place edits.
func ctr(u *unstructured.Unstructured, i int) map[string]any {
	return podSpec(u)["containers"].([]any)[i].(map[string]any)
}

func resources(u *unstructured.Unstructured, i int, section string) map[string]any {
	return ctr(u, i)["resources"].(map[string]any)[section].(map[string]any)
}

func addSidecar(u *unstructured.Unstructured, c map[string]any) {
	ps := podSpec(u)
	ps["containers"] = append(ps["containers"].([]any), c)
}

func byRule(findings []Finding, rule string) []Finding {
	var out []Finding
	for _, f := range findings {
		if f.Rule == rule {
			out = append(out, f)
		}
	}
	return out
}

func fields(findings []Finding) []string {
	out := make([]string, 0, len(findings))
	for _, f := range findings {
		out = append(out, f.Field)
	}
	return out
}

func TestGoodDeploymentHasNoFindings(t *testing.T) {
	assert.Empty(t, Run([]*unstructured.Unstructured{good(t)}, Options{Namespace: "inference"}))
}

// ruleTest is a case of TestRules.
type ruleTest struct {
	name string
	rule string
	// edit changes the good Deployment; nil keeps it.
	edit func(u *unstructured.Unstructured)
	// yaml replaces the good Deployment when set.
	yaml string
	opts Options
	// want lists the fields the rule reports; empty means it must not fire.
	want []string
}

func TestRules(t *testing.T) {
	severities := map[string]Severity{}
	for _, r := range Rules() {
		severities[r.ID] = r.Severity
	}
	tests := []ruleTest{
		// VL001: GPU integer, requests == limits.
		{name: "VL001 fires when requests differ from limits", rule: "VL001",
			edit: func(u *unstructured.Unstructured) { resources(u, 0, "requests")[gpuResource] = int64(2) },
			want: []string{serverPath + ".resources.requests.nvidia.com/gpu"}},
		{name: "VL001 fires on a fractional GPU", rule: "VL001",
			edit: func(u *unstructured.Unstructured) {
				delete(resources(u, 0, "requests"), gpuResource)
				resources(u, 0, "limits")[gpuResource] = "500m"
			},
			want: []string{serverPath + ".resources.limits.nvidia.com/gpu"}},
		{name: "VL001 fires on a float GPU in both sections", rule: "VL001",
			edit: func(u *unstructured.Unstructured) {
				resources(u, 0, "requests")[gpuResource] = 0.5
				resources(u, 0, "limits")[gpuResource] = 0.5
			},
			want: []string{serverPath + ".resources.limits.nvidia.com/gpu", serverPath + ".resources.requests.nvidia.com/gpu"}},
		{name: "VL001 fires on a GPU request without limit", rule: "VL001",
			edit: func(u *unstructured.Unstructured) { delete(resources(u, 0, "limits"), gpuResource) },
			want: []string{serverPath + ".resources.limits.nvidia.com/gpu"}},
		{name: "VL001 fires on an unparsable GPU value", rule: "VL001",
			edit: func(u *unstructured.Unstructured) { resources(u, 0, "limits")[gpuResource] = "one" },
			want: []string{serverPath + ".resources.limits.nvidia.com/gpu"}},
		{name: "VL001 quiet on equal whole GPUs", rule: "VL001"},
		{name: "VL001 quiet on a GPU limit alone", rule: "VL001",
			edit: func(u *unstructured.Unstructured) { delete(resources(u, 0, "requests"), gpuResource) }},

		// VL002: Guaranteed QoS on GPU pods.
		{name: "VL002 fires when memory request is below limit", rule: "VL002",
			edit: func(u *unstructured.Unstructured) { resources(u, 0, "requests")["memory"] = "16Gi" },
			want: []string{serverPath + ".resources.requests.memory"}},
		{name: "VL002 fires on a sidecar without limits", rule: "VL002",
			edit: func(u *unstructured.Unstructured) {
				addSidecar(u, map[string]any{"name": "logger", "image": "busybox:1.36"})
			},
			want: []string{"spec.template.spec.containers[1].resources.limits.cpu"}},
		{name: "VL002 quiet on equal cpu written differently", rule: "VL002",
			edit: func(u *unstructured.Unstructured) {
				resources(u, 0, "requests")["cpu"] = "8000m"
				resources(u, 0, "limits")["cpu"] = int64(8)
			}},
		{name: "VL002 quiet on a Burstable pod without GPUs", rule: "VL002",
			edit: func(u *unstructured.Unstructured) {
				delete(resources(u, 0, "requests"), gpuResource)
				delete(resources(u, 0, "limits"), gpuResource)
				resources(u, 0, "requests")["memory"] = "1Gi"
			}},

		// VL003: /dev/shm.
		{name: "VL003 fires without a /dev/shm mount", rule: "VL003",
			edit: func(u *unstructured.Unstructured) { delete(ctr(u, 0), "volumeMounts") },
			want: []string{serverPath + ".volumeMounts"}},
		{name: "VL003 fires on a disk-backed /dev/shm", rule: "VL003",
			edit: func(u *unstructured.Unstructured) {
				podSpec(u)["volumes"] = []any{map[string]any{"name": "dshm", "emptyDir": map[string]any{}}}
			},
			want: []string{serverPath + ".volumeMounts"}},
		{name: "VL003 quiet with a memory emptyDir", rule: "VL003"},
		{name: "VL003 quiet on a pod without GPUs", rule: "VL003",
			edit: func(u *unstructured.Unstructured) {
				delete(resources(u, 0, "requests"), gpuResource)
				delete(resources(u, 0, "limits"), gpuResource)
				delete(ctr(u, 0), "volumeMounts")
			}},

		// VL004: probes.
		{name: "VL004 fires without readiness probe", rule: "VL004",
			edit: func(u *unstructured.Unstructured) { delete(ctr(u, 0), "readinessProbe") },
			want: []string{serverPath + ".readinessProbe"}},
		{name: "VL004 fires without any probe", rule: "VL004",
			edit: func(u *unstructured.Unstructured) {
				delete(ctr(u, 0), "readinessProbe")
				delete(ctr(u, 0), "startupProbe")
			},
			want: []string{serverPath + ".readinessProbe", serverPath + ".startupProbe"}},
		{name: "VL004 quiet with both probes", rule: "VL004"},
		{name: "VL004 quiet on a sidecar without probes", rule: "VL004",
			edit: func(u *unstructured.Unstructured) {
				addSidecar(u, map[string]any{"name": "logger", "image": "busybox:1.36"})
			}},

		// VL005: cpu limit on GPU servers.
		{name: "VL005 fires on a cpu limit of 2", rule: "VL005",
			edit: func(u *unstructured.Unstructured) {
				resources(u, 0, "requests")["cpu"] = "2"
				resources(u, 0, "limits")["cpu"] = "2"
			},
			want: []string{serverPath + ".resources.limits.cpu"}},
		{name: "VL005 fires on a millicore limit", rule: "VL005",
			edit: func(u *unstructured.Unstructured) { resources(u, 0, "limits")["cpu"] = "3500m" },
			want: []string{serverPath + ".resources.limits.cpu"}},
		{name: "VL005 quiet at exactly 4", rule: "VL005",
			edit: func(u *unstructured.Unstructured) { resources(u, 0, "limits")["cpu"] = int64(4) }},
		{name: "VL005 quiet on a small non-GPU container", rule: "VL005",
			edit: func(u *unstructured.Unstructured) {
				delete(resources(u, 0, "requests"), gpuResource)
				delete(resources(u, 0, "limits"), gpuResource)
				resources(u, 0, "limits")["cpu"] = "500m"
			}},

		// VL006: requests.
		{name: "VL006 fires on a container without resources", rule: "VL006",
			edit: func(u *unstructured.Unstructured) {
				addSidecar(u, map[string]any{"name": "logger", "image": "busybox:1.36"})
			},
			want: []string{"spec.template.spec.containers[1].resources.requests.cpu", "spec.template.spec.containers[1].resources.requests.memory"}},
		{name: "VL006 fires on an init container without memory", rule: "VL006",
			edit: func(u *unstructured.Unstructured) {
				podSpec(u)["initContainers"] = []any{map[string]any{
					"name": "fetch", "image": "rclone/rclone:1.68",
					"resources": map[string]any{"requests": map[string]any{"cpu": "1"}},
				}}
			},
			want: []string{"spec.template.spec.initContainers[0].resources.requests.memory"}},
		{name: "VL006 quiet when limits default the requests", rule: "VL006",
			edit: func(u *unstructured.Unstructured) { delete(ctr(u, 0)["resources"].(map[string]any), "requests") }},

		// VL007: selector.
		{name: "VL007 fires on a mismatched selector", rule: "VL007",
			edit: func(u *unstructured.Unstructured) {
				require.NoError(t, unstructured.SetNestedStringMap(u.Object, map[string]string{"app": "other"}, "spec", "selector", "matchLabels"))
			},
			want: []string{"spec.selector"}},
		{name: "VL007 fires on a missing selector", rule: "VL007",
			edit: func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "selector") },
			want: []string{"spec.selector"}},
		{name: "VL007 fires on an unmatched expression", rule: "VL007",
			edit: func(u *unstructured.Unstructured) {
				require.NoError(t, unstructured.SetNestedField(u.Object, []any{map[string]any{
					"key": "tier", "operator": "In", "values": []any{"cpu"},
				}}, "spec", "selector", "matchExpressions"))
			},
			want: []string{"spec.selector"}},
		{name: "VL007 quiet on a matching subset", rule: "VL007"},
		{name: "VL007 quiet on a matching expression", rule: "VL007",
			edit: func(u *unstructured.Unstructured) {
				require.NoError(t, unstructured.SetNestedField(u.Object, []any{map[string]any{
					"key": "tier", "operator": "Exists",
				}}, "spec", "selector", "matchExpressions"))
			}},

		// VL008: default namespace.
		{name: "VL008 fires on namespace default", rule: "VL008",
			edit: func(u *unstructured.Unstructured) { u.SetNamespace("default") },
			want: []string{"metadata.namespace"}},
		{name: "VL008 fires on the default release namespace", rule: "VL008",
			edit: func(u *unstructured.Unstructured) { u.SetNamespace("") },
			opts: Options{Namespace: "default"},
			want: []string{"metadata.namespace"}},
		{name: "VL008 quiet in another namespace", rule: "VL008", opts: Options{Namespace: "default"}},
		{name: "VL008 quiet when the namespace is unknown", rule: "VL008",
			edit: func(u *unstructured.Unstructured) { u.SetNamespace("") }},

		// VL009: image tags.
		{name: "VL009 fires on latest", rule: "VL009",
			edit: func(u *unstructured.Unstructured) { ctr(u, 0)["image"] = "vllm/vllm-openai:latest" },
			want: []string{serverPath + ".image"}},
		{name: "VL009 fires on an untagged image behind a registry port", rule: "VL009",
			edit: func(u *unstructured.Unstructured) { ctr(u, 0)["image"] = "localhost:5000/vllm/vllm-openai" },
			want: []string{serverPath + ".image"}},
		{name: "VL009 fires on an untagged init container", rule: "VL009",
			edit: func(u *unstructured.Unstructured) {
				podSpec(u)["initContainers"] = []any{map[string]any{"name": "fetch", "image": "rclone/rclone",
					"resources": map[string]any{"limits": map[string]any{"cpu": "1", "memory": "1Gi"}}}}
			},
			want: []string{"spec.template.spec.initContainers[0].image"}},
		{name: "VL009 quiet on a pinned tag", rule: "VL009",
			edit: func(u *unstructured.Unstructured) { ctr(u, 0)["image"] = "localhost:5000/vllm/vllm-openai:v0.11.0" }},
		{name: "VL009 quiet on a digest", rule: "VL009",
			edit: func(u *unstructured.Unstructured) {
				ctr(u, 0)["image"] = "vllm/vllm-openai@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			}},

		// VL010: surge with GPUs.
		{name: "VL010 fires on maxSurge 1", rule: "VL010",
			edit: func(u *unstructured.Unstructured) {
				require.NoError(t, unstructured.SetNestedField(u.Object, int64(1), "spec", "strategy", "rollingUpdate", "maxSurge"))
			},
			want: []string{"spec.strategy.rollingUpdate.maxSurge"}},
		{name: "VL010 fires on the default strategy", rule: "VL010",
			edit: func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, "spec", "strategy") },
			want: []string{"spec.strategy.rollingUpdate.maxSurge"}},
		{name: "VL010 quiet on maxSurge 0", rule: "VL010"},
		{name: "VL010 quiet on 0%", rule: "VL010",
			edit: func(u *unstructured.Unstructured) {
				require.NoError(t, unstructured.SetNestedField(u.Object, "0%", "spec", "strategy", "rollingUpdate", "maxSurge"))
			}},
		{name: "VL010 quiet on Recreate", rule: "VL010",
			edit: func(u *unstructured.Unstructured) {
				require.NoError(t, unstructured.SetNestedMap(u.Object, map[string]any{"type": "Recreate"}, "spec", "strategy"))
			}},
		{name: "VL010 quiet on a StatefulSet", rule: "VL010",
			edit: func(u *unstructured.Unstructured) { u.SetKind("StatefulSet") }},
	}
	tests = append(tests, vllmRuleTests()...)
	tests = append(tests, drainRuleTests()...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []*unstructured.Unstructured
			if tc.yaml != "" {
				objs = decodeAll(t, tc.yaml)
			} else {
				u := good(t)
				if tc.edit != nil {
					tc.edit(u)
				}
				objs = []*unstructured.Unstructured{u}
			}
			got := byRule(Run(objs, tc.opts), tc.rule)
			if len(tc.want) == 0 {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, tc.want, fields(got))
			for _, f := range got {
				assert.Equal(t, severities[tc.rule], f.Severity)
				assert.NotEmpty(t, f.Message)
				assert.Contains(t, f.Object, "/good")
			}
		})
	}
}

func TestRunPodsAndOtherKinds(t *testing.T) {
	objs := decodeAll(t, `
apiVersion: v1
kind: Service
metadata: {name: svc}
spec:
  selector: {app: nothing}
---
apiVersion: v1
kind: Pod
metadata: {name: bare, labels: {app: bare}}
spec:
  containers:
    - name: server
      image: vllm/vllm-openai
      resources:
        limits: {nvidia.com/gpu: 1}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
        - name: agent
          image: busybox:1.36
          resources:
            requests: {cpu: 10m, memory: 16Mi}
          readinessProbe: {exec: {command: ["true"]}}
          startupProbe: {exec: {command: ["true"]}}
`)
	got := Run(objs, Options{Namespace: "default"})
	for _, f := range got {
		assert.Equal(t, "Pod default/bare", f.Object, "only the Pod has findings: %v", f)
	}
	assert.Equal(t, []string{"VL002", "VL003", "VL004", "VL004", "VL006", "VL006", "VL008", "VL009"}, rulesOf(got), "findings: %v", got)
	assert.Contains(t, fields(got), "spec.containers[0].image")
	assert.Contains(t, fields(got), "spec.containers[0].readinessProbe")
}

func rulesOf(findings []Finding) []string {
	out := make([]string, 0, len(findings))
	for _, f := range findings {
		out = append(out, f.Rule)
	}
	return out
}

func TestRunSortsDeterministically(t *testing.T) {
	bad := good(t)
	bad.SetName("a-bad")
	bad.SetNamespace("default")
	resources(bad, 0, "requests")[gpuResource] = int64(2)
	ctr(bad, 0)["image"] = "vllm/vllm-openai:latest"
	require.NoError(t, unstructured.SetNestedField(bad.Object, int64(1), "spec", "strategy", "rollingUpdate", "maxSurge"))
	other := good(t)
	delete(ctr(other, 0), "readinessProbe")

	first := Run([]*unstructured.Unstructured{other, bad}, Options{})
	second := Run([]*unstructured.Unstructured{bad, other}, Options{})
	assert.Equal(t, first, second)
	assert.Equal(t, []string{"VL001", "VL004", "VL008", "VL009", "VL010"}, rulesOf(first))
	errs, warns, infos := Counts(first)
	assert.Equal(t, []int{1, 3, 1}, []int{errs, warns, infos})
}

// TestStrict: --strict makes every warning an error, leaves errors and
// infos as they are, and sorts the promoted findings among the errors.
func TestStrict(t *testing.T) {
	tests := []struct {
		name         string
		findings     []Finding
		want         []Finding
		wantPromoted int
	}{
		{name: "none", findings: nil, want: nil},
		{
			name:     "errors and infos stay",
			findings: []Finding{{Rule: "VL001", Severity: SeverityError}, {Rule: "VL010", Severity: SeverityInfo}},
			want:     []Finding{{Rule: "VL001", Severity: SeverityError}, {Rule: "VL010", Severity: SeverityInfo}},
		},
		{
			name: "warnings become errors, sorted by rule among them",
			findings: []Finding{{Rule: "VL007", Severity: SeverityError}, {Rule: "VL002", Severity: SeverityWarning},
				{Rule: "VL009", Severity: SeverityWarning}, {Rule: "VL010", Severity: SeverityInfo}},
			want: []Finding{{Rule: "VL002", Severity: SeverityError}, {Rule: "VL007", Severity: SeverityError},
				{Rule: "VL009", Severity: SeverityError}, {Rule: "VL010", Severity: SeverityInfo}},
			wantPromoted: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantPromoted, Strict(tt.findings))
			assert.Equal(t, tt.want, tt.findings)
		})
	}
}

func TestRulesAreOrderedAndDocumented(t *testing.T) {
	var prev string
	for _, r := range Rules() {
		assert.Greater(t, r.ID, prev)
		assert.NotEmpty(t, r.Summary)
		assert.Contains(t, []Severity{SeverityError, SeverityWarning, SeverityInfo}, r.Severity)
		prev = r.ID
	}
}

// TestSurgeFindingCountsWhatTheControllerRuns: VL010 counts the extra
// pods the Deployment controller runs, never more than the replicas
// (it does not grow the new ReplicaSet past them), whatever maxSurge
// says, and an integer beyond 32 bits is not cut to a negative one.
func TestSurgeFindingCountsWhatTheControllerRuns(t *testing.T) {
	for _, tc := range []struct {
		surge any
		want  string
	}{
		{int64(1), "lets the rollout run 1 extra pod(s)"},
		{"50%", "lets the rollout run 1 extra pod(s)"},
		{"1000%", "lets the rollout run 2 extra pod(s)"},
		{"1000000000000%", "lets the rollout run 2 extra pod(s)"},
		{int64(1) << 32, "lets the rollout run 2 extra pod(s)"},
	} {
		t.Run(fmt.Sprint(tc.surge), func(t *testing.T) {
			u := good(t) // 2 replicas
			require.NoError(t, unstructured.SetNestedField(u.Object, tc.surge, "spec", "strategy", "rollingUpdate", "maxSurge"))
			var got []string
			for _, f := range Run([]*unstructured.Unstructured{u}, Options{}) {
				if f.Rule == "VL010" {
					got = append(got, f.Message)
				}
			}
			require.Len(t, got, 1)
			assert.Contains(t, got[0], tc.want)
		})
	}
}
