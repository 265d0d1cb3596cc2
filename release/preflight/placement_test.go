package preflight

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// TestPlacementLibrary covers the placement rules that come from
// k8s.io/component-helpers (taint toleration, required node affinity,
// nodeSelector) beyond TestNodeMatches.
func TestPlacementLibrary(t *testing.T) {
	node := pfNode("n1", func(n *corev1.Node) {
		n.Labels["gpu"] = "a100"
		n.Labels["zone"] = "z1"
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "llm", Effect: corev1.TaintEffectNoSchedule}}
	})
	untainted := pfNode("n2", func(n *corev1.Node) { n.Labels["gpu"] = "h100" })
	tolerateExists := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	required := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	term := func(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: reqs}
	}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	tests := []struct {
		name string
		node *corev1.Node
		spec corev1.PodSpec
		want bool
	}{
		{name: "NoSchedule taint not tolerated", node: node, spec: corev1.PodSpec{}, want: false},
		{name: "NoSchedule taint, toleration of another key", node: node,
			spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "other", Operator: corev1.TolerationOpExists}}}, want: false},
		{name: "NoSchedule taint, Equal toleration with another value", node: node,
			spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch"}}}, want: false},
		{name: "NoSchedule taint tolerated with Exists", node: node, spec: corev1.PodSpec{Tolerations: tolerateExists}, want: true},
		{name: "NoSchedule taint tolerated with Equal", node: node,
			spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "llm", Effect: corev1.TaintEffectNoSchedule}}}, want: true},
		{name: "required affinity In", node: node,
			spec: corev1.PodSpec{Tolerations: tolerateExists, Affinity: required(term(req("gpu", corev1.NodeSelectorOpIn, "a100")))}, want: true},
		{name: "required affinity In, other value", node: node,
			spec: corev1.PodSpec{Tolerations: tolerateExists, Affinity: required(term(req("gpu", corev1.NodeSelectorOpIn, "h100")))}, want: false},
		{name: "required affinity NotIn", node: node,
			spec: corev1.PodSpec{Tolerations: tolerateExists, Affinity: required(term(req("gpu", corev1.NodeSelectorOpNotIn, "h100")))}, want: true},
		{name: "required affinity NotIn the node's value", node: untainted,
			spec: corev1.PodSpec{Affinity: required(term(req("gpu", corev1.NodeSelectorOpNotIn, "h100")))}, want: false},
		{name: "requirements of a term are ANDed", node: node,
			spec: corev1.PodSpec{Tolerations: tolerateExists, Affinity: required(term(req("gpu", corev1.NodeSelectorOpIn, "a100"), req("zone", corev1.NodeSelectorOpIn, "z2")))}, want: false},
		{name: "a term that does not parse matches nothing", node: node,
			spec: corev1.PodSpec{Tolerations: tolerateExists, Affinity: required(term(req("zone", corev1.NodeSelectorOpGt, "not-a-number")))}, want: false},
		{name: "a term that does not parse, ORed with one that matches", node: node,
			spec: corev1.PodSpec{Tolerations: tolerateExists, Affinity: required(term(req("zone", corev1.NodeSelectorOpGt, "x")), term(req("zone", corev1.NodeSelectorOpExists)))}, want: true},
		{name: "nodeSelector matches", node: untainted, spec: corev1.PodSpec{NodeSelector: map[string]string{"gpu": "h100"}}, want: true},
		{name: "nodeSelector label missing", node: untainted, spec: corev1.PodSpec{NodeSelector: map[string]string{"zone": "z1"}}, want: false},
		{name: "nodeSelector and affinity are ANDed", node: node,
			spec: corev1.PodSpec{Tolerations: tolerateExists, NodeSelector: map[string]string{"gpu": "a100"}, Affinity: required(term(req("zone", corev1.NodeSelectorOpIn, "z2")))}, want: false},
		{name: "matchFields NotIn the node's name", node: untainted, spec: corev1.PodSpec{Affinity: required(corev1.NodeSelectorTerm{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"n2"}}}})}, want: false},
		{name: "nodeName", node: untainted, spec: corev1.PodSpec{NodeName: "n2"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, newPlacement(klog.Background(), &tt.spec).allows(tt.node))
		})
	}
}
