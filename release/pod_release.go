package release

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/vllm"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// PodChartValues is the values mapping of the chart that made pod, for
// diagnose's hints: the pod's release (podRelease) and that release's
// latest record, which names its chart (release.ChartValuesMap). nil, so
// that the hints name flags and the pod's values only, when the pod
// belongs to no release, to a chart that declares no mapping, or anything
// cannot be read. dyn reads LeaderWorkerSets; nil: their pods are
// followed up to their StatefulSets only.
func PodChartValues(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, namespace, pod string, red *diff.Redactor) vllm.ValuesMap {
	p, err := client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	o, ok := podRelease(ctx, client, dyn, namespace, p)
	if !ok {
		return nil
	}
	return releaseChartValues(ctx, client, orNamespace(o.Namespace, namespace), o.Release, red)
}

// maxOwnerHops bounds the walk up a pod's controllers: a LeaderWorkerSet's
// worker pod is the longest chain (worker StatefulSet, leader pod, leader
// StatefulSet, LeaderWorkerSet).
const maxOwnerHops = 6

// podRelease is the vllmctl release pod belongs to: the first of pod and
// its controllers, followed up (ReplicaSet, Deployment, StatefulSet, Job;
// a LeaderWorkerSet's worker StatefulSet is controlled by its leader pod,
// the leader's StatefulSet by the LeaderWorkerSet), that carries a
// release's labels; else the LeaderWorkerSet the pod's
// leaderworkerset.sigs.k8s.io/name label names, when it does.
func podRelease(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, namespace string, pod *corev1.Pod) (owner.Owner, bool) {
	var obj metav1.Object = pod
	for range maxOwnerHops {
		if o, ok := owner.Of(obj); ok {
			return o, true
		}
		ref := metav1.GetControllerOf(obj)
		if ref == nil {
			break
		}
		next, err := controller(ctx, client, dyn, namespace, ref)
		if err != nil {
			break
		}
		obj = next
	}
	if name := pod.Labels[wait.LeaderWorkerSetNameLabel]; name != "" && dyn != nil {
		if lws, err := dyn.Resource(wait.LeaderWorkerSetResource()).Namespace(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return owner.Of(lws)
		}
	}
	return owner.Owner{}, false
}

// controller reads the controller ref names in namespace.
func controller(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, namespace string, ref *metav1.OwnerReference) (metav1.Object, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("controller %s %s: %w", ref.Kind, ref.Name, err)
	}
	switch {
	case ref.Kind == "ReplicaSet":
		return client.AppsV1().ReplicaSets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case ref.Kind == "Deployment":
		return client.AppsV1().Deployments(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case ref.Kind == "StatefulSet":
		return client.AppsV1().StatefulSets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case ref.Kind == "Job":
		return client.BatchV1().Jobs(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case ref.Kind == "Pod" && gv.Group == "":
		return client.CoreV1().Pods(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case ref.Kind == "LeaderWorkerSet" && gv.Group == wait.LeaderWorkerSetGroup && dyn != nil:
		return dyn.Resource(wait.LeaderWorkerSetResource()).Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	}
	return nil, fmt.Errorf("controller %s %s: not a kind followed", ref.Kind, ref.Name)
}

// releaseChartValues is the values mapping of the chart of release
// name's latest record in namespace (nil when none can be read). It
// teaches red the Secrets of every record of the release: the pod's log
// and messages may echo them.
func releaseChartValues(ctx context.Context, client kubernetes.Interface, namespace, name string, red *diff.Redactor) vllm.ValuesMap {
	entries, err := storage.NewSecrets(client, namespace).List(ctx, name)
	if err != nil || len(entries) == 0 {
		return nil
	}
	for _, e := range entries {
		if rec, err := e.Release(); err == nil {
			_ = LearnRecord(red, rec) // best effort: a record that does not parse teaches what it can
		}
	}
	latest := slices.MaxFunc(entries, func(a, b storage.Entry) int { return a.Revision - b.Revision })
	rec, err := latest.Release()
	if err != nil {
		return nil
	}
	return ChartValuesMap(rec.Chart)
}

func orNamespace(ns, def string) string {
	if ns == "" {
		return def
	}
	return ns
}
