package podwire

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// appsProtobufOf encodes an apps/v1 obj as the API server sends it.
func appsProtobufOf(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(t, ok)
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, appsv1.SchemeGroupVersion), obj)
	require.NoError(t, err)
	return data
}

func testDeployment() *appsv1.Deployment {
	pod := fullPod("unused")
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "chat", Namespace: "ns", UID: "d-uid", Generation: 3, ResourceVersion: "9",
			Labels:        map[string]string{"app": "chat"},
			Annotations:   map[string]string{"deployment.kubernetes.io/revision": "2"},
			ManagedFields: pod.ManagedFields,
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "chat"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "chat", "tier": "serve"}, Annotations: map[string]string{"sim.vllmctl.io/ready-delay": "1s"}},
				Spec:       pod.Spec,
			},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2},
	}
}

// replicaSetOf is the ReplicaSet the Deployment controller makes of d:
// its template with the pod-template-hash label, in a selector too.
func replicaSetOf(d *appsv1.Deployment, hash string) *appsv1.ReplicaSet {
	tmpl := *d.Spec.Template.DeepCopy()
	tmpl.Labels[podTemplateHashLabel] = hash
	return &appsv1.ReplicaSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: d.Namespace, UID: "rs-" + "hash",
			Labels:          tmpl.Labels,
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": "2"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}},
			ManagedFields:   d.ManagedFields,
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "chat", podTemplateHashLabel: hash}},
			Template: tmpl,
		},
		Status: appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 1, ObservedGeneration: 1},
	}
}

// TestWorkloadsDecodeWithoutTemplates: a Deployment and a ReplicaSet (and
// their lists) decode whole but for their templates and managedFields,
// with the digest of the template in an annotation, whatever annotation
// of that name the object had.
func TestWorkloadsDecodeWithoutTemplates(t *testing.T) {
	dec := decoderOf(t, nil)
	d := testDeployment()
	d.Annotations[TemplateDigestAnnotation] = "forged"
	rs := replicaSetOf(d, "5d8f7c")
	for _, tc := range []struct {
		name string
		obj  runtime.Object
		into []runtime.Object
	}{
		{"Deployment", d, []runtime.Object{nil, &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Paused: true}}}},
		{"ReplicaSet", rs, []runtime.Object{nil, &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{MinReadySeconds: 5}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := appsProtobufOf(t, tc.obj)
			_, _, raw, ok := unwrapProtobuf(data)
			require.True(t, ok)
			slim, err := appendWorkload(nil, raw)
			require.NoError(t, err)
			assert.Less(t, len(slim), len(raw)/2, "the template is most of the bytes")
			for _, into := range tc.into {
				got, gvk, err := dec.Decode(data, nil, into)
				require.NoError(t, err)
				assert.Equal(t, "apps", gvk.Group)
				assert.Equal(t, tc.name, gvk.Kind)
				want := tc.obj.DeepCopyObject()
				var gotMeta, wantMeta *metav1.ObjectMeta
				switch w := want.(type) {
				case *appsv1.Deployment:
					w.Spec.Template = corev1.PodTemplateSpec{}
					g := got.(*appsv1.Deployment)
					g.TypeMeta, w.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
					gotMeta, wantMeta = &g.ObjectMeta, &w.ObjectMeta
				case *appsv1.ReplicaSet:
					w.Spec.Template = corev1.PodTemplateSpec{}
					g := got.(*appsv1.ReplicaSet)
					g.TypeMeta, w.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
					gotMeta, wantMeta = &g.ObjectMeta, &w.ObjectMeta
				}
				digest := gotMeta.Annotations[TemplateDigestAnnotation]
				assert.Len(t, digest, 2*digestPrefixBytes)
				assert.NotEqual(t, "forged", digest)
				wantMeta.ManagedFields = nil
				wantMeta.Annotations[TemplateDigestAnnotation] = digest
				assert.Equal(t, want, got)
			}
		})
	}

	t.Run("lists", func(t *testing.T) {
		rsl := &appsv1.ReplicaSetList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSetList"}, ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: "next"},
			Items: []appsv1.ReplicaSet{*rs, *replicaSetOf(d, "other")}}
		got, _, err := dec.Decode(appsProtobufOf(t, rsl), nil, &appsv1.ReplicaSetList{})
		require.NoError(t, err)
		gl := got.(*appsv1.ReplicaSetList)
		assert.Equal(t, "next", gl.Continue)
		require.Len(t, gl.Items, 2)
		for _, item := range gl.Items {
			assert.Empty(t, item.Spec.Template.Spec.Containers)
			assert.Nil(t, item.ManagedFields)
			assert.Equal(t, "2", item.Annotations["deployment.kubernetes.io/revision"])
		}
		assert.Equal(t, gl.Items[0].Annotations[TemplateDigestAnnotation], gl.Items[1].Annotations[TemplateDigestAnnotation],
			"the same template but for its hash label")

		dl := &appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DeploymentList"}, Items: []appsv1.Deployment{*d}}
		got, _, err = dec.Decode(appsProtobufOf(t, dl), nil, nil)
		require.NoError(t, err)
		require.Len(t, got.(*appsv1.DeploymentList).Items, 1)
		assert.Equal(t, gl.Items[0].Annotations[TemplateDigestAnnotation], got.(*appsv1.DeploymentList).Items[0].Annotations[TemplateDigestAnnotation],
			"a Deployment and its ReplicaSet")
	})
}

