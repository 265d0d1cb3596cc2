package podhttp

import corev1 "k8s.io/api/core/v1"

// DefaultPort is the port of a pod that declares no TCP container port:
// vLLM's OpenAI server's default.
const DefaultPort = 8000

// Port is the port a pod serves HTTP on: its TCP container port named
// http, else its first container's first TCP port, else DefaultPort. A
// port of another protocol (UDP, SCTP) never serves HTTP.
func Port(p *corev1.Pod) int {
	first := 0
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Protocol != "" && port.Protocol != corev1.ProtocolTCP {
				continue
			}
			if port.Name == "http" {
				return int(port.ContainerPort)
			}
			if first == 0 {
				first = int(port.ContainerPort)
			}
		}
	}
	if first == 0 {
		return DefaultPort
	}
	return first
}
