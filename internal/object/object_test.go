package object_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/object"
)

func TestRef(t *testing.T) {
	for _, tc := range []struct {
		name string
		ref  object.Ref
		want string
	}{
		{name: "namespaced", ref: object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "web"}, want: "apps/v1 Deployment ns/web"},
		{name: "core group, cluster-scoped", ref: object.Ref{Version: "v1", Kind: "Namespace", Name: "ns"}, want: "v1 Namespace ns"},
		{name: "no version", ref: object.Ref{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "web"}, want: "Deployment.apps ns/web"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.ref.String())
		})
	}
}

func TestIDIgnoresVersion(t *testing.T) {
	v1 := object.Ref{Group: "autoscaling", Version: "v1", Kind: "HorizontalPodAutoscaler", Namespace: "ns", Name: "h"}
	v2 := v1
	v2.Version = "v2"
	assert.Equal(t, v1.ID(), v2.ID())
	other := v1
	other.Namespace = "other"
	assert.NotEqual(t, v1.ID(), other.ID())
}

func TestRefOf(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	u.SetNamespace("ns")
	u.SetName("web")
	assert.Equal(t, object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "ns", Name: "web"}, object.RefOf(u))
	assert.True(t, object.RefOf(u).Is("apps", "Deployment"))
}
