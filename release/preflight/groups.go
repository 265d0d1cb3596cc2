package preflight

// This file checks the engine groups of a multi-node release: each group
// is a StatefulSet labelled vllmctl.io/group whose N pods serve only when
// all of them run at once (gang fit). A group's pods are replaced all at
// once (podManagementPolicy Parallel, maxUnavailable 100%): its old pods
// go before the new ones start, so what they hold counts as free for the
// group itself. Groups are placed one after another against the same
// shrinking room, after the Deployments.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/object"
)

// GroupLabel marks a StatefulSet as one engine group of a multi-node
// release; its value is the group's index (release/groups.Label, which
// rolls the groups out wave by wave, is this label).
const GroupLabel = "vllmctl.io/group"

// GroupPreflight is the gang-fit preflight of one engine group.
type GroupPreflight struct {
	Namespace   string `json:"namespace"`
	StatefulSet string `json:"statefulSet"`
	// Group is the group's vllmctl.io/group label.
	Group  string         `json:"group"`
	Change TemplateChange `json:"change,omitempty"`
	// Pods is the group's size (the rendered spec.replicas); LivePods the
	// live StatefulSet's.
	Pods     int32 `json:"pods"`
	LivePods int32 `json:"livePods,omitempty"`
	// NewPods is how many pods the apply starts and the check places: all
	// of them for a new or changed group, the added ones for an unchanged
	// group whose size goes up.
	NewPods int32 `json:"newPods"`
	// PerPod is what each pod requests (pods: 1).
	PerPod map[string]string `json:"perPod,omitempty"`
	// OnePerNode is set when the pods carry a required podAntiAffinity on
	// kubernetes.io/hostname among themselves: each needs its own node.
	OnePerNode bool `json:"onePerNode"`
	// CandidateNodes counts the Ready, schedulable nodes a pod may go to
	// (nodeSelector, required node affinity, tolerations) whose
	// allocatable holds one pod; FitNodes those with one pod's requests
	// free when the group is placed (its own old pods gone, the groups
	// placed before it in place).
	CandidateNodes int `json:"candidateNodes"`
	FitNodes       int `json:"fitNodes"`
	// PlacedOn are the nodes the check placed the pods on (reserved for
	// the groups after it).
	PlacedOn []string `json:"placedOn,omitempty"`
	Verdict  Verdict  `json:"verdict"`
	// Checks are the ResourceQuota checks of the group's pods.
	Checks []CapacityCheck `json:"checks,omitempty"`
	// Message explains the verdict, in one line.
	Message string `json:"message,omitempty"`
	refusal bool
}

// groupInput is one rendered engine group being checked.
type groupInput struct {
	obj      *unstructured.Unstructured
	rendered *appsv1.StatefulSet
	live     *appsv1.StatefulSet
	entry    *GroupPreflight
	index    int
}

// groupRoom is one candidate node as a group sees it.
type groupRoom struct {
	node *nodeState
	// room is the node's free room with the group's own old pods gone;
	// freed what they hold there.
	room, freed resVec
	// slots is how many of the group's pods the node takes.
	slots int64
	why   string
}

// sortGroups orders the groups as they are rolled out: by namespace, by
// index (a label that is not a number last), then by name.
func sortGroups(groups []*groupInput) {
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		switch {
		case a.entry.Namespace != b.entry.Namespace:
			return a.entry.Namespace < b.entry.Namespace
		case a.index != b.index:
			return uint(a.index) < uint(b.index) // -1 last
		}
		return a.entry.StatefulSet < b.entry.StatefulSet
	})
}

func newGroupInput(obj *unstructured.Unstructured, s *appsv1.StatefulSet, ns string) *groupInput {
	label := obj.GetLabels()[GroupLabel]
	index, err := strconv.Atoi(label)
	if err != nil || index < 0 {
		index = -1
	}
	s.Namespace = ns
	return &groupInput{obj: obj, rendered: s, index: index,
		entry: &GroupPreflight{Namespace: ns, StatefulSet: s.Name, Group: label}}
}

