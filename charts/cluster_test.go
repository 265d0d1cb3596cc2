package charts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// capsChart prints what a chart gated on the cluster's API versions sees,
// and renders a ServiceMonitor only when the cluster serves the kind (the
// prometheus-community pattern).
var capsChart = map[string]string{
	"templates/caps.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: caps
data:
  group: {{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" | quote }}
  kind: {{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor" | quote }}
  apps: {{ .Capabilities.APIVersions.Has "apps/v1" | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor" }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: sm
spec: {}
{{- end }}
`,
}

const serviceMonitorCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, plural: servicemonitors}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true}
  - {name: v1alpha1, served: false, storage: false}
`

func capsData(t *testing.T, r *Rendered) map[string]any {
	t.Helper()
	for _, o := range r.Objects {
		if o.GetKind() == "ConfigMap" && o.GetName() == "caps" {
			d, _, _ := unstructured.NestedMap(o.Object, "data")
			return d
		}
	}
	t.Fatal("no caps ConfigMap rendered")
	return nil
}

func hasKind(r *Rendered, kind string) bool {
	for _, o := range r.Objects {
		if o.GetKind() == kind {
			return true
		}
	}
	return false
}

func TestRenderForClusterCapabilities(t *testing.T) {
	withCRD := map[string]string{"crds/sm.yaml": serviceMonitorCRD}
	for k, v := range capsChart {
		withCRD[k] = v
	}
	cases := []struct {
		name        string
		files       map[string]string
		apiVersions []string
		cluster     *Cluster
		want        map[string]any
		monitor     bool
	}{
		{name: "offline: helm template's defaults", files: capsChart,
			want: map[string]any{"group": "false", "kind": "false", "apps": "true"}},
		{name: "offline with --api-versions", files: capsChart, apiVersions: []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor"},
			want: map[string]any{"group": "true", "kind": "true", "apps": "true"}, monitor: true},
		{name: "cluster serving the CRD", files: capsChart,
			cluster: &Cluster{APIVersions: []string{"v1", "v1/Pod", "apps/v1", "apps/v1/Deployment", "monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor"}},
			want:    map[string]any{"group": "true", "kind": "true", "apps": "true"}, monitor: true},
		{name: "cluster without apps/v1: the cluster's set, not the defaults", files: capsChart,
			cluster: &Cluster{APIVersions: []string{"v1", "v1/Pod"}},
			want:    map[string]any{"group": "false", "kind": "false", "apps": "false"}},
		{name: "the chart's crds/ counted when the deploy creates them", files: withCRD,
			cluster: &Cluster{APIVersions: []string{"v1", "apps/v1"}, WithChartCRDs: true},
			want:    map[string]any{"group": "true", "kind": "true", "apps": "true"}, monitor: true},
		{name: "the chart's crds/ not counted with --skip-crds", files: withCRD,
			cluster: &Cluster{APIVersions: []string{"v1", "apps/v1"}},
			want:    map[string]any{"group": "false", "kind": "false", "apps": "true"}},
		{name: "a cluster whose discovery listed nothing: Helm's defaults", files: withCRD,
			cluster: &Cluster{WithChartCRDs: true},
			want:    map[string]any{"group": "true", "kind": "true", "apps": "true"}, monitor: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := loader.LoadDir(writeChart(t, tc.files))
			require.NoError(t, err)
			r, err := Render(ch, RenderOptions{ReleaseName: "r", Namespace: "ns", APIVersions: tc.apiVersions, Cluster: tc.cluster, KubeVersion: "v1.36.2"})
			require.NoError(t, err)
			got := capsData(t, r)
			for k, v := range tc.want {
				assert.Equal(t, v, got[k], k)
			}
			assert.Equal(t, "v1.36.2", got["kube"])
			assert.Equal(t, tc.monitor, hasKind(r, "ServiceMonitor"))
		})
	}
}

// TestAPIVersionsFlagMatchesHelm: --api-versions/-a adds to the default
// set as `helm template -a` does.
func TestAPIVersionsFlagMatchesHelm(t *testing.T) {
	bin := helmBin(t)
	dir := writeChart(t, capsChart)
	ch, err := loader.LoadDir(dir)
	require.NoError(t, err)
	for _, a := range [][]string{nil, {"monitoring.coreos.com/v1"}, {"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor"}} {
		opts := RenderOptions{ReleaseName: "r", Namespace: "ns", APIVersions: a}
		ours, err := Render(ch, opts)
		require.NoError(t, err)
		var extra []string
		for _, v := range a {
			extra = append(extra, "--api-versions", v)
		}
		stdout, stderr, err := runHelmTemplate(t, bin, dir, opts, extra...)
		require.NoError(t, err, stderr)
		theirs, err := parseObjects(map[string]string{"helm": stdout})
		require.NoError(t, err)
		assert.Equal(t, comparable(t, theirs), comparable(t, ours.Objects), "-a %v", a)
	}
}

func TestCRDAPIVersions(t *testing.T) {
	objs, err := parseDocument(serviceMonitorCRD)
	require.NoError(t, err)
	assert.Equal(t, []string{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor"}, CRDAPIVersions(objs),
		"served versions only")
}

// lookupChart keeps a generated password through lookup (Bitnami's
// common.secrets.passwords.manage pattern).
var lookupChart = map[string]string{
	"templates/secret.yaml": `{{- $old := lookup "v1" "Secret" .Release.Namespace "pw" }}
apiVersion: v1
kind: Secret
metadata:
  name: pw
data:
  {{- if $old }}
  password: {{ index $old.data "password" }}
  {{- else }}
  password: {{ "generated-password" | b64enc }}
  {{- end }}
`,
}

// fakeProvider answers lookups from a fake dynamic client and records
// the verbs it was asked.
type fakeProvider struct {
	client *dynamicfake.FakeDynamicClient
}

func (p fakeProvider) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	if gvk.Kind != "Secret" {
		return nil, false, errors.New("unknown kind")
	}
	return p.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}), true, nil
}

func newFakeProvider(objs ...runtime.Object) fakeProvider {
	s := runtime.NewScheme()
	return fakeProvider{client: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(s,
		map[schema.GroupVersionResource]string{{Version: "v1", Resource: "secrets"}: "SecretList"}, objs...)}
}

func secretObj(ns, name, password string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     map[string]any{"password": password},
	}}
}

func TestLookupAnsweredByTheCluster(t *testing.T) {
	ch, err := loader.LoadDir(writeChart(t, lookupChart))
	require.NoError(t, err)
	password := func(r *Rendered) any {
		v, _, _ := unstructured.NestedString(r.Objects[0].Object, "data", "password")
		return v
	}
	opts := RenderOptions{ReleaseName: "r", Namespace: "ns"}

	t.Run("offline: an empty map, a new password", func(t *testing.T) {
		r, err := Render(ch, opts)
		require.NoError(t, err)
		assert.Equal(t, "Z2VuZXJhdGVkLXBhc3N3b3Jk", password(r))
	})
	t.Run("the live Secret's password is kept, read-only", func(t *testing.T) {
		p := newFakeProvider(secretObj("ns", "pw", "a2VwdA=="))
		o := opts
		o.Cluster = &Cluster{Lookup: p}
		r, err := Render(ch, o)
		require.NoError(t, err)
		assert.Equal(t, "a2VwdA==", password(r))
		for _, a := range p.client.Actions() {
			assert.Contains(t, []string{"get", "list"}, a.GetVerb(), "only reads reach the cluster")
			assert.Equal(t, "ns", a.GetNamespace())
		}
		assert.NotEmpty(t, p.client.Actions())
	})
	t.Run("another namespace's Secret is not this one", func(t *testing.T) {
		o := opts
		o.Cluster = &Cluster{Lookup: newFakeProvider(secretObj("other", "pw", "a2VwdA=="))}
		r, err := Render(ch, o)
		require.NoError(t, err)
		assert.Equal(t, "Z2VuZXJhdGVkLXBhc3N3b3Jk", password(r))
	})
	t.Run("a Forbidden lookup fails the render as the cluster's error", func(t *testing.T) {
		p := newFakeProvider()
		p.client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "pw", errors.New("no RBAC"))
		})
		o := opts
		o.Cluster = &Cluster{Lookup: p}
		_, err := Render(ch, o)
		var le *LookupError
		require.ErrorAs(t, err, &le)
		assert.True(t, apierrors.IsForbidden(err))
		assert.Equal(t, exitcode.Cluster, exitcode.Of(err))
		assert.Contains(t, err.Error(), "c/templates/secret.yaml")
	})
	t.Run("a cancelled context is not a template error", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		o := opts
		o.Cluster = &Cluster{Lookup: newFakeProvider(secretObj("ns", "pw", "a2VwdA=="))}
		_, err := RenderContext(ctx, ch, o)
		require.Error(t, err)
		assert.Equal(t, exitcode.Interrupted, exitcode.Of(err))
	})
}

// TestLookupOfflineMatchesHelmTemplate: without a cluster the lookup
// chart renders as `helm template` renders it.
func TestLookupOfflineMatchesHelmTemplate(t *testing.T) {
	bin := helmBin(t)
	dir := writeChart(t, lookupChart)
	ch, err := loader.LoadDir(dir)
	require.NoError(t, err)
	opts := RenderOptions{ReleaseName: "r", Namespace: "ns"}
	ours, err := Render(ch, opts)
	require.NoError(t, err)
	stdout, stderr, err := runHelmTemplate(t, bin, dir, opts)
	require.NoError(t, err, stderr)
	theirs, err := parseObjects(map[string]string{"helm": stdout})
	require.NoError(t, err)
	assert.Equal(t, comparable(t, theirs), comparable(t, ours.Objects))
	require.NoError(t, os.RemoveAll(filepath.Dir(dir)))
	assert.False(t, strings.Contains(stdout, "a2VwdA=="))
}
