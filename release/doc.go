// Package release holds vllmctl's verbs, one type each, in the manner of
// Helm's pkg/action: [Deployer] (render, capacity preflight, dry-run diff,
// lock, apply, record the ReplicaSets, watch, automatic rollback, canary and
// its analysis),
// [Rollbacker], [Watcher] (the wait command), [Differ], [Statuser] and
// [Uninstaller], over one [Engine] that holds the record store, the object
// client, the watcher and the clock.
//
// The layers below it are packages of their own: release/storage keeps the
// records, the lock and the status transitions; release/cluster applies,
// dry-runs and prunes objects, creates CRDs and finds ReplicaSets;
// release/preflight checks capacity; release/analysis measures canary and
// new pods from their metrics; wait watches a rollout and diagnoses
// its failure; diff compares desired and live objects; charts renders. No
// package below imports this one.
//
// Errors that map to an exit code implement ExitCode() int
// (internal/exitcode).
package release
