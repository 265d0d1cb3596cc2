// Package diff computes what a deploy would change: for each rendered object
// a server-side apply with dryRun=All, through the same path a real deploy
// takes (field manager vllmctl, the same --force-conflicts setting, the HPA
// rule that leaves .spec.replicas alone), compared with the live object; and
// for each object of the deployed revision that the new one no longer has
// and that is still live with the release's labels, a prune.
//
// [Compute] takes the rendered objects, a [Cluster] (a dry run and a
// getter of live objects; cluster.NewDiffCluster, or Applier.DiffCluster,
// builds one that goes through cluster.Applier.Apply) and the objects of
// the previous revisions, and returns a [Report]: per object its [Action]
// (change, create or prune) and a unified diff of the object's YAML with 3
// lines of context, after the noise the API server writes by itself
// (managedFields, resourceVersion, generation, uid, creationTimestamp,
// status, the Deployment revision annotation, ...) is removed, plus a
// [Summary]. For a Deployment whose pod template changes, a [Rollout]
// tells how many pods the new ReplicaSet has and how many extra GPUs the
// surge needs. When another field manager owns fields the apply would
// change (a hand edit such as kubectl scale), the dry run is repeated with
// force so the drift still shows, and the object carries the conflicts
// (ObjectDiff.Note: "conflict: .spec.replicas owned by "kubectl-scale";
// deploy needs --force-conflicts"). This package does not import release, so release can use
// it (deploy --diff, "up to date").
//
// Secret values never leave this package: the data and stringData of a
// Secret are replaced by per-key markers, (changed), (unchanged), (added)
// and (removed), before anything is rendered, and an error whose message
// could echo a value is replaced by one with the values redacted or the
// API server's message withheld (see [RedactedError]).
//
// It also holds the one redaction of the program (docs/architecture.md,
// "Secret values: one redaction"): a [Redactor] knows the values of the
// Secrets a command rendered or read; a [Writer] passes every line of the
// command's output through it; [RedactCopy] copies a document or a record
// with every string passed through it (fields tagged `redact:"keep"`
// aside).
//
// [Report.WriteText] renders the report for a terminal or a log;
// [Report.WriteJSON] and [Report.WriteYAML] render it as one document
// {objects:[{object, action, diff, rollout, conflicts}], summary:{change,
// create, prune, conflicts}}.
package diff
