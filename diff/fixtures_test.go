package diff

import (
	"context"
	"encoding/base64"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/internal/object"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/diff")

// assertGolden compares got with testdata/diff/<name>, or rewrites it under
// -update.
func assertGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "diff", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test ./diff -run %s -update", t.Name())
	assert.Equal(t, string(want), string(got), "golden file %s (rerun with -update to rewrite)", path)
}

// obj parses one YAML object.
func obj(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(doc), &m))
	return &unstructured.Unstructured{Object: m}
}

// b64 base64-encodes s, as Secret data holds it.
func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// fakeCluster is a Cluster over the objects live, whose dry run is dryRun
// (default: mergeDryRun over live). Objects of kinds named clusterScoped
// have no namespace.
func fakeCluster(t *testing.T, live []*unstructured.Unstructured, dryRun DryRunFunc) Cluster {
	t.Helper()
	byKey := map[object.ID]*unstructured.Unstructured{}
	for _, o := range live {
		byKey[object.RefOf(o).ID()] = o.DeepCopy()
	}
	if dryRun == nil {
		dryRun = mergeDryRun(live, "ns1")
	}
	get := func(_ context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error) {
		ref := object.RefOf(obj)
		if clusterScoped(ref.Kind) {
			ref.Namespace = ""
		} else if ref.Namespace == "" {
			ref.Namespace = namespace
		}
		if o, ok := byKey[ref.ID()]; ok {
			return o.DeepCopy(), nil
		}
		return nil, nil
	}
	return Cluster{DryRun: dryRun, Get: get}
}

func clusterScoped(kind string) bool { return kind == "Namespace" || kind == "ClusterRole" }

// mergeDryRun imitates a server-side dry-run apply well enough for unit
// tests: the rendered object merged over the live one (maps merged, lists
// replaced), with fresh server metadata; a new object gets a uid and, for
// a Service, the placeholder cluster IP a real dry run answers with.
func mergeDryRun(live []*unstructured.Unstructured, namespace string) DryRunFunc {
	byKey := map[object.ID]*unstructured.Unstructured{}
	for _, o := range live {
		byKey[object.RefOf(o).ID()] = o
	}
	return func(_ context.Context, objs []*unstructured.Unstructured) ([]DryRunResult, error) {
		var out []DryRunResult
		for _, o := range objs {
			body := o.DeepCopy()
			if body.GetNamespace() == "" && !clusterScoped(body.GetKind()) {
				body.SetNamespace(namespace)
			}
			var after *unstructured.Unstructured
			if l, ok := byKey[object.RefOf(body).ID()]; ok {
				after = &unstructured.Unstructured{Object: merge(l.DeepCopy().Object, body.DeepCopy().Object)}
				if d, ok := body.Object["data"]; ok {
					after.Object["data"] = d // owned by the applier: keys it drops go
				}
				after.SetResourceVersion(l.GetResourceVersion() + "1")
				after.SetGeneration(l.GetGeneration() + 1)
			} else {
				after = body
				after.SetUID("dry-run-uid")
				after.SetResourceVersion("1")
				if after.GetKind() == "Service" {
					_ = unstructured.SetNestedField(after.Object, "10.0.0.0", "spec", "clusterIP")
					_ = unstructured.SetNestedStringSlice(after.Object, []string{"10.0.0.0"}, "spec", "clusterIPs")
				}
			}
			if after.GetKind() == "Secret" {
				after.Object["data"] = foldStringData(after.Object)
				delete(after.Object, "stringData")
			}
			_ = unstructured.SetNestedField(after.Object, []any{map[string]any{
				"manager": "vllmctl", "operation": "Apply", "time": "2030-01-01T00:00:00Z",
			}}, "metadata", "managedFields")
			out = append(out, DryRunResult{Object: after})
		}
		return out, nil
	}
}