// checkGroups checks every group in turn and adds them to the report.
func (p *preflighter) checkGroups(ctx context.Context) error {
	sortGroups(p.groups)
	for _, g := range p.groups {
		if err := p.checkGroup(ctx, g); err != nil {
			return err
		}
	}
	for _, g := range p.groups {
		p.report.Groups = append(p.report.Groups, *g.entry)
	}
	return nil
}

// checkGroup checks that one group's new pods fit at once, and reserves
// them.
func (p *preflighter) checkGroup(ctx context.Context, g *groupInput) error {
	e := g.entry
	spec := &g.rendered.Spec.Template.Spec
	per := usageOf(spec)
	e.PerPod = per.requests.strings()
	e.OnePerNode = onePerNode(&g.rendered.Spec.Template, e.Namespace)
	e.Pods = ptr.Deref(g.rendered.Spec.Replicas, 1)
	switch {
	case p.opts.Skip:
		e.Verdict, e.Message = VerdictUnchecked, "preflight skipped"
		return nil
	case p.policy == SurgePolicyOff:
		e.Verdict, e.Message = VerdictUnchecked, "surge policy off: the group's gang fit is not checked"
		return nil
	case e.Pods < 0:
		p.concludeGroup(e, VerdictImpossible, fmt.Sprintf("spec.replicas %d is negative", e.Pods))
		return nil
	}
	if err := p.liveGroup(ctx, g); err != nil {
		return err
	}
	e.NewPods = e.Pods
	if e.Change == ChangeUnchanged {
		e.NewPods = max(0, e.Pods-e.LivePods)
	}
	switch {
	case e.Pods == 0:
		e.Verdict, e.Message = VerdictFits, "0 replicas: no pods"
		return nil
	case e.NewPods == 0:
		e.Verdict, e.Message = VerdictFits, msgUnchanged
		if e.Pods < e.LivePods {
			e.Message = fmt.Sprintf("pod template unchanged, replicas %d→%d: no new pods", e.LivePods, e.Pods)
		}
		return nil
	}
	var own []oldPod
	if g.live != nil {
		var err error
		if own, err = p.groupPods(ctx, g.live); err != nil {
			return err
		}
	}
	// A changed group's old pods all go before its new ones start; an
	// unchanged one's stay, and the added pods go next to them.
	var freed []oldPod
	if e.Change != ChangeUnchanged {
		freed = own
		if how := replacedAtOnce(g.rendered); g.live != nil && how != "" {
			p.note("StatefulSet %s/%s: %s; the check counts all its old pods as gone, as with maxUnavailable 100%%", e.Namespace, e.StatefulSet, how)
		}
	}
	hosts, whyNone, err := p.groupNodes(ctx, g, per.requests)
	if err != nil {
		return err
	}
	if whyNone != "" {
		p.concludeGroup(e, VerdictImpossible, whyNone+"; "+p.noStrategy(e))
		return nil
	}
	quotas, err := p.quotasIn(ctx, e.Namespace)
	if err != nil {
		return err
	}
	var applied []*quotaState
	for _, q := range quotas {
		if quotaApplies(q.quota, spec) {
			applied = append(applied, q)
		}
	}
	rooms := groupRooms(hosts, per.requests, freed, own, e)
	placed := placeGroup(rooms, int64(e.NewPods))
	admitted, checks := groupQuotaChecks(applied, per, int64(e.NewPods), freed)
	e.Checks = checks
	if hosts != nil {
		e.CandidateNodes = len(hosts)
		for _, r := range rooms {
			if r.slots > 0 {
				e.FitNodes++
			}
		}
	}
	nodesOK := hosts == nil || sumSlots(placed) >= int64(e.NewPods)
	if !nodesOK || admitted < int64(e.NewPods) {
		var parts []string
		if !nodesOK {
			parts = append(parts, gangShortage(e, rooms, per.requests))
		}
		if admitted < int64(e.NewPods) {
			parts = append(parts, fmt.Sprintf("the namespace's quotas admit %d of the %d pod%s (%s)", max(admitted, 0), e.NewPods, plural(int64(e.NewPods)), blockedReason(checks)))
		}
		p.concludeGroup(e, VerdictImpossible, "gang does not fit: "+strings.Join(parts, "; ")+"; "+p.noStrategy(e))
		return nil
	}
	p.reserveGroup(e, placed, per, applied, freed)
	e.Verdict = VerdictFits
	e.Message = groupFitText(e, freed, hosts == nil)
	return nil
}

