package preflight

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// This file simulates a Deployment's rollout a step at a time: whether the
// new pods of the step the strategy starts with fit next to (or in place
// of) the old ones on the matching nodes and in the quotas, and what the
// surge policy changes when they do not.

// disruptionsAllowed returns how many of replicas pods may be unavailable
// at once under the PDBs matching podLabels (computed from their spec as
// the disruption controller does, both forms rounding up), and the PDB
// that sets the limit; -1 when no PDB matches.
func disruptionsAllowed(pdbs []policyv1.PodDisruptionBudget, podLabels map[string]string, replicas int32) (int32, string, error) {
	allowed, by := int32(-1), ""
	for _, b := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if err != nil {
			return 0, "", fmt.Errorf("PodDisruptionBudget %s/%s: selector: %w", b.Namespace, b.Name, err)
		}
		if b.Spec.Selector == nil || !sel.Matches(labels.Set(podLabels)) {
			continue
		}
		n := replicas
		switch {
		case b.Spec.MaxUnavailable != nil:
			v, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MaxUnavailable, int(replicas), true)
			if err != nil {
				return 0, "", fmt.Errorf("PodDisruptionBudget %s/%s: maxUnavailable: %w", b.Namespace, b.Name, err)
			}
			n = int32(v)
		case b.Spec.MinAvailable != nil:
			v, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MinAvailable, int(replicas), true)
			if err != nil {
				return 0, "", fmt.Errorf("PodDisruptionBudget %s/%s: minAvailable: %w", b.Namespace, b.Name, err)
			}
			n = replicas - int32(v)
		}
		n = max(0, min(n, replicas))
		if allowed < 0 || n < allowed {
			allowed, by = n, b.Name
		}
	}
	return allowed, by, nil
}

// oldPod is a pod of the live Deployment that the rollout replaces.
type oldPod struct {
	node  string
	usage podUsage
}

// stepResult is the outcome of one rollout step's checks.
type stepResult struct {
	checks []CapacityCheck
	// placeable and admitted are how many of the step's pods the nodes can
	// place and the quotas admit.
	placeable, admitted int64
	pods                int64
}

// unlimited stands for "not limited" (no quota, nodes not checked).
const unlimited = int64(1) << 40

func (s stepResult) progress() bool { return min(s.placeable, s.admitted) >= 1 }
func (s stepResult) full() bool     { return min(s.placeable, s.admitted) >= s.pods }

// evalContext is what evaluating one Deployment needs.
type evalContext struct {
	d   *deploymentInput
	per podUsage
	// nodes are the nodes listed for the pod's label selector, nil when
	// node capacity is not checked; matches those the pod may go to.
	nodes   *nodeSet
	matches []*nodeState
	quotas  []*quotaState
	old     []oldPod
	// addedReserved is set once the pods of a replica increase are
	// reserved next to the old ones: later steps count around them.
	addedReserved bool
}

// evaluate checks one Deployment whose pod template changes or whose
// replica count goes up.
func (p *preflighter) evaluate(ctx context.Context, d *deploymentInput) error {
	e := d.entry
	spec := &d.rendered.Spec.Template.Spec
	ec := &evalContext{d: d, per: usageOf(spec)}
	e.PerPod = ec.per.requests.strings()
	// A paused Deployment does not roll out, but it still scales.
	if d.rendered.Spec.Paused && d.added == 0 {
		e.Verdict, e.Message = VerdictFits, "paused: the rollout waits until it is resumed"
		return nil
	}
	if e.Replicas == 0 {
		e.Verdict, e.Message = VerdictFits, "0 replicas: no pods"
		return nil
	}
	// The old pods first: their namespace, listed whole, is then left out
	// of the lists of pods by node (a big release's pods are read once).
	var err error
	if d.live != nil {
		if ec.old, err = p.oldPods(ctx, d.live); err != nil {
			return err
		}
	}
	if err := p.matchNodes(ctx, ec, newPlacement(klog.FromContext(ctx), spec)); err != nil {
		return err
	}
	quotas, err := p.quotasIn(ctx, e.Namespace)
	if err != nil {
		return err
	}
	for _, q := range quotas {
		if quotaApplies(q.quota, spec) {
			ec.quotas = append(ec.quotas, q)
		}
	}

	if p.impossiblePod(ec) {
		return nil
	}
	s := d.strategy
	switch {
	case d.live == nil:
		r := p.step(ec, StepCreate, int64(e.Replicas), 0)
		e.Checks = append(e.Checks, r.checks...)
		if !r.full() {
			p.conclude(e, VerdictImpossible, fmt.Sprintf("a new Deployment needs room for all its pods (%d) at once; no strategy changes that", e.Replicas))
			return nil
		}
		p.reserve(ec, int64(e.Replicas))
		e.Verdict = VerdictFits
	case e.Change == ChangeUnchanged || d.rendered.Spec.Paused:
		// No rollout: only the pods of the replica increase are new.
		p.scaleUp(ec)
	case s.recreate():
		r := p.step(ec, StepRecreate, int64(e.Replicas), int64(len(ec.old)))
		e.Checks = append(e.Checks, r.checks...)
		if !r.full() {
			p.conclude(e, VerdictImpossible, fmt.Sprintf("Recreate: the %d new pods do not fit even once every old pod is gone", e.Replicas))
			return nil
		}
		e.Verdict = VerdictFits
	default:
		return p.rolling(ctx, ec)
	}
	return nil
}

