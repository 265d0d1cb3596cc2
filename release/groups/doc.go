// Package groups owns how a multi-node release's engine groups (the
// StatefulSets labelled Label, one per group) roll out, without the
// engine: the plan of the waves (PlanWaves: which changed groups go first,
// with the canary's or maxUnavailable's count, and which follow wave by
// wave), and the temporary surge copies of a grouped upgrade with
// --max-surge (SurgeCopy, SurgeLabel; SurgeRefused tells a preflight
// refusal of the copies alone).
//
// It imports release/cluster, release/preflight and internal/*, never
// release: release.Engine applies and watches the waves and the copies
// (release/waves.go, release/surge_group.go).
package groups
