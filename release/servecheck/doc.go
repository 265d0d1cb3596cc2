// Package servecheck owns the serve check of a revision's pods, without
// the engine: its configuration, the flags (Options) and the chart's
// `serveCheck:` values resolved into a Config (Resolve; an invalid value
// is an InputError, exit code 2); the pods that serve a release's traffic
// (Pods: selected by its Services, Ready and not terminating, of the
// revision's ReplicaSets and ControllerRevisions; a revision's new pods
// for the analysis' bake); and the check of them (Checker.Run over
// wait.CheckServing), its progress reported through a function.
//
// It imports release/cluster, release/storage, wait and internal/*, never
// release: release.Engine wires it to its clients and progress, and keeps
// the revision's lock fresh while it runs (release/serve.go).
package servecheck
