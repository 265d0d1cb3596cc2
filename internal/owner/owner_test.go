package owner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func obj(labels, annotations map[string]string, managers ...string) *metav1.ObjectMeta {
	m := &metav1.ObjectMeta{Labels: labels, Annotations: annotations}
	for _, n := range managers {
		m.ManagedFields = append(m.ManagedFields, metav1.ManagedFieldsEntry{Manager: n})
	}
	return m
}

func TestOwns(t *testing.T) {
	const rel, ns = "chat", "ml"
	mb := LabelManagedBy
	for _, tc := range []struct {
		name     string
		meta     *metav1.ObjectMeta
		want     bool
		describe string
	}{
		{"new keys", obj(map[string]string{mb: "vllmctl", LabelRelease: rel}, map[string]string{AnnotationNamespace: ns}), true, "release ml/chat"},
		{"new keys, chart's own instance label", obj(map[string]string{mb: "vllmctl", LabelRelease: rel, LegacyLabelInstance: "kserve"},
			map[string]string{AnnotationNamespace: ns}), true, "release ml/chat"},
		{"new keys, no namespace annotation", obj(map[string]string{mb: "vllmctl", LabelRelease: rel}, nil), true, "release chat"},
		{"legacy: instance label only", obj(map[string]string{mb: "vllmctl", LegacyLabelInstance: rel}, nil), true, "release chat"},
		{"legacy instance of another release", obj(map[string]string{mb: "vllmctl", LegacyLabelInstance: "other"}, nil), false, "release other"},
		{"new key wins over the instance label", obj(map[string]string{mb: "vllmctl", LabelRelease: "other", LegacyLabelInstance: rel}, nil), false, "release other"},
		{"same name, another namespace", obj(map[string]string{mb: "vllmctl", LabelRelease: rel}, map[string]string{AnnotationNamespace: "prod"}), false, "release prod/chat"},
		{"Helm's object", obj(map[string]string{mb: "Helm", LegacyLabelInstance: rel}, nil, "helm"), false, "field managers helm"},
		{"release label without managed-by", obj(map[string]string{LabelRelease: rel}, nil, "kubectl-create", "kubectl-edit", "kubectl-create"), false, "field managers kubectl-create, kubectl-edit"},
		{"nothing", obj(nil, nil), false, "not managed by vllmctl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Owns(tc.meta, rel, ns))
			assert.Equal(t, tc.describe, Describe(tc.meta))
		})
	}
}

func TestMark(t *testing.T) {
	m := obj(map[string]string{LegacyLabelInstance: "kserve", LabelManagedBy: "Helm"}, map[string]string{"a": "b"})
	Mark(m, "chat", "ml")
	assert.Equal(t, map[string]string{LegacyLabelInstance: "kserve", LabelManagedBy: "vllmctl", LabelRelease: "chat"}, m.Labels)
	assert.Equal(t, map[string]string{"a": "b", AnnotationNamespace: "ml"}, m.Annotations)
	assert.True(t, Owns(m, "chat", "ml"))
	assert.False(t, Owns(m, "chat", "prod"))

	empty := obj(nil, nil)
	Mark(empty, "chat", "ml")
	o, ok := Of(empty)
	assert.True(t, ok)
	assert.Equal(t, Owner{Release: "chat", Namespace: "ml"}, o)
}

func TestMarkHelm(t *testing.T) {
	o := obj(map[string]string{LabelManagedBy: ManagedByVllmctl, LabelRelease: "chat", "app": "x"}, map[string]string{AnnotationNamespace: "llm", "a": "b"})
	MarkHelm(o, "chat", "llm")
	assert.Equal(t, map[string]string{LabelManagedBy: ManagedByHelm, "app": "x"}, o.GetLabels())
	assert.Equal(t, map[string]string{HelmAnnotationName: "chat", HelmAnnotationNamespace: "llm", "a": "b"}, o.GetAnnotations())
	assert.False(t, Owns(o, "chat", "llm"), "no longer vllmctl's")
}
