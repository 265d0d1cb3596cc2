package cluster

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

func TestDiscover(t *testing.T) {
	fake := &k8stesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", Kind: "Pod"}, {Name: "pods/log", Kind: "Pod"}, {Name: "secrets", Kind: "Secret"}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment"}}},
		{GroupVersion: "monitoring.coreos.com/v1", APIResources: []metav1.APIResource{{Name: "servicemonitors", Kind: "ServiceMonitor"}}},
	}}
	dc := &fakediscovery.FakeDiscovery{Fake: fake, FakedServerVersion: &version.Info{GitVersion: "v1.36.3", Major: "1", Minor: "36"}}
	d, err := Discover(context.Background(), dc)
	require.NoError(t, err)
	assert.Equal(t, "v1.36.3", d.KubeVersion)
	assert.Equal(t, []string{
		"apps/v1", "apps/v1/Deployment",
		"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor",
		"v1", "v1/Pod", "v1/Secret",
	}, d.APIVersions, "group/versions and group/version/kinds, each once, sorted")
	assert.Empty(t, d.Warning)

	t.Run("the server version cannot be read", func(t *testing.T) {
		f := &k8stesting.Fake{}
		f.AddReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewUnauthorized("no")
		})
		_, err := Discover(context.Background(), &fakediscovery.FakeDiscovery{Fake: f})
		require.Error(t, err)
		assert.True(t, apierrors.IsUnauthorized(err))
	})
}

// TestDiscoverUnderContext: discovery reads under the command's context:
// a command cancelled (Ctrl-C) does not wait for an API server that does
// not answer.
func TestDiscoverUnderContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
		}
	}))
	defer srv.Close()
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Discover(ctx, dc)
	require.Error(t, err, "a cancelled command does not read the cluster")
	assert.ErrorIs(t, err, context.Canceled)
}

func TestLookupClients(t *testing.T) {
	m := applyMapper()
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm", "namespace": "ns"},
	}}
	c := newSSACluster(t, secret)
	a := NewApplierFromClients(c, m)
	served := []string{"v1", "v1/ConfigMap", "apps/v1", "apps/v1/Deployment", "monitoring.coreos.com/v1"}
	p := a.Lookup(context.Background(), served)

	res, namespaced, err := p.GetClientFor("v1", "ConfigMap")
	require.NoError(t, err)
	assert.True(t, namespaced)
	got, err := res.Namespace("ns").Get(context.Background(), "cm", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "cm", got.GetName())

	_, namespaced, err = p.GetClientFor("v1", "Namespace")
	require.NoError(t, err)
	assert.False(t, namespaced, "cluster-scoped")

	// A kind the cluster does not have in a group version it serves:
	// not found (lookup's empty map), as with Helm's lookup.
	res, _, err = p.GetClientFor("monitoring.coreos.com/v1", "PodMonitor")
	require.NoError(t, err)
	_, err = res.Namespace("ns").Get(context.Background(), "x", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	_, err = res.List(context.Background(), metav1.ListOptions{})
	assert.True(t, apierrors.IsNotFound(err))

	// A group version the cluster does not serve: an error naming it.
	_, _, err = p.GetClientFor("cert-manager.io/v1", "Certificate")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cert-manager.io/v1")
	assert.True(t, meta.IsNoMatchError(errors.Unwrap(err)))
}
