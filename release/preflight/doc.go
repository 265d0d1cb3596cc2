// Package preflight is vllmctl's rollout capacity preflight: before a
// release is applied, it checks that every pod the apply adds (a new
// Deployment's, a changed pod template's surge pods, the pods of a replica
// increase, from the chart or an HPA's minReplicas) fits on the cluster's
// nodes and within the namespace's ResourceQuotas, and applies the surge
// policy. The engine groups of a multi-node release (StatefulSets
// labelled vllmctl.io/group, [GroupLabel]) are checked for gang fit: a
// group serves only when all its N pods run at once, each on its own node
// when its pods carry a required podAntiAffinity on kubernetes.io/hostname
// among themselves, so N distinct candidate nodes must each have one pod's
// requests free at the same time (the group's own live pods, deleted
// before the new ones start, count as gone on an upgrade; an unchanged
// group needs nothing, or room for the pods a size increase adds). Groups
// are placed one after another, after the Deployments, each reserving its
// nodes and quota before the next; no strategy makes a group fit, so one
// that does not is refused under auto as under strict, and under off no
// group is checked. Other StatefulSets are not checked (a note says so).
//
// The package owns:
//
//   - the surge policy (--surge-policy: [SurgePolicyAuto],
//     [SurgePolicyStrict], [SurgePolicyOff]) and the strategy overrides
//     (--max-surge, --max-unavailable: [ParseIntOrPercent]);
//   - the check itself, [Run], and its result, [Report]: per Deployment what
//     its rollout needs, what is free, and the verdict, and per engine
//     group ([GroupPreflight], the report's groups) its size, what a pod
//     needs, its candidate nodes, those that fit and the verdict, printable
//     as tables and embedded in vllmctl's JSON result documents;
//   - the one rule for rewriting a Deployment's rollout strategy,
//     [SetStrategy], which [ApplyOverrides] uses to write the report's
//     effective strategies into the objects to apply.
//
// The files split it by idea: report.go (the report and the errors),
// strategy.go (strategy resolution, surge policy, the override),
// preflight.go (the entry point and per-Deployment preparation),
// inventory.go (what is read from the cluster: live Deployments, a
// namespace's pods, quotas, PodDisruptionBudgets, HorizontalPodAutoscalers,
// the paged list), nodes.go (the candidate nodes, the pods bound to them,
// the pending pods competing for them), placement.go (which
// nodes a pod may go to), capacity.go (resource vectors, pod requests,
// node headroom), quota.go (ResourceQuota accounting), simulation.go
// (the rolling-update step simulation) and groups.go (the engine groups'
// gang fit).
//
// Pod requests and limits, node affinity, nodeSelector and taint
// toleration follow Kubernetes through k8s.io/component-helpers; lists that
// may be long (nodes, pods) are paged with k8s.io/client-go/tools/pager.
//
// What it reads depends on the release, not on the size of the cluster:
// the nodes (one list), then only the pods bound to the nodes a pod of the
// release may go to and whose allocatable holds one such pod (a list per
// node, by field selector spec.nodeName, which the API server serves from
// its watch cache through its node index), and the pods of the release's
// namespace. Above maxNodeLists candidate nodes, one paged list of all pods
// is cheaper in requests and replaces the per-node lists. A namespace
// already listed whole (a live workload's, for its old pods, which are
// read first) is left out of those lists (metadata.namespace!=): a big
// release's own pods are read once.
//
// The package does not import package release (release imports it).
// Errors that map to a contract exit code implement ExitCode() int.
package preflight
