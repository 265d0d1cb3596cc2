package modelfit

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vllmctl/vllmctl/release/preflight"
)

// GPUMemoryLabel is GPU Feature Discovery's label of one GPU's memory, in
// MiB.
const GPUMemoryLabel = "nvidia.com/gpu.memory"

// gpuMemory is the GPU memory a server's pods get: from the candidate
// nodes (Ready, schedulable, with nvidia.com/gpu allocatable for the
// container's GPUs, matching the pod's nodeSelector, required node
// affinity and tolerations) that carry GPUMemoryLabel.
type gpuMemory struct {
	// MiB is the largest GPU memory among the candidates: a refusal must
	// hold on every node the pods may get. 0 when unknown.
	MiB int64
	// Smallest is the smallest (differs from MiB on a mixed pool).
	Smallest int64
	// From says where MiB came from, naming the nodes.
	From string
	// Unknown says why it is unknown.
	Unknown string
}

// candidateGPUMemory reads the GPU memory of the nodes pod may use.
func candidateGPUMemory(nodes []corev1.Node, pod *corev1.Pod, gpus int64) gpuMemory {
	mayPlace := preflight.MayPlace(klog.Background(), &pod.Spec)
	byMiB := map[int64][]string{}
	candidates, unlabelled := 0, 0
	for i := range nodes {
		n := &nodes[i]
		if q, ok := n.Status.Allocatable["nvidia.com/gpu"]; !ok || q.Value() < max(gpus, 1) || !mayPlace(n) {
			continue
		}
		candidates++
		mib, err := strconv.ParseInt(strings.TrimSpace(n.Labels[GPUMemoryLabel]), 10, 64)
		if err != nil || mib <= 0 {
			unlabelled++
			continue
		}
		byMiB[mib] = append(byMiB[mib], n.Name)
	}
	if candidates == 0 {
		return gpuMemory{Unknown: fmt.Sprintf("no Ready node the pods may use has %d nvidia.com/gpu allocatable", max(gpus, 1))}
	}
	if len(byMiB) == 0 {
		return gpuMemory{Unknown: fmt.Sprintf("none of the %d candidate GPU nodes carries the %s label (GPU Feature Discovery): set modelFit.gpuMemoryMiB in the values", candidates, GPUMemoryLabel)}
	}
	var sizes []int64
	for m := range byMiB {
		sizes = append(sizes, m)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] > sizes[j] })
	g := gpuMemory{MiB: sizes[0], Smallest: sizes[len(sizes)-1]}
	g.From = fmt.Sprintf("%s %d MiB on %s", GPUMemoryLabel, sizes[0], nodeList(byMiB[sizes[0]]))
	if len(sizes) > 1 {
		g.From += fmt.Sprintf(" (the largest of the candidates; %d MiB on %s)", g.Smallest, nodeList(byMiB[g.Smallest]))
	}
	if unlabelled > 0 {
		g.From += fmt.Sprintf("; %d candidate nodes carry no such label", unlabelled)
	}
	return g
}

// nodeList names up to three nodes.
func nodeList(names []string) string {
	sort.Strings(names)
	if len(names) <= 3 {
		return "node " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("nodes %s and %d more", strings.Join(names[:3], ", "), len(names)-3)
}
