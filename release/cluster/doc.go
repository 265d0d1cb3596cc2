// Package cluster owns the release engine's object I/O against the API
// server: server-side apply under vllmctl's field manager (with the
// HorizontalPodAutoscaler hand-over of replicas), server-side dry runs and
// the diff's view of the cluster ([NewDiffCluster]), pruning of objects a
// revision no longer renders, creating and reading
// CustomResourceDefinitions, REST mapping and discovery resets, parsing
// recorded manifests, and finding the ReplicaSet the Deployment controller
// made for a revision ([CurrentReplicaSetsFrom]).
//
// [Applier] is the one client; it holds a dynamic client and a RESTMapper.
// It knows the release records only by their labels and names (package
// storage) and never reads or writes a record. Errors that map to an exit
// code implement ExitCode() int (internal/exitcode).
package cluster