// matchNodes sets the nodes the pods may go to: those the placement
// allows and whose allocatable holds one pod (a node without the GPUs the
// pod requests is no place for it, however free its CPUs), and reads the
// pods bound to them. When no allowed node holds one pod, every allowed
// node is kept, unread: impossiblePod then names the largest.
func (p *preflighter) matchNodes(ctx context.Context, ec *evalContext, pl placement) error {
	set, err := p.nodesFor(ctx, &ec.d.rendered.Spec.Template.Spec)
	if err != nil || set == nil {
		return err
	}
	var allowed, hosts []*nodeState
	for _, n := range set.usable {
		if !pl.allows(n.node) {
			continue
		}
		allowed = append(allowed, n)
		if fitsIn(n.alloc, ec.per.requests) {
			hosts = append(hosts, n)
		}
	}
	if len(hosts) == 0 {
		ec.nodes, ec.matches = set, allowed
		return nil
	}
	ok, err := p.readPodsOn(ctx, hosts)
	if err != nil || !ok {
		return err
	}
	ec.nodes, ec.matches = set, hosts
	return p.noteCompetitors(ctx, ec)
}

// scaleUp checks the pods a replica increase adds, next to every running
// pod, and reserves them. It concludes and returns false when they do not
// all fit: no strategy changes that (maxSurge 0 does not help a scale-up:
// the Deployment controller creates the added pods before it removes any
// old one), so auto refuses as strict does. With an unchanged template
// (or a paused Deployment) this is the whole check.
func (p *preflighter) scaleUp(ec *evalContext) bool {
	e, d := ec.d.entry, ec.d
	added := int64(d.added)
	r := p.step(ec, StepScaleUp, added, 0)
	if !r.full() {
		e.Checks = append(e.Checks, r.checks...)
		fit := max(0, min(r.placeable, r.admitted, added))
		what := fmt.Sprintf("none of the %d new pods fits next to the running ones", added)
		switch {
		case added == 1:
			what = "the new pod does not fit next to the running ones"
		case fit > 0:
			what = fmt.Sprintf("only %d of the %d new pods fit next to the running ones", fit, added)
		}
		msg := fmt.Sprintf("replica increase from %d to %d blocked (%s): %s", d.liveReplicas, e.Replicas, blockedReason(r.checks), what)
		if p.policy == SurgePolicyOff {
			msg += fmt.Sprintf("; surge policy off: applying anyway, %d pod%s will stay Pending", added-fit, plural(added-fit))
		} else {
			msg += "; no rollout strategy changes that (maxSurge 0 does not help a scale-up): free capacity or lower the replica count"
		}
		p.conclude(e, VerdictImpossible, msg)
		return false
	}
	e.Checks = append(e.Checks, r.checks...)
	p.reserve(ec, added)
	ec.addedReserved = true
	if e.Change == ChangeUnchanged || d.rendered.Spec.Paused {
		e.Verdict = VerdictFits
		what := "pod template unchanged"
		if e.Change != ChangeUnchanged {
			what = "paused: the rollout waits until it is resumed"
		}
		e.Message = fmt.Sprintf("%s; replica increase from %d to %d: the %d new pod%s fit next to the running ones", what, d.liveReplicas, e.Replicas, added, plural(added))
	}
	return true
}

