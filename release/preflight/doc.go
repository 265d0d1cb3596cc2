// Package preflight is vllmctl's rollout capacity preflight: before a
// release is applied, it checks that every pod the apply adds (a new
// Deployment's, a changed pod template's surge pods, the pods of a replica
// increase, from the chart or an HPA's minReplicas) fits on the cluster's
// nodes and within the namespace's ResourceQuotas, and applies the surge
// policy.
//
// The package owns:
//
//   - the surge policy (--surge-policy: [SurgePolicyAuto],
//     [SurgePolicyStrict], [SurgePolicyOff]) and the strategy overrides
//     (--max-surge, --max-unavailable: [ParseIntOrPercent]);
//   - the check itself, [Run], and its result, [Report]: per Deployment what
//     its rollout needs, what is free, and the verdict, printable as a table
//     and embedded in vllmctl's JSON result documents;
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
// node headroom), quota.go (ResourceQuota accounting) and simulation.go
// (the rolling-update step simulation).
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
// is cheaper in requests and replaces the per-node lists.
//
// The package does not import package release (release imports it).
// Errors that map to a contract exit code implement ExitCode() int.
package preflight
