package podhttp

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestPort(t *testing.T) {
	pod := func(ports ...[]corev1.ContainerPort) *corev1.Pod {
		p := &corev1.Pod{}
		for _, ps := range ports {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Ports: ps})
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want int
	}{
		{"no ports", pod(nil), DefaultPort},
		{"no containers", pod(), DefaultPort},
		{"first TCP port", pod([]corev1.ContainerPort{{ContainerPort: 9000}, {ContainerPort: 9001}}), 9000},
		{"named http wins", pod([]corev1.ContainerPort{{ContainerPort: 9000}}, []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}), 8080},
		{"UDP skipped", pod([]corev1.ContainerPort{{ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 8001, Protocol: corev1.ProtocolTCP}}), 8001},
		{"UDP named http is no HTTP", pod([]corev1.ContainerPort{{Name: "http", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}), DefaultPort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Port(tc.pod))
		})
	}
}
