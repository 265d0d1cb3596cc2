package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// An apply the server answers NotFound names the cause it has. A missing
// namespace suggests --create-namespace only for an operation that has the
// flag and for the namespace it creates (the release's); a bare 404 is a
// kind the cluster no longer serves (its CRD was deleted while a cached
// discovery still mapped it).
func TestApplyNotFoundNamesTheCause(t *testing.T) {
	nsGone := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, applyNS)
	// What client-go makes of the API server's plain "404 page not found".
	unserved := apierrors.NewGenericServerResponse(404, "PATCH", schema.GroupResource{Resource: "configmaps"}, "a", "404 page not found", 0, true)
	cases := []struct {
		name        string
		err         error
		objNS       string
		opts        ApplyOptions
		want        string
		notWant     string
		unknownKind bool
	}{
		{name: "deploy: release namespace missing", err: nsGone, opts: ApplyOptions{Namespace: applyNS},
			want: "apply v1 ConfigMap llm/a (does namespace llm exist? --create-namespace creates it)"},
		{name: "rollback: release namespace missing", err: nsGone, opts: ApplyOptions{Namespace: applyNS, NoCreateNamespaceFlag: true},
			want: "apply v1 ConfigMap llm/a (does namespace llm exist?): ", notWant: "--create-namespace"},
		{name: "another namespace missing", err: apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "other"), objNS: "other",
			opts: ApplyOptions{Namespace: applyNS}, want: "apply v1 ConfigMap other/a (does namespace other exist?): ", notWant: "--create-namespace"},
		{name: "kind no longer served", err: unserved, opts: ApplyOptions{Namespace: applyNS},
			want: "v1 ConfigMap llm/a: the cluster does not serve kind ConfigMap in v1 (is its CRD installed?)", notWant: "namespace", unknownKind: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newSSACluster(t)
			c.applyErr = func(applyCall) error { return tc.err }
			_, err := NewApplierFromClients(c, applyMapper()).Apply(context.Background(),
				[]*unstructured.Unstructured{configMap(tc.objNS, "a", nil)}, tc.opts)
			require.Error(t, err)
			assert.True(t, apierrors.IsNotFound(err), "the API error is wrapped: %v", err)
			assert.Contains(t, err.Error(), tc.want)
			if tc.notWant != "" {
				assert.NotContains(t, err.Error(), tc.notWant)
			}
			var uk *UnknownKindError
			assert.Equal(t, tc.unknownKind, errors.As(err, &uk))
		})
	}
}

// The kinds of Kubernetes' own API groups need no discovery on a
// rollback; any other group may be a CRD's.
func TestKubeGroup(t *testing.T) {
	for _, g := range []string{"", "apps", "batch", "autoscaling", "policy", "rbac.authorization.k8s.io", "apiextensions.k8s.io", "networking.k8s.io"} {
		assert.True(t, KubeGroup(g), "%q", g)
	}
	for _, g := range []string{"demo.vllmctl.io", "leaderworkerset.x-k8s.io", "monitoring.coreos.com"} {
		assert.False(t, KubeGroup(g), "%q", g)
	}
}
