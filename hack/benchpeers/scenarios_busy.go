// scenarios_busy.go holds scenario 6: the healthy upgrade on a quiet
// cluster and on a busy one (many nodes and pods the release cannot use).

package main

import (
	"context"
	"fmt"
	"strconv"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Size of the busy cluster: nodes without GPUs, and pods on them spread
// over namespaces of their own.
const (
	busyNodes      = 200
	busyPods       = 5000
	busyNamespaces = 10
)

// busy: scenario 6, vllmctl's healthy 3-replica GPU upgrade on the quiet
// cluster, then on the same cluster once 200 more nodes without GPUs and
// 5000 pods on them in other namespaces are added. What a deploy reads
// must depend on the nodes its pods may use, not on the cluster: the
// requests and bytes of the two should be about equal.
func (b *bench) busy(ctx context.Context) error {
	values := b.file("values.yaml")
	s := newScenario("busy-cluster", fmt.Sprintf(
		"vllmctl deploy of the healthy 3-replica GPU upgrade on the quiet cluster vs with %d more nodes without GPUs and %d pods on them in %d other namespaces",
		busyNodes, busyPods, busyNamespaces), "quiet", "busy")
	measure := func(tool string) error {
		for i := 1; i <= b.o.runs; i++ {
			r, err := b.attempt(ctx, s.name, func() (run, error) {
				return b.fresh(ctx, "busy-"+tool, func(ns string) (run, error) {
					if err := b.install(ctx, "vllmctl", ns, values); err != nil {
						return run{}, err
					}
					r, err := b.upgrade(ctx, "vllmctl", ns, values, "image.tag="+newTag)
					if err == nil {
						err = b.rolledOut(ctx, ns, newTag)
					}
					return r, err
				})
			})
			if ctx.Err() != nil {
				return ctx.Err()
			}
			b.add(s, tool, r, err)
		}
		return nil
	}
	if err := measure("quiet"); err != nil {
		return err
	}
	pool := b.pool + "-busy"
	progress("adding %d fake nodes without GPUs and %d pods on them", busyNodes, busyPods)
	if err := b.addNodes(ctx, "bench-busy", pool, busyNodes, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}); err != nil {
		return err
	}
	namespaces, err := b.busyPods(ctx, pool)
	if err == nil {
		err = measure("busy")
	}
	progress("deleting the busy namespaces")
	for _, ns := range namespaces {
		if derr := b.deleteNamespace(ctx, ns); derr != nil && err == nil {
			err = derr
		}
	}
	b.deleteNodes(ctx, pool)
	if err != nil {
		return err
	}
	b.finish(s)
	return nil
}

// busyPods creates busyPods small pods bound to the nodes of pool
// (spec.nodeName set: the scheduler is not involved), in busyNamespaces
// new namespaces, 16 at a time, and returns the namespaces.
func (b *bench) busyPods(ctx context.Context, pool string) ([]string, error) {
	var nodes, namespaces []string
	b.mu.Lock()
	for _, n := range b.nodes {
		if b.nodePool[n] == pool {
			nodes = append(nodes, n)
		}
	}
	b.mu.Unlock()
	for i := range busyNamespaces {
		ns, err := b.namespace(ctx, "busy-other"+strconv.Itoa(i))
		if err != nil {
			return namespaces, err
		}
		namespaces = append(namespaces, ns)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range busyPods {
		g.Go(func() error {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web", "vllmctl.io/bench": b.id}},
				Spec: corev1.PodSpec{
					NodeName:    nodes[i%len(nodes)],
					Tolerations: []corev1.Toleration{{Key: "vllmctl.io/pool", Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					}}},
				},
			}
			ns := namespaces[i%len(namespaces)]
			if _, err := b.client.CoreV1().Pods(ns).Create(gctx, pod, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create pod %s/%s: %w", ns, pod.Name, err)
			}
			return nil
		})
	}
	return namespaces, g.Wait()
}
