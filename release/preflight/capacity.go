package preflight

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/vllmctl/vllmctl/internal/podspec"
	"github.com/vllmctl/vllmctl/internal/vllm"
)

// This file holds the capacity arithmetic of the preflight: resource
// vectors, what one pod requests (the way Kubernetes computes it), and
// node headroom.

// resVec is an amount of resources, every resource in milli-units (a pod
// count of 1 is 1000), so that cpu, memory, GPUs and pods share one
// arithmetic.
type resVec map[corev1.ResourceName]int64

func vecOf(list corev1.ResourceList) resVec {
	v := resVec{}
	for name, q := range list {
		v[name] = q.MilliValue()
	}
	return v
}

func (v resVec) add(o resVec) {
	for name, n := range o {
		v[name] += n
	}
}

func (v resVec) sub(o resVec) {
	for name, n := range o {
		v[name] -= n
	}
}

func (v resVec) clone() resVec {
	c := make(resVec, len(v))
	for name, n := range v {
		c[name] = n
	}
	return c
}

func (v resVec) scaled(n int64) resVec {
	c := make(resVec, len(v))
	for name, x := range v {
		c[name] = x * n
	}
	return c
}

// names returns the resources v holds a positive amount of, GPUs first,
// then cpu, memory, the others sorted, and pods last.
func (v resVec) names() []corev1.ResourceName {
	var out []corev1.ResourceName
	for name, n := range v {
		if n > 0 {
			out = append(out, name)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := resourceRank(out[i]), resourceRank(out[j])
		if ri != rj {
			return ri < rj
		}
		return out[i] < out[j]
	})
	return out
}

func resourceRank(name corev1.ResourceName) int {
	switch name {
	case vllm.GPUResource:
		return 0
	case corev1.ResourceCPU:
		return 1
	case corev1.ResourceMemory:
		return 2
	case corev1.ResourcePods:
		return 4
	}
	return 3
}

// strings formats v as resource name → quantity.
func (v resVec) strings() map[string]string {
	out := map[string]string{}
	for _, name := range v.names() {
		out[string(name)] = formatAmount(name, v[name])
	}
	return out
}

// formatAmount formats a milli-unit amount of a resource as a quantity.
func formatAmount(name corev1.ResourceName, milli int64) string {
	switch {
	case name == corev1.ResourceCPU:
		return resource.NewMilliQuantity(milli, resource.DecimalSI).String()
	case milli%1000 != 0:
		return resource.NewMilliQuantity(milli, resource.DecimalSI).String()
	case name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) || strings.HasSuffix(string(name), "memory"):
		return resource.NewQuantity(milli/1000, resource.BinarySI).String()
	}
	return resource.NewQuantity(milli/1000, resource.DecimalSI).String()
}

// podUsage is what one pod counts against nodes and quotas: requests
// (with a pod slot) and limits.
type podUsage struct {
	requests resVec
	limits   resVec
}

// usageOf returns what one pod of spec requests and its limits, aggregated
// by k8s.io/component-helpers/resource as the scheduler and the quota
// admission do: app containers and sidecars (restartable init containers)
// summed, each regular init container running alone next to the sidecars
// started before it, pod-level cpu and memory (and hugepages) replacing
// the containers' sum, and pod overhead on top (on limits, only where a
// limit is set). Only the spec is read, not the resources a resized pod
// reports in its status.
func usageOf(spec *corev1.PodSpec) podUsage {
	pod := podspec.Defaulted(spec)
	return podUsage{requests: requestsOf(pod), limits: vecOf(resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{}))}
}

// podRequests returns what one pod of spec requests, including one pod
// slot (see [usageOf]).
func podRequests(spec *corev1.PodSpec) resVec { return requestsOf(podspec.Defaulted(spec)) }

func requestsOf(pod *corev1.Pod) resVec {
	v := vecOf(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	v[corev1.ResourcePods] = 1000
	return v
}

// nodeState is one usable node: what it can give and what its pods use.
type nodeState struct {
	node *corev1.Node
	// alloc is the node's allocatable resources.
	alloc resVec
	// free is allocatable minus the requests of the pods holding resources
	// on it, minus what earlier Deployments of this preflight reserved.
	free resVec
	// podsRead is set once the pods bound to the node are subtracted
	// from free.
	podsRead bool
	// groups are the engine groups (StatefulSets) this preflight placed
	// pods of on the node, for messages.
	groups []string
}

// fitCount returns how many pods requesting per fit into free.
func fitCount(free, per resVec) int64 {
	best := int64(-1)
	for name, need := range per {
		if need <= 0 {
			continue
		}
		n := free[name] / need
		if free[name] < 0 {
			n = 0
		}
		if best < 0 || n < best {
			best = n
		}
	}
	if best < 0 {
		return 1 << 30 // requests nothing: unlimited
	}
	return best
}

// fitsIn reports whether per fits into have for every resource.
func fitsIn(have, per resVec) bool { return fitCount(have, per) >= 1 }