// rolling evaluates a RollingUpdate of a live Deployment and applies the
// surge policy. With a replica increase the controller starts the added
// pods and the surge pods next to every old pod, and removes an old pod
// only once enough new ones are available: the added pods must fit whatever
// the strategy, then the rollout needs the surge pods on top (or replaces
// old pods in the room left).
func (p *preflighter) rolling(ctx context.Context, ec *evalContext) error {
	if p.rollAsConfigured(ec) {
		return nil
	}
	// Not even one new pod can start. Would removing every old pod help?
	e := ec.d.entry
	all := int64(len(ec.old))
	if final := p.step(ec, StepReplace, max(all, 1), all); !final.progress() {
		e.Checks = append(e.Checks, final.checks...)
		p.conclude(e, VerdictImpossible, "a new pod does not fit even with every old pod gone")
		return nil
	}
	e.Verdict = VerdictSurgeBlocked
	reason := blockedReason(e.Checks)
	if p.keepBlockedStrategy(e, reason) {
		return nil
	}
	return p.replaceInPlace(ctx, ec, reason)
}

// rollAsConfigured tries the strategy as configured: the added pods of a
// replica increase, then the surge pods, then replacing up to
// maxUnavailable old pods at a time. It reports whether that settled the
// verdict.
func (p *preflighter) rollAsConfigured(ec *evalContext) bool {
	e, s := ec.d.entry, ec.d.strategy
	added := int64(ec.d.added)
	if added > 0 {
		// The added pods alone first: when they do not fit, that is the
		// reason, whatever the surge.
		probe := p.step(ec, StepScaleUp, added, 0)
		if !probe.full() {
			p.scaleUp(ec)
			return true
		}
	}
	// The Deployment controller never grows the new ReplicaSet past the
	// replica count (NewRSNewReplicas, pkg/controller/deployment/util):
	// beyond the added pods, no more surge pods come than there are old
	// ones, however large maxSurge (1000%, say) resolves.
	if surge := min(int64(s.Surge), int64(ec.d.liveReplicas)); surge > 0 {
		n := added + surge
		r := p.step(ec, StepSurge, n, 0)
		e.Checks = append(e.Checks, r.checks...)
		if fit := min(r.placeable, r.admitted, n); fit > added {
			e.Verdict = VerdictFits
			if fit < n {
				e.Message = fmt.Sprintf("%d of %d surge pods fit now; the others wait for old pods to go", fit-added, surge)
			}
			p.reserve(ec, fit)
			return true
		}
	}
	if added > 0 && !p.scaleUp(ec) {
		return true
	}
	if s.Unavailable > 0 {
		r := p.step(ec, StepReplace, int64(s.Unavailable), int64(s.Unavailable))
		if r.progress() {
			e.Checks = append(e.Checks, r.checks...)
			e.Verdict = VerdictFits
			if s.Surge > 0 {
				e.Message = fmt.Sprintf("surge pods do not fit; the rollout proceeds by replacing up to %d old pods at a time (maxUnavailable)", s.Unavailable)
			}
			return true
		}
		if s.Surge == 0 {
			e.Checks = append(e.Checks, r.checks...)
		}
	}
	return false
}

// keepBlockedStrategy concludes on a blocked surge when the surge policy
// may not change the strategy (policy off or strict, values the user
// set, a single replica), and reports whether it did.
func (p *preflighter) keepBlockedStrategy(e *DeploymentPreflight, reason string) bool {
	switch {
	case p.policy == SurgePolicyOff:
		e.Message = "surge blocked (" + reason + "); surge policy off: applying anyway, the rollout will stall"
	case p.policy == SurgePolicyStrict:
		p.conclude(e, VerdictSurgeBlocked, "surge blocked ("+reason+"); surge policy strict never changes the strategy: free capacity, or pass --max-surge 0 --max-unavailable 1 to replace pods one at a time")
	case e.Overridden:
		p.conclude(e, VerdictSurgeBlocked, "surge blocked ("+reason+") with the --max-surge/--max-unavailable given; the surge policy does not change values the user set")
	case e.Replicas <= 1:
		p.conclude(e, VerdictSurgeBlocked, "surge blocked ("+reason+"); with 1 replica, maxUnavailable 1 takes the service down, which surge policy auto does not do: pass --max-surge 0 --max-unavailable 1 to accept that, or free capacity")
	default:
		return false
	}
	return true
}