// TestTemplateDigest: the digest of a Deployment's template and of the
// template of the ReplicaSet the controller made of it are equal; any
// other change of the template changes it.
func TestTemplateDigest(t *testing.T) {
	digestOf := func(t *testing.T, obj runtime.Object) string {
		t.Helper()
		_, _, raw, ok := unwrapProtobuf(appsProtobufOf(t, obj))
		require.True(t, ok)
		var tmpl []byte
		require.NoError(t, eachField(raw, func(num protowire.Number, _ protowire.Type, _, value []byte) error {
			if num == workloadSpec {
				return eachField(value, func(num protowire.Number, _ protowire.Type, _, value []byte) error {
					if num == specTemplate {
						tmpl = value
					}
					return nil
				})
			}
			return nil
		}))
		require.NotNil(t, tmpl)
		digest, err := TemplateDigest(tmpl)
		require.NoError(t, err)
		return digest
	}
	d := testDeployment()
	want := digestOf(t, d)
	assert.Equal(t, want, digestOf(t, replicaSetOf(d, "5d8f7c")), "the controller's ReplicaSet")
	assert.Equal(t, want, digestOf(t, replicaSetOf(d, "x")), "whatever the hash")

	other := replicaSetOf(d, "5d8f7c")
	other.Name, other.UID, other.Annotations, other.Status = "renamed", "other", nil, appsv1.ReplicaSetStatus{}
	assert.Equal(t, want, digestOf(t, other), "the ReplicaSet's own metadata and status do not count")

	for name, change := range map[string]func(*corev1.PodTemplateSpec){
		"image": func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Image = "vllm/vllm-openai:v0.12.0" },
		"argument": func(p *corev1.PodTemplateSpec) {
			p.Spec.Containers[0].Args = append(p.Spec.Containers[0].Args, "--enforce-eager")
		},
		"label":               func(p *corev1.PodTemplateSpec) { p.Labels["tier"] = "canary" },
		"label added":         func(p *corev1.PodTemplateSpec) { p.Labels["pod-template-hash-x"] = "1" },
		"template annotation": func(p *corev1.PodTemplateSpec) { p.Annotations["restartedAt"] = "now" },
		"node":                func(p *corev1.PodTemplateSpec) { p.Spec.NodeName = "elsewhere" },
	} {
		t.Run(name, func(t *testing.T) {
			c := replicaSetOf(d, "5d8f7c")
			change(&c.Spec.Template)
			assert.NotEqual(t, want, digestOf(t, c))
		})
	}
}
