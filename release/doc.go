// Package release holds vllmctl's verbs as methods of one [Engine] (the
// record store, the object client, the watcher, the clock), in the manner
// of Helm's pkg/action over its Configuration: [Engine.Deploy] (render,
// capacity preflight, dry-run diff, lock, apply, record the ReplicaSets,
// watch, automatic rollback, canary and its analysis), [Engine.Rollback],
// [Engine.Wait] (the wait command), [Engine.Diff], [Engine.Status],
// [Engine.Test] and [Engine.Uninstall]; [Adopter] and [Handoverer] also
// hold the field-manager mover they need.
//
// The layers below it are packages of their own: release/storage keeps the
// records, the lock and the status transitions; release/cluster applies,
// dry-runs and prunes objects, creates CRDs and finds ReplicaSets;
// release/preflight checks capacity; release/analysis measures canary and
// new pods from their metrics and decides what the measurements mean;
// release/canary decides which Deployments a canary holds and runs its
// phases and gate; release/servecheck resolves the serve check and
// reads and checks the pods that serve; release/groups plans the waves
// of engine groups and their surge copies; wait watches a rollout and
// diagnoses its failure; diff compares desired and live objects; charts
// renders. No package below imports this one
// (TestNothingBelowReleaseImportsIt).
//
// Errors that map to an exit code implement ExitCode() int
// (internal/exitcode).
package release
