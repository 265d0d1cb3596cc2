// The pods' informers' client: lists and watches of pods whose protobuf
// bytes are cut down before they are decoded to what the informers keep
// (see slimPod), since decoding a pod's spec and managedFields is most of
// the cost of watching the pods of a big rollout.

package wait

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/vllmctl/vllmctl/internal/podwire"
)

// podListWatcher lists and watches the pods of a namespace, as the typed
// client's PodInterface does.
type podListWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewPodWatchClient returns the REST client of cfg's cluster for the pods
// the RolloutWatcher watches (see [RolloutWatcher.WithPodWatchClient]): it
// asks for protobuf and, before a Pod or PodList is decoded, leaves out of
// its bytes most of what the informers would drop after decoding
// (slimPod): managedFields, and the spec but for the node and the
// containers' names and startup probes (podwire.Watched). cfg is
// normally a [StreamConfig].
func NewPodWatchClient(cfg *rest.Config) (rest.Interface, error) {
	return podwire.NewClient(cfg, podwire.Watched)
}

// podsIn returns the list and watch of the pods of namespace for an
// informer: through the pods' REST client when there is one.
func (r *rolloutRun) podsIn(namespace string) podListWatcher {
	if r.podRC == nil {
		return r.client.CoreV1().Pods(namespace)
	}
	return podwire.Pods{RC: r.podRC, Namespace: namespace}
}

// replicaSetListWatcher and deploymentListWatcher list and watch
// ReplicaSets and Deployments, as the typed client's interfaces do.
type replicaSetListWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*appsv1.ReplicaSetList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

type deploymentListWatcher interface {
	List(ctx context.Context, opts metav1.ListOptions) (*appsv1.DeploymentList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewAppsWatchClient returns the REST client of cfg's cluster for the
// Deployments and ReplicaSets the RolloutWatcher watches (see
// [RolloutWatcher.WithAppsWatchClient]): it asks for protobuf and decodes
// them without their pod templates, which they carry a digest of instead
// (podwire.NewAppsClient), and without their managedFields. cfg is
// normally a [StreamConfig].
func NewAppsWatchClient(cfg *rest.Config) (rest.Interface, error) {
	return podwire.NewAppsClient(cfg)
}

// replicaSetsIn returns the list and watch of the ReplicaSets of
// namespace for an informer: through the apps' REST client when there is
// one.
func (r *rolloutRun) replicaSetsIn(namespace string) replicaSetListWatcher {
	if r.appsRC == nil {
		return r.client.AppsV1().ReplicaSets(namespace)
	}
	return podwire.ReplicaSets{RC: r.appsRC, Namespace: namespace}
}

// deploymentsIn returns the list and watch of the Deployments of
// namespace for an informer: through the apps' REST client when there is
// one.
func (r *rolloutRun) deploymentsIn(namespace string) deploymentListWatcher {
	if r.appsRC == nil {
		return r.client.AppsV1().Deployments(namespace)
	}
	return podwire.Deployments{RC: r.appsRC, Namespace: namespace}
}
