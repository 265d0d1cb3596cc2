package release

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/vllm"
	"github.com/vllmctl/vllmctl/release/storage"
)

// PodChartValues is the values mapping of the chart that made pod, for
// diagnose's hints: the pod's controllers are followed up (ReplicaSet,
// Deployment, StatefulSet, Job) to an object of a vllmctl release, whose
// latest record names its chart (release.ChartValuesMap). nil, so that
// the hints name flags and the pod's values only, when the pod belongs to
// no release, to a chart that declares no mapping, or anything cannot be
// read.
func PodChartValues(ctx context.Context, client kubernetes.Interface, namespace, pod string, red *diff.Redactor) vllm.ValuesMap {
	var obj metav1.Object
	p, err := client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	obj = p
	for range 4 {
		if o, ok := owner.Of(obj); ok {
			return releaseChartValues(ctx, client, orNamespace(o.Namespace, namespace), o.Release, red)
		}
		ref := metav1.GetControllerOf(obj)
		if ref == nil {
			return nil
		}
		switch ref.Kind {
		case "ReplicaSet":
			obj, err = client.AppsV1().ReplicaSets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		case "Deployment":
			obj, err = client.AppsV1().Deployments(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		case "StatefulSet":
			obj, err = client.AppsV1().StatefulSets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		case "Job":
			obj, err = client.BatchV1().Jobs(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		default:
			return nil
		}
		if err != nil {
			return nil
		}
	}
	return nil
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
