// cluster.go holds cluster helpers (direct client): namespaces, fake kwok nodes, rollout checks.

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ---------------------------------------------------------------------------
// Cluster helpers (direct client, not counted).

// namespace creates a fresh namespace and waits for its default service
// account (pods are refused before it exists).
func (b *bench) namespace(ctx context.Context, prefix string) (string, error) {
	return b.namespaceOn(ctx, b.client, prefix)
}

// namespaceOn creates a fresh namespace with client (the local cluster's,
// or another fleet cluster's); cleanup deletes it with the same client.
func (b *bench) namespaceOn(ctx context.Context, client kubernetes.Interface, prefix string) (string, error) {
	name := fmt.Sprintf("bench-%s-%s-%s", prefix, b.id, utilrand.String(4))
	if len(name) > 63 {
		name = name[:63]
	}
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"vllmctl.io/bench": b.id},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create namespace %s: %w", name, err)
	}
	b.mu.Lock()
	b.namespaces[name] = client
	b.mu.Unlock()
	err = kwait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("default service account of %s: %w", name, err)
	}
	return name, nil
}

// deleteNamespace deletes ns and waits until it is gone, so that its pods
// no longer hold capacity when the next run starts.
func (b *bench) deleteNamespace(ctx context.Context, ns string) error {
	b.mu.Lock()
	client := b.namespaces[ns]
	b.mu.Unlock()
	if client == nil {
		client = b.client
	}
	err := client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	err = kwait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not deleted: %w", ns, err)
	}
	b.mu.Lock()
	delete(b.namespaces, ns)
	b.mu.Unlock()
	return nil
}

// addNodes creates n fake kwok nodes (as cmd/devcluster/cluster/nodes.yaml
// defines the local cluster's), labelled and tainted vllmctl.io/pool=pool,
// and waits until they are Ready.
func (b *bench) addNodes(ctx context.Context, prefix, pool string, n int, capacity corev1.ResourceList) error {
	var names []string
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("%s-%s-%d", prefix, b.id, i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{
					"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
					"type": "kwok", "vllmctl.io/pool": pool, "vllmctl.io/bench": b.id,
				},
			},
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "vllmctl.io/pool", Value: pool, Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		if _, err := b.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		b.mu.Lock()
		b.nodes = append(b.nodes, name)
		b.nodePool[name] = pool
		b.mu.Unlock()
		names = append(names, name)
	}
	return kwait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			node, err := b.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			ready := false
			for _, c := range node.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if !ready {
				return false, nil
			}
		}
		return true, nil
	})
}

// deleteNodes deletes the fake nodes of pool ("": all of them).
func (b *bench) deleteNodes(ctx context.Context, pool string) {
	b.mu.Lock()
	var nodes, keep []string
	for _, n := range b.nodes {
		if pool == "" || b.nodePool[n] == pool {
			nodes = append(nodes, n)
		} else {
			keep = append(keep, n)
		}
	}
	b.nodes = keep
	b.mu.Unlock()
	if len(nodes) > 0 {
		progress("deleting %d fake node(s)", len(nodes))
	}
	for _, n := range nodes {
		if err := b.client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			progress("delete node %s: %v", n, err)
		}
	}
}

// rolledOut checks that the release's Deployment runs image tag tag and
// has rolled out completely (the previous revision serving, after a
// failed upgrade).
func (b *bench) rolledOut(ctx context.Context, ns, tag string) error {
	return rolledOutOn(ctx, b.client, ns, tag)
}

// rolledOutOn is rolledOut with client (another fleet cluster's).
func rolledOutOn(ctx context.Context, client kubernetes.Interface, ns, tag string) error {
	var d *appsv1.Deployment
	err := kwait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		d, err = client.AppsV1().Deployments(ns).Get(ctx, release, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want, nil
	})
	if d == nil {
		return fmt.Errorf("deployment %s/%s: %w", ns, release, err)
	}
	if image := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(image, ":"+tag) {
		return fmt.Errorf("deployment %s/%s runs %s, want tag %s", ns, release, image, tag)
	}
	if err != nil {
		return fmt.Errorf("deployment %s/%s not rolled out (status %+v): %w", ns, release, d.Status, err)
	}
	return nil
}