// replacedAtOnce says how the update strategy of s departs from
// replacing all its pods at once (RollingUpdate, maxUnavailable 100%); ""
// when it does not.
func replacedAtOnce(s *appsv1.StatefulSet) string {
	u := s.Spec.UpdateStrategy
	switch {
	case u.Type == appsv1.OnDeleteStatefulSetStrategyType:
		return "updateStrategy OnDelete replaces pods only as they are deleted"
	case u.RollingUpdate == nil || u.RollingUpdate.MaxUnavailable == nil:
		return "updateStrategy RollingUpdate replaces one pod at a time (maxUnavailable 1)"
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(u.RollingUpdate.MaxUnavailable, int(ptr.Deref(s.Spec.Replicas, 1)), false)
	if err != nil || n < int(ptr.Deref(s.Spec.Replicas, 1)) {
		return fmt.Sprintf("updateStrategy RollingUpdate with maxUnavailable %s replaces fewer than its %d pods at once", u.RollingUpdate.MaxUnavailable.String(), ptr.Deref(s.Spec.Replicas, 1))
	}
	return ""
}

// noStrategy says that no rollout strategy makes a group fit.
func (p *preflighter) noStrategy(e *GroupPreflight) string {
	return fmt.Sprintf("surge policy %s cannot help: no rollout strategy makes a group fit, as it serves only when all its %d pods run at once; free capacity or lower the group's size",
		p.policy, e.Pods)
}

// concludeGroup marks e as refused (the surge policy is auto or strict
// here: under off groups are not checked).
func (p *preflighter) concludeGroup(e *GroupPreflight, v Verdict, msg string) {
	e.Verdict, e.Message = v, msg
	if p.policy != SurgePolicyOff {
		e.refusal = true
	}
}

// liveGroup reads the live StatefulSet of g and whether the apply changes
// its pod template (a server-side dry-run apply compared with the live
// template, as for Deployments; a failed dry run counts as changed).
func (p *preflighter) liveGroup(ctx context.Context, g *groupInput) error {
	e := g.entry
	ref := object.RefOf(g.obj)
	ref.Namespace = e.Namespace
	live, err := p.client.AppsV1().StatefulSets(e.Namespace).Get(ctx, e.StatefulSet, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		e.Change = ChangeNew
		return nil
	case err != nil:
		return fmt.Errorf("preflight: get %s: %w", ref, err)
	}
	g.live = live
	e.LivePods = ptr.Deref(live.Spec.Replicas, 1)
	data, err := json.Marshal(applyBody(g.obj, ref.Namespace).Object)
	if err != nil {
		return fmt.Errorf("preflight: encode %s: %w", ref, err)
	}
	dry, err := p.client.AppsV1().StatefulSets(e.Namespace).Patch(ctx, e.StatefulSet, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true), DryRun: []string{metav1.DryRunAll}})
	e.Change = ChangeChanged
	switch {
	case err != nil:
		p.note("could not dry-run the apply of %s (%v): its pod template is taken as changed", ref, err)
	case apiequality.Semantic.DeepEqual(dry.Spec.Template, live.Spec.Template):
		e.Change = ChangeUnchanged
	}
	return nil
}