// replaceInPlace applies surge policy auto to a blocked surge: the
// strategy becomes maxSurge 0 with the smallest maxUnavailable that lets
// a new pod start, within what the PDBs allow and keeping one replica
// serving; it concludes SurgeBlocked when there is none.
func (p *preflighter) replaceInPlace(ctx context.Context, ec *evalContext, reason string) error {
	e, s := ec.d.entry, ec.d.strategy
	pdbs, err := p.pdbsIn(ctx, e.Namespace)
	if err != nil {
		return err
	}
	allowed, by, err := disruptionsAllowed(pdbs, ec.d.rendered.Spec.Template.Labels, e.Replicas)
	if err != nil {
		return fmt.Errorf("preflight: Deployment %s/%s: %w", e.Namespace, e.Name, err)
	}
	limit, limitBy := e.Replicas-1, "keeping one replica serving"
	if allowed >= 0 && allowed < limit {
		limit, limitBy = allowed, fmt.Sprintf("PodDisruptionBudget %s allows %d of %d pods down", by, allowed, e.Replicas)
	}
	for k := max(1, s.Unavailable+1); k <= limit; k++ {
		r := p.step(ec, StepReplace, int64(k), int64(k))
		if !r.progress() {
			continue
		}
		e.Checks = append(e.Checks, r.checks...)
		eff := s
		eff.MaxSurge, eff.MaxUnavailable = ptr.To(intstr.FromInt32(0)), ptr.To(intstr.FromInt32(k))
		eff.Surge, eff.Unavailable = 0, k
		e.Effective, e.Adjusted = &eff, true
		e.Message = fmt.Sprintf("%s (%s)", changeText(*e, "surge policy auto"), reason)
		return nil
	}
	p.conclude(e, VerdictSurgeBlocked, fmt.Sprintf("surge blocked (%s), and replacing pods in place needs more than %d unavailable at once (%s)", reason, limit, limitBy))
	return nil
}

// conclude marks e as refused unless the policy only reports.
func (p *preflighter) conclude(e *DeploymentPreflight, v Verdict, msg string) {
	e.Verdict, e.Message = v, msg
	if p.policy != SurgePolicyOff {
		e.refusal = true
	}
}

// blockedReason names the first failing check, for messages.
func blockedReason(checks []CapacityCheck) string {
	for _, c := range checks {
		if c.OK {
			continue
		}
		where := "quota " + c.Quota
		if c.Quota == "" {
			where = "nodes " + nodeNames(c.Nodes)
		}
		return fmt.Sprintf("%s: need %s, free %s on %s", c.Resource, c.Needed, c.Free, where)
	}
	return "no room"
}

// impossiblePod checks that one new pod could ever fit: some matching node
// is large enough, and every quota's hard limit admits it. It concludes
// and returns true when not.
func (p *preflighter) impossiblePod(ec *evalContext) bool {
	e := ec.d.entry
	var checks []CapacityCheck
	var msg string
	if ec.nodes != nil {
		switch {
		case len(ec.matches) == 0:
			of := fmt.Sprint(ec.nodes.total)
			if ec.nodes.selector != "" {
				of += " labelled " + ec.nodes.selector
			}
			checks = append(checks, CapacityCheck{Step: StepPod, Pods: 1, Resource: string(corev1.ResourcePods), Needed: "1", Free: "0",
				Short: "1", Where: fmt.Sprintf("nodes matching the pod's nodeSelector, affinity and tolerations (none of %s; %d Ready and schedulable)", of, len(ec.nodes.usable))})
			msg = "no Ready, schedulable node matches the pod's nodeSelector, required node affinity and tolerations"
		default:
			fitsSome := false
			for _, n := range ec.matches {
				fitsSome = fitsSome || fitsIn(n.alloc, ec.per.requests)
			}
			if !fitsSome {
				names := matchNames(ec.matches)
				for _, r := range ec.per.requests.names() {
					best, bestNode := int64(0), ""
					for _, n := range ec.matches {
						if n.alloc[r] > best || bestNode == "" {
							best, bestNode = n.alloc[r], n.node.Name
						}
					}
					c := CapacityCheck{Step: StepPod, Pods: 1, Resource: string(r), Needed: formatAmount(r, ec.per.requests[r]),
						Free: formatAmount(r, best), Where: "allocatable of the largest matching node " + bestNode, Nodes: names, OK: best >= ec.per.requests[r]}
					if !c.OK {
						c.Short = formatAmount(r, ec.per.requests[r]-best)
					}
					checks = append(checks, c)
				}
				msg = "one pod needs more than any matching node has allocatable"
			}
		}
	}
	for _, q := range ec.quotas {
		for _, key := range q.keys() {
			k, _ := quotaKeyOf(key)
			need := ec.per.amount(k)
			if need == 0 || q.hard[key] >= need {
				continue
			}
			checks = append(checks, CapacityCheck{Step: StepPod, Pods: 1, Resource: string(key), Needed: formatAmount(k.name, need),
				Free: formatAmount(k.name, q.hard[key]), Short: formatAmount(k.name, need-q.hard[key]),
				Where: "hard limit of quota " + q.quota.Name, Quota: q.quota.Name})
			if msg == "" {
				msg = "one pod needs more than the hard limit of quota " + q.quota.Name
			}
		}
	}
	if msg == "" {
		return false
	}
	e.Checks = append(e.Checks, checks...)
	p.conclude(e, VerdictImpossible, msg)
	return true
}