// merge merges src over dst: maps recursively, everything else replaced.
func merge(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// Secret values of the scenario; the output must never contain them.
const (
	liveToken     = "live-token-Qx7v9Zr2"
	renderedToken = "new-token-Lp4m8Ks1"
	liveOld       = "old-value-Hj3k5Nw0"
	renderedExtra = "extra-value-Ty6u2Ie9"
	sharedUser    = "shared-user-Po0i9Uy8"
)

// scenario is a release with one object of each kind of change:
// rendered are the new objects, live the cluster's, previous the deployed
// revision's.
type scenario struct {
	rendered, live, previous []*unstructured.Unstructured
}

const labels = `
    app.kubernetes.io/managed-by: vllmctl
    vllmctl.io/release: web`

func deploymentYAML(image string, replicas int, live bool) string {
	extra := ""
	if live {
		extra = `
  annotations:
    deployment.kubernetes.io/revision: "3"
  uid: 7c1f
  resourceVersion: "812"
  generation: 3
  creationTimestamp: "2030-01-01T00:00:00Z"
  managedFields:
  - manager: vllmctl
    operation: Apply
    time: "2030-01-01T00:00:00Z"`
	}
	doc := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ns1
  labels:` + labels + extra + `
spec:
  replicas: REPLICAS
  selector:
    matchLabels:
      app: web
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 0
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: server
        image: IMAGE
        imagePullPolicy: IfNotPresent
        terminationMessagePath: /dev/termination-log
        args: ["--model", "Qwen/Qwen3-0.6B", "--port", "8000"]
        resources:
          limits:
            nvidia.com/gpu: 1
            cpu: "1"
            memory: 1Gi
          requests:
            nvidia.com/gpu: 1
            cpu: "1"
            memory: 1Gi
      restartPolicy: Always
      terminationGracePeriodSeconds: 60
`
	if live {
		doc += `status:
  replicas: REPLICAS
  readyReplicas: REPLICAS
  observedGeneration: 3
`
	}
	doc = strings.ReplaceAll(doc, "REPLICAS", fmtInt(replicas))
	return strings.ReplaceAll(doc, "IMAGE", image)
}

func fmtInt(n int) string {
	b, _ := yaml.Marshal(n)
	return strings.TrimSpace(string(b))
}

func newScenario(t *testing.T) scenario {
	t.Helper()
	secret := func(data map[string]string, live bool) *unstructured.Unstructured {
		o := obj(t, `apiVersion: v1
kind: Secret
metadata:
  name: web-creds
  namespace: ns1
  labels:`+labels+`
type: Opaque
`)
		d := map[string]any{}
		for k, v := range data {
			d[k] = b64(v)
		}
		o.Object["data"] = d
		if live {
			o.SetResourceVersion("77")
			o.SetAnnotations(map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"token":"` + b64(liveToken) + `"}}`,
			})
		}
		return o
	}
	configMap := func(name, model string) *unstructured.Unstructured {
		return obj(t, `apiVersion: v1
kind: ConfigMap
metadata:
  name: `+name+`
  namespace: ns1
  labels:`+labels+`
data:
  model: `+model+`
  port: "8000"
  max-model-len: "4096"
  dtype: auto
  log-level: info
`)
	}
	service := obj(t, `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: ns1
  labels:`+labels+`
spec:
  selector:
    app: web
  ports:
  - name: http
    port: 8000
    protocol: TCP
    targetPort: 8000
`)
	liveService := service.DeepCopy()
	_ = unstructured.SetNestedField(liveService.Object, "10.96.4.2", "spec", "clusterIP")
	pdb := obj(t, `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: ns1
  labels:`+labels+`
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app: web
`)
	// Another owner took this one over: a deploy keeps it.
	adopted := configMap("adopted", "x")
	adopted.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "someone-else"})
	ns := obj(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns1\n  labels:"+labels+"\n")

	return scenario{
		rendered: []*unstructured.Unstructured{
			secret(map[string]string{"token": renderedToken, "user": sharedUser, "extra": renderedExtra}, false),
			configMap("web-config", "Qwen/Qwen3-1.7B"),
			configMap("web-new", "Qwen/Qwen3-0.6B"),
			service,
			obj(t, deploymentYAML("vllm/vllm-openai:v0.11.1", 2, false)),
		},
		live: []*unstructured.Unstructured{
			secret(map[string]string{"token": liveToken, "user": sharedUser, "old": liveOld}, true),
			configMap("web-config", "Qwen/Qwen3-0.6B"),
			liveService,
			obj(t, deploymentYAML("vllm/vllm-openai:v0.11.0", 2, true)),
			pdb,
			adopted,
			ns,
		},
		previous: []*unstructured.Unstructured{
			ns,
			secret(map[string]string{"token": liveToken, "user": sharedUser, "old": liveOld}, false),
			configMap("web-config", "Qwen/Qwen3-0.6B"),
			configMap("adopted", "x"),
			service,
			obj(t, deploymentYAML("vllm/vllm-openai:v0.11.0", 2, false)),
			pdb,
		},
	}
}