// groupPods returns the pods of a live StatefulSet: those matching its
// selector, not terminated nor being deleted, and not controlled by
// another object (see selectedPods).
func (p *preflighter) groupPods(ctx context.Context, live *appsv1.StatefulSet) ([]oldPod, error) {
	return p.selectedPods(ctx, live.Namespace, live.Spec.Selector, func(pod *corev1.Pod) bool {
		c := metav1.GetControllerOf(pod)
		return c == nil || (c.Kind == "StatefulSet" && c.Name == live.Name)
	})
}

// groupNodes returns the candidate nodes of a group's pods: Ready,
// schedulable, allowed by the placement, with allocatable for one pod,
// their pods read (as for a Deployment: only these nodes' pods), with a
// note of the pending pods of other workloads that may take them. hosts is
// nil when node capacity is not checked (nodes or pods not readable);
// whyNone says why no node can ever host a pod.
func (p *preflighter) groupNodes(ctx context.Context, g *groupInput, per resVec) (hosts []*nodeState, whyNone string, err error) {
	spec := &g.rendered.Spec.Template.Spec
	set, err := p.nodesFor(ctx, spec)
	if err != nil || set == nil {
		return nil, "", err
	}
	pl := newPlacement(klog.FromContext(ctx), spec)
	var allowed []*nodeState
	for _, n := range set.usable {
		if !pl.allows(n.node) {
			continue
		}
		allowed = append(allowed, n)
		if fitsIn(n.alloc, per) {
			hosts = append(hosts, n)
		}
	}
	switch {
	case len(allowed) == 0:
		of := fmt.Sprint(set.total)
		if set.selector != "" {
			of += " labelled " + set.selector
		}
		return nil, fmt.Sprintf("no Ready, schedulable node matches the pod's nodeSelector, required node affinity and tolerations (none of %s; %d Ready and schedulable)", of, len(set.usable)), nil
	case len(hosts) == 0:
		return nil, fmt.Sprintf("one pod (%s) needs more than any matching node has allocatable (%s)", needText(per), largest(allowed, per)), nil
	}
	ok, err := p.readPodsOn(ctx, hosts)
	if err != nil || !ok {
		return nil, "", err
	}
	r := g.rendered
	return hosts, "", p.noteCompetitorsOf(ctx, "StatefulSet "+r.Name, r.Namespace, r.Spec.Selector, per, hosts)
}

// largest names, for each resource a pod requests, the matching node with
// the most allocatable.
func largest(nodes []*nodeState, per resVec) string {
	var parts []string
	for _, r := range per.names() {
		best := nodes[0]
		for _, n := range nodes[1:] {
			if n.alloc[r] > best.alloc[r] {
				best = n
			}
		}
		if best.alloc[r] < per[r] {
			parts = append(parts, fmt.Sprintf("%s: at most %s on %s", r, formatAmount(r, best.alloc[r]), best.node.Name))
		}
	}
	return strings.Join(parts, ", ")
}

// groupRooms returns each candidate node's room for the group: its free
// room plus what the group's old pods there free, and how many of the
// group's pods it takes (at most one with one pod per node; none on a
// node that keeps one of the group's running pods then).
func groupRooms(hosts []*nodeState, per resVec, freed, own []oldPod, e *GroupPreflight) []groupRoom {
	freedOn := map[string]resVec{}
	for _, o := range freed {
		if freedOn[o.node] == nil {
			freedOn[o.node] = resVec{}
		}
		freedOn[o.node].add(o.usage.requests)
	}
	keeps := map[string]bool{}
	if len(freed) == 0 {
		for _, o := range own {
			keeps[o.node] = true
		}
	}
	rooms := make([]groupRoom, 0, len(hosts))
	for _, n := range hosts {
		r := groupRoom{node: n, room: n.free.clone(), freed: freedOn[n.node.Name]}
		r.room.add(r.freed)
		r.slots = fitCount(r.room, per)
		switch {
		case e.OnePerNode && keeps[n.node.Name]:
			r.slots, r.why = 0, "runs one of the group's pods"
		case r.slots == 0:
			r.why = shortText(r.room, per)
		case e.OnePerNode:
			r.slots = 1
		}
		rooms = append(rooms, r)
	}
	return rooms
}

