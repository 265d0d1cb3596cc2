// Package wait waits for applied objects to become ready.
//
// A [Waiter] watches a set of objects until every one is Current (ready, in
// kstatus terms), one fails, or a timeout passes. While it waits it sends
// progress as [rollout.Event] values on the channel given in [Options], and closes
// that channel when it returns. The [Result] says which objects were not
// Current, and why.
//
// [KstatusWaiter] is the first implementation: it watches (never polls) with
// the kstatus status watcher of sigs.k8s.io/cli-utils and maps its computed
// statuses. Implementations that detect failures earlier (a crash-looping
// pod, say) satisfy the same interface.
//
// [RolloutWatcher] is one: its [rollout.Diagnosis] of a failed vLLM server names
// the cause Kubernetes cannot name (GPU memory, KV cache, Hugging Face
// token, /dev/shm, NCCL, ...; see [vllmcause.Cause], named by that package's classifier) from the container's log, its
// last termination, the pod's events and spec, with hints naming the
// setting to change; its progress shows each new pod's phase, with the
// startup probe's budget left while the weights load. A container's
// termination whose log (read once per termination) names a cause no
// restart cures fails at once ([rollout.VerdictKnownCause], see [vllmcause.Cause.Decisive]);
// other crashes wait for RolloutOptions.MaxRestarts. It follows
// StatefulSets as Deployments: Current by kubectl rollout status' rules
// (see [StatefulSetRolledOut]), failed when a pod of the update revision
// (its label controller-revision-hash, see [PodRevision], equal to
// status.updateRevision) meets a pod verdict, with the same Diagnosis
// (its Object the StatefulSet), or on the StatefulSet's FailedCreate
// events; other revisions' pods failing are warnings. Given a dynamic
// client it follows LeaderWorkerSets too (see [LeaderWorkerSetRolledOut]):
// the verdicts judge the pods of the current template revision (the
// leader StatefulSet's label [LeaderWorkerSetRevisionLabel]), and since
// the LWS controller recreates a whole group at a container's restart, a
// group recreated MaxRestarts times fails ([rollout.VerdictGroupRecreated]), with
// the log of its last crash read while the pod existed. It judges Jobs and
// Pods that run to completion (restartPolicy Never or OnFailure: Helm's
// hooks and tests) too: Current once complete (a Job's condition
// Complete, a Pod's phase Succeeded), failed on a Job's condition Failed,
// a Pod's phase Failed, or at once when their pods meet the verdicts of a
// rollout's pods, with the same Diagnosis.
//
// Its informers hold what the verdicts read: no managedFields, and of a
// pod only its metadata, status, node and containers' names and startup
// probes (a diagnosis reads the failing pod again, whole). A big rollout's
// thousands of pod updates are judged together: after an evaluation that
// took more than 100µs the watcher lets changes pile up for 999 times as
// long (at most 500ms), so judging takes at most a thousandth of a core; a
// Deployment or StatefulSet that rolled out, or a Deployment that failed,
// is judged at once.
//
// What it reports lives below it, so that the release record and the
// printers need not import the watcher: the events, verdicts, diagnosis
// and serve report in package rollout (internal/rollout), the cause
// classifier and its hints in package vllmcause (internal/vllmcause), the
// progress printers and the sanitiser of untrusted text (SanitizeLine, which
// every Diagnosis a wait returns has been through) in package termout
// (internal/termout).
package wait
