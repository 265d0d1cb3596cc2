// Package storage owns the release records: their format, the stores that
// keep them, the lock that serialises operations on a release and the
// status transitions of a revision. It does no cluster I/O beyond reading
// and writing records, and knows nothing of applying or watching objects.
//
// A release revision is stored as one Secret in the release namespace, named
// vllmctl.release.v1.<release>.v<revision>, of type vllmctl.io/release.v1,
// labelled with the release, the revision and the status, and holding under
// the data key "release" the gzip-compressed JSON encoding of a [Release]
// (docs/release-record.md). A record's failure and serve check are the
// types the rollout watcher reports, [rollout.Diagnosis] and
// [rollout.ServeReport] of internal/rollout, a package below both: storage
// imports no watcher package.
//
// [Store] is the storage abstraction; [Secrets] keeps records in Secrets
// through client-go, [Memory] keeps them in memory (tests, dry runs).
// Listing is lazy: [Store.List] returns [Entry] values that carry the
// revision and the status from the labels and decode the record only when
// asked; the entries of one listing share a decompressor, and a record
// decompresses to at most [MaxDecodedBytes]. [Rewriting] wraps a Store so
// that what it writes is a rewritten copy (the release engine's redaction).
//
// A pending record (pending-install, pending-upgrade, pending-rollback) is
// the lock of its release: [Acquire] creates the next revision as pending,
// and because a create of an existing name fails, two racing writers cannot
// both win. The holder later finishes its record with [MarkDeployed],
// [MarkFailed] or [MarkUninstalled]; [PruneHistory] keeps the history
// bounded and [Repair] finishes records a killed holder left pending.
//
// Errors that map to an exit code implement ExitCode() int
// (internal/exitcode).
package storage