// placeGroup picks the nodes for n pods: first the nodes the group's old
// pods free, then the tightest fits (so that larger rooms stay for the
// groups after), then by name. It returns the rooms used, with the pods
// each takes in slots.
func placeGroup(rooms []groupRoom, n int64) []groupRoom {
	var fit []groupRoom
	for _, r := range rooms {
		if r.slots > 0 {
			fit = append(fit, r)
		}
	}
	sort.SliceStable(fit, func(i, j int) bool {
		a, b := fit[i], fit[j]
		if (a.freed != nil) != (b.freed != nil) {
			return a.freed != nil
		}
		if a.slots != b.slots {
			return a.slots < b.slots
		}
		return a.node.node.Name < b.node.node.Name
	})
	var out []groupRoom
	for _, r := range fit {
		if n <= 0 {
			break
		}
		r.slots = min(r.slots, n)
		n -= r.slots
		out = append(out, r)
	}
	return out
}

// mulSat is a*b for non-negative a and b, saturating near 1<<62 (a huge
// replica count times a memory request in milli-units overflows int64).
func mulSat(a, b int64) int64 {
	const most = int64(1) << 62 / 1000 * 1000
	if a > 0 && b > most/a {
		return most
	}
	return a * b
}

func sumSlots(rooms []groupRoom) int64 {
	var n int64
	for _, r := range rooms {
		n += r.slots
	}
	return n
}

// groupQuotaChecks returns how many of n new pods the quotas admit once
// the freed old pods are gone, and a check per quota key a pod uses.
func groupQuotaChecks(quotas []*quotaState, per podUsage, n int64, freed []oldPod) (int64, []CapacityCheck) {
	admitted := unlimited
	var checks []CapacityCheck
	for _, q := range quotas {
		for _, key := range q.keys() {
			k, _ := quotaKeyOf(key)
			need := per.amount(k)
			if need == 0 {
				continue
			}
			free := q.free[key]
			for _, o := range freed {
				free += o.usage.amount(k)
			}
			admitted = min(admitted, max(free, 0)/need)
			total := mulSat(n, need)
			c := CapacityCheck{Step: StepGang, Pods: n, Resource: string(key), Needed: formatAmount(k.name, total), Free: formatAmount(k.name, max(free, 0)),
				Where: fmt.Sprintf("quota %s (hard %s, used %s; %d pod%s of the group, its old pods gone)", q.quota.Name,
					formatAmount(k.name, q.hard[key]), formatAmount(k.name, q.used[key]), n, plural(n)),
				Quota: q.quota.Name, OK: free >= total}
			if !c.OK {
				c.Short = formatAmount(k.name, total-max(free, 0))
			}
			checks = append(checks, c)
		}
	}
	return admitted, checks
}

// reserveGroup takes the placed pods' room out of their nodes (the
// group's old pods there gone) and out of the quotas, so that the groups
// checked after it do not count it. The room the old pods free on nodes
// the group does not use stays taken: the check does not count on it for
// another group.
func (p *preflighter) reserveGroup(e *GroupPreflight, placed []groupRoom, per podUsage, quotas []*quotaState, freed []oldPod) {
	for _, r := range placed {
		r.node.free.add(r.freed)
		r.node.free.sub(per.requests.scaled(r.slots))
		e.PlacedOn = append(e.PlacedOn, r.node.node.Name)
		r.node.groups = append(r.node.groups, e.StatefulSet)
	}
	sort.Strings(e.PlacedOn)
	for _, q := range quotas {
		for _, key := range q.keys() {
			k, _ := quotaKeyOf(key)
			net := int64(e.NewPods) * per.amount(k)
			for _, o := range freed {
				net -= o.usage.amount(k)
			}
			q.free[key] -= net
		}
	}
}

