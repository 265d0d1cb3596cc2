// Package release is vllmctl's release engine: the records of a release's
// revisions, the lock that serialises operations on a release, and the
// pruning of old revisions.
//
// A release revision is stored as one Secret in the release namespace, named
// vllmctl.release.v1.<release>.v<revision>, of type vllmctl.io/release.v1,
// labelled with the release, the revision and the status, and holding under
// the data key "release" the gzip-compressed JSON encoding of a [Release]
// (see shared/design/contract.md, "Release records").
//
// [Store] is the storage abstraction; [Secrets] keeps records in Secrets
// through client-go, [Memory] keeps them in memory for unit tests. Listing is
// lazy: [Store.List] returns [Entry] values that carry the revision and the
// status from the labels and decode the record only when asked; the entries
// of one listing share a decompressor, and a record decompresses to at most
// [MaxDecodedBytes].
//
// A pending record (pending-install, pending-upgrade, pending-rollback) is the
// lock of its release: [Acquire] creates the next revision as pending, and
// because a create of an existing name fails, two racing writers cannot both
// win. The holder later finishes its record with [MarkDeployed],
// [MarkFailed] or [MarkUninstalled].
//
// Errors that map to a contract exit code implement ExitCode() int.
package release
