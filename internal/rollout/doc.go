// Package rollout holds what a rollout's watch reports, as vllmctl's
// outputs and its release records carry it (their JSON is part of the
// contract: docs/json-output.md, docs/release-record.md):
//
//   - the progress of a wait: an [Event] per change of an object's
//     [Status], with the [RolloutProgress] of a Deployment, StatefulSet or
//     LeaderWorkerSet and the [PodPhase] of its new pods;
//   - the [Verdict] of a rollout and, when it failed, its [Diagnosis] (the
//     one failure type: stored in records, returned in results), whose
//     cause is a [vllmcause.Cause];
//   - the [ServeReport] of the serve check.
//
// It holds types and their small methods only: the watcher that produces
// them is package wait, their printers package termout. It sits below
// both, and below release/storage, so that the record's format does not
// live in the watcher.
package rollout