func matchNames(nodes []*nodeState) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.node.Name
	}
	return out
}

// oldPods returns the pods of the live Deployment that the rollout
// replaces: those matching its selector that are not terminated nor being
// deleted.
func (p *preflighter) oldPods(ctx context.Context, live *appsv1.Deployment) ([]oldPod, error) {
	return p.selectedPods(ctx, live.Namespace, live.Spec.Selector, nil)
}

// selectedPods returns, by node, the pods of namespace (listed once) that
// selector matches, are not being deleted and that keep accepts (nil:
// all): the old pods of a live workload.
func (p *preflighter) selectedPods(ctx context.Context, namespace string, selector *metav1.LabelSelector, keep func(*corev1.Pod) bool) ([]oldPod, error) {
	if selector == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		// The API server validated the live selector; should it not
		// parse, there are no old pods to count.
		return nil, nil
	}
	pods, err := p.podsIn(ctx, namespace)
	if err != nil {
		return nil, err
	}
	var out []oldPod
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || !sel.Matches(labels.Set(pod.Labels)) || (keep != nil && !keep(pod)) {
			continue
		}
		out = append(out, oldPod{node: pod.Spec.NodeName, usage: usageOf(&pod.Spec)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].node < out[j].node })
	return out, nil
}

// step checks room for n new pods, after `freed` old pods are removed
// (spread over their nodes, one per node in turn).
func (p *preflighter) step(ec *evalContext, step string, n, freed int64) stepResult {
	res := stepResult{pods: n, placeable: unlimited, admitted: unlimited}
	removed := ec.old
	if freed < int64(len(removed)) {
		removed = spread(ec.old, freed)
	}
	if freed == 0 {
		removed = nil
	}
	qual := stepQualifier(ec, step, n, len(removed))
	if ec.nodes != nil {
		res.placeable, res.checks = nodeChecks(ec, step, n, removed, qual)
	}
	admitted, checks := quotaChecks(ec, step, n, removed, qual)
	res.admitted, res.checks = admitted, append(res.checks, checks...)
	return res
}

// stepQualifier says, for the checks' Where, which pods a step of n new
// pods places, after removing `removed` old pods.
func stepQualifier(ec *evalContext, step string, n int64, removed int) string {
	var qual string
	d := ec.d
	increase := fmt.Sprintf("the replica increase from %d to %d", d.liveReplicas, d.entry.Replicas)
	switch step {
	case StepScaleUp:
		qual = fmt.Sprintf("%d new pod%s of %s, next to the running ones", n, plural(n), increase)
	case StepSurge:
		qual = fmt.Sprintf("%d surge pod%s next to the old ones", n, plural(n))
		if a := int64(d.added); a > 0 && !ec.addedReserved {
			qual = fmt.Sprintf("%d new pod%s of %s and %d surge pod%s, next to the old ones", a, plural(a), increase, n-a, plural(n-a))
		}
	case StepReplace:
		qual = fmt.Sprintf("%d new pod%s after removing %d old", n, plural(n), removed)
	case StepRecreate:
		qual = fmt.Sprintf("%d new pod%s after removing all %d old", n, plural(n), removed)
	default:
		qual = fmt.Sprintf("%d new pod%s", n, plural(n))
	}
	if ec.addedReserved && step != StepScaleUp {
		qual += fmt.Sprintf(", next to the %d new pod%s of %s", d.added, plural(int64(d.added)), increase)
	}
	return qual
}

