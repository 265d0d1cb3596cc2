package cluster

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/release/storage"
)

// CurrentReplicaSets returns, for every Deployment among objs (in order),
// the ReplicaSet carrying its current pod template; see
// [CurrentReplicaSet]. Deployments without a namespace are looked up in
// namespace.
func CurrentReplicaSets(ctx context.Context, client kubernetes.Interface, objs []*unstructured.Unstructured, namespace string) ([]storage.ReplicaSetRef, error) {
	return CurrentReplicaSetsFrom(ctx, client, objs, namespace, nil, Stall{})
}

// CurrentReplicaSet is currentReplicaSet reading the Deployment; it waits until the Deployment controller has observed the
// Deployment's latest generation (status.observedGeneration >=
// metadata.generation), watching the Deployment from the resourceVersion it
// read, then returns the ReplicaSet the Deployment controls whose pod
// template equals the Deployment's, ignoring the pod-template-hash label:
// the controller's own rule for its "new" ReplicaSet. If several match, the
// oldest wins, as in the controller.
//
// ctx bounds the wait. A paused Deployment, or one whose controller has not
// created the ReplicaSet, is an error.
func CurrentReplicaSet(ctx context.Context, client kubernetes.Interface, namespace, name string) (storage.ReplicaSetRef, error) {
	return currentReplicaSet(ctx, client, namespace, name, nil, Stall{})
}
