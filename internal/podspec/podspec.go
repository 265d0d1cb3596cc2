// Package podspec holds what a rendered pod template lacks until the API
// server creates a pod from it: the defaulting that the resource
// arithmetic of component-helpers expects. The capacity preflight and the
// diff's GPU count both compute on its pods.
package podspec

import (
	corev1 "k8s.io/api/core/v1"
)

// Defaulted returns a Pod of spec with a limit standing for an absent
// request, in each container and init container (as the API server
// defaults a pod it creates: SetDefaults_Pod) and at the pod level. The
// component-helpers functions compute on pods the API server has
// defaulted; a rendered pod template has not been, and the defaulting
// lives in k8s.io/kubernetes, which is not importable as a library: so
// this part is hand-written. spec is not modified.
//
// At the pod level a limit stands for an absent request as it did before
// component-helpers was used here; the API server defaults an absent
// pod-level request to the containers' aggregate request when they set
// one, which only differs when pod-level limits are set without requests.
func Defaulted(spec *corev1.PodSpec) *corev1.Pod {
	s := *spec
	s.Containers = withDefaultRequests(spec.Containers)
	s.InitContainers = withDefaultRequests(spec.InitContainers)
	if spec.Resources != nil {
		r := *spec.Resources
		r.Requests = requestsOrLimits(r.Requests, r.Limits)
		s.Resources = &r
	}
	return &corev1.Pod{Spec: s}
}

func withDefaultRequests(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = cs[i]
		out[i].Resources.Requests = requestsOrLimits(cs[i].Resources.Requests, cs[i].Resources.Limits)
	}
	return out
}

// requestsOrLimits returns requests with limits standing for the absent
// ones (requests itself when none is absent).
func requestsOrLimits(requests, limits corev1.ResourceList) corev1.ResourceList {
	missing := false
	for name := range limits {
		if _, ok := requests[name]; !ok {
			missing = true
			break
		}
	}
	if !missing {
		return requests
	}
	out := make(corev1.ResourceList, len(requests)+len(limits))
	for name, q := range limits {
		out[name] = q
	}
	for name, q := range requests {
		out[name] = q
	}
	return out
}