// nodeChecks returns how many new pods the matching nodes can place once
// the removed old pods are gone, and the check of each requested resource
// for n of them.
func nodeChecks(ec *evalContext, step string, n int64, removed []oldPod, qual string) (int64, []CapacityCheck) {
	per := ec.per.requests
	type room struct {
		name string
		free resVec
	}
	rooms := make([]room, 0, len(ec.matches))
	for _, nd := range ec.matches {
		free := nd.free.clone()
		for _, o := range removed {
			if o.node == nd.node.Name {
				free.add(o.usage.requests)
			}
		}
		rooms = append(rooms, room{name: nd.node.Name, free: free})
	}
	names := matchNames(ec.matches)
	placeable := int64(0)
	for _, rm := range rooms {
		placeable += fitCount(rm.free, per)
	}
	var checks []CapacityCheck
	for _, r := range per.names() {
		var usable, most int64
		for _, rm := range rooms {
			f := max(rm.free[r], 0)
			usable += f / per[r] * per[r]
			most = max(most, f)
		}
		if r == corev1.ResourcePods {
			usable = min(placeable, unlimited) * 1000
		}
		c := CapacityCheck{Step: step, Pods: n, Resource: string(r), Needed: formatAmount(r, n*per[r]), Free: formatAmount(r, usable),
			Where: "nodes " + nodeNames(names) + " (" + qual + ")", Nodes: names, MostOnOneNode: formatAmount(r, most), OK: usable >= n*per[r]}
		if !c.OK {
			c.Short = formatAmount(r, n*per[r]-usable)
		}
		checks = append(checks, c)
	}
	return placeable, checks
}

// quotaChecks returns how many new pods the quotas admit once the
// removed old pods are gone (unlimited without quota), and the check of
// each quota key a pod uses for n of them.
func quotaChecks(ec *evalContext, step string, n int64, removed []oldPod, qual string) (int64, []CapacityCheck) {
	admitted := unlimited
	var checks []CapacityCheck
	for _, q := range ec.quotas {
		for _, key := range q.keys() {
			k, _ := quotaKeyOf(key)
			need := ec.per.amount(k)
			if need == 0 {
				continue
			}
			free := q.free[key]
			for _, o := range removed {
				free += o.usage.amount(k)
			}
			admitted = min(admitted, max(free, 0)/need)
			c := CapacityCheck{Step: step, Pods: n, Resource: string(key), Needed: formatAmount(k.name, n*need), Free: formatAmount(k.name, max(free, 0)),
				Where: fmt.Sprintf("quota %s (hard %s, used %s; %s)", q.quota.Name, formatAmount(k.name, q.hard[key]), formatAmount(k.name, q.used[key]), qual),
				Quota: q.quota.Name, OK: free >= n*need}
			if !c.OK {
				c.Short = formatAmount(k.name, n*need-max(free, 0))
			}
			checks = append(checks, c)
		}
	}
	return admitted, checks
}

// spread picks n of the old pods, one per node in turn (the pods are
// sorted by node), as the Deployment controller spreads its deletions.
func spread(old []oldPod, n int64) []oldPod {
	byNode := map[string][]oldPod{}
	var order []string
	for _, o := range old {
		if _, ok := byNode[o.node]; !ok {
			order = append(order, o.node)
		}
		byNode[o.node] = append(byNode[o.node], o)
	}
	var out []oldPod
	for int64(len(out)) < n {
		for _, node := range order {
			if len(byNode[node]) > 0 && int64(len(out)) < n {
				out = append(out, byNode[node][0])
				byNode[node] = byNode[node][1:]
			}
		}
	}
	return out
}

// reserve takes room for n new pods (which started next to the old ones)
// out of the matching nodes and the quotas, so that the Deployments checked
// after this one do not count it as free.
func (p *preflighter) reserve(ec *evalContext, n int64) {
	left := n
	for _, nd := range ec.matches {
		k := min(fitCount(nd.free, ec.per.requests), left)
		nd.free.sub(ec.per.requests.scaled(k))
		left -= k
	}
	for _, q := range ec.quotas {
		for _, key := range q.keys() {
			k, _ := quotaKeyOf(key)
			q.free[key] -= n * ec.per.amount(k)
		}
	}
}