// gangShortage says why the candidate nodes cannot host the group.
func gangShortage(e *GroupPreflight, rooms []groupRoom, per resVec) string {
	var fit, others []string
	for _, r := range rooms {
		if r.slots > 0 {
			fit = append(fit, r.node.node.Name)
			continue
		}
		why := r.why
		if by := r.node.groupBy(); by != "" {
			why += " (taken by StatefulSet " + by + ")"
		}
		others = append(others, r.node.node.Name+": "+why)
	}
	what := fmt.Sprintf("its %d pods must all run at once", e.NewPods)
	if e.Change == ChangeUnchanged {
		what = fmt.Sprintf("the replica increase from %d to %d adds %d pod%s, next to the running ones", e.LivePods, e.Pods, e.NewPods, plural(int64(e.NewPods)))
	}
	if e.OnePerNode {
		what += ", one per node (required podAntiAffinity on " + corev1.LabelHostname + ")"
	}
	hosted := fmt.Sprintf("%d of %d candidate node%s can host one", len(fit), len(rooms), plural(int64(len(rooms))))
	if !e.OnePerNode {
		var slots int64
		for _, r := range rooms {
			slots += r.slots
		}
		hosted = fmt.Sprintf("%d of %d candidate node%s have room, for %d pod%s", len(fit), len(rooms), plural(int64(len(rooms))), slots, plural(slots))
	}
	if len(fit) > 0 {
		hosted += " (" + nodeNames(fit) + ")"
	}
	msg := fmt.Sprintf("%s, each needing %s; %s", what, needText(per), hosted)
	if len(others) > 0 {
		sort.Strings(others)
		if len(others) > 3 {
			others = append(others[:3:3], fmt.Sprintf("and %d more", len(others)-3))
		}
		msg += "; the others cannot: " + strings.Join(others, ", ")
	}
	return msg
}

// groupBy names the groups this preflight placed on n, if any.
func (n *nodeState) groupBy() string { return strings.Join(n.groups, ", ") }

// groupFitText is the message of a group that fits.
func groupFitText(e *GroupPreflight, freed []oldPod, unchecked bool) string {
	what := fmt.Sprintf("the %d pods fit at once", e.NewPods)
	if e.Change == ChangeUnchanged {
		what = fmt.Sprintf("pod template unchanged; replica increase from %d to %d: the %d new pod%s fit next to the running ones",
			e.LivePods, e.Pods, e.NewPods, plural(int64(e.NewPods)))
	}
	if unchecked {
		return what + " (quotas only: node capacity not checked)"
	}
	if e.OnePerNode {
		what += ", one per node,"
	}
	what += " on " + nodeNames(e.PlacedOn)
	if len(freed) > 0 {
		what += fmt.Sprintf(", counting the room its %d old pod%s free", len(freed), plural(int64(len(freed))))
	}
	return what
}

// needText formats one pod's requests, without the pod slot.
func needText(per resVec) string {
	var parts []string
	for _, r := range per.names() {
		if r != corev1.ResourcePods {
			parts = append(parts, string(r)+" "+formatAmount(r, per[r]))
		}
	}
	if len(parts) == 0 {
		return "no resources"
	}
	return strings.Join(parts, ", ")
}

// shortText says which requested resource a room lacks for one pod.
func shortText(room, per resVec) string {
	for _, r := range per.names() {
		if room[r] < per[r] {
			if r == corev1.ResourcePods {
				return "no pod slot free"
			}
			return fmt.Sprintf("%s free %s, needs %s", r, formatAmount(r, max(room[r], 0)), formatAmount(r, per[r]))
		}
	}
	return "no room"
}

// onePerNode reports whether a pod template carries a required
// podAntiAffinity on kubernetes.io/hostname that its own pods match: then
// no two of them share a node.
func onePerNode(tpl *corev1.PodTemplateSpec, ns string) bool {
	a := tpl.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return false
	}
	for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if t.TopologyKey != corev1.LabelHostname || t.LabelSelector == nil {
			continue
		}
		if len(t.Namespaces) > 0 && !contains(t.Namespaces, ns) && t.NamespaceSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err == nil && sel.Matches(labels.Set(tpl.Labels)) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
