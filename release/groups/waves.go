package groups

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/preflight"
)

// Label marks a StatefulSet as one engine group of a multi-node
// release (its value is the group's index): such StatefulSets are rolled
// out group by group.
const Label = preflight.GroupLabel

// IsGroup reports whether obj is a grouped StatefulSet.
func IsGroup(obj *unstructured.Unstructured) bool {
	if !cluster.IsStatefulSet(object.RefOf(obj)) {
		return false
	}
	_, ok := obj.GetLabels()[Label]
	return ok
}

// Index is a group's index (its label; -1 when not a number).
func Index(obj *unstructured.Unstructured) int {
	n, err := strconv.Atoi(obj.GetLabels()[Label])
	if err != nil {
		return -1
	}
	return n
}

// Plan is how a deploy rolls its engine groups out: First holds every
// object applied at once (the objects that are not groups, the groups the
// deploy creates or does not change, and the first wave of changed
// groups); Later are the next waves, in order.
type Plan struct {
	First []*unstructured.Unstructured
	Later [][]*unstructured.Unstructured
	// Wave1 are the changed groups in First.
	Wave1 []*unstructured.Unstructured
	// Groups is how many groups change; Size how many a wave holds.
	Groups, Size int
}

// WithoutLater returns objs without the groups of the later waves (by
// reference: the canary's transient objects are copies).
func (w Plan) WithoutLater(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	if len(w.Later) == 0 {
		return objs
	}
	later := map[string]bool{}
	for _, wave := range w.Later {
		for _, o := range wave {
			later[object.RefOf(o).String()] = true
		}
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if !later[object.RefOf(o).String()] {
			out = append(out, o)
		}
	}
	return out
}

// PlanWaves splits objs for a grouped rollout. changed reports whether a
// group's pod template changes (a group that exists and is changed); size
// is how many changed groups a wave holds (maxUnavailable: a count, or a
// percentage of the release's groups, rounded down; 1 at least; default
// 1). First holds at least size changed groups; when first is given
// (canary groups), the first wave holds that many instead. Without changed
// groups, or on an install, everything is in first.
func PlanWaves(objs []*unstructured.Unstructured, changed func(*unstructured.Unstructured) bool, maxUnavailable *intstr.IntOrString, first int) Plan {
	var all, moving []*unstructured.Unstructured
	for _, o := range objs {
		if !IsGroup(o) {
			continue
		}
		all = append(all, o)
		if changed(o) {
			moving = append(moving, o)
		}
	}
	size := 1
	if maxUnavailable != nil {
		if n, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, len(all), false); err == nil && n > 1 {
			size = n
		}
	}
	p := Plan{Groups: len(moving), Size: size}
	slices.SortStableFunc(moving, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(cmp.Compare(Index(a), Index(b)), strings.Compare(a.GetName(), b.GetName()))
	})
	head := size
	if first > 0 {
		head = first
	}
	head = min(head, len(moving))
	p.Wave1 = moving[:head]
	later := map[*unstructured.Unstructured]bool{}
	for i := head; i < len(moving); i += size {
		wave := moving[i:min(i+size, len(moving))]
		p.Later = append(p.Later, wave)
		for _, o := range wave {
			later[o] = true
		}
	}
	for _, o := range objs {
		if !later[o] {
			p.First = append(p.First, o)
		}
	}
	return p
}

// Names lists the groups of a wave.
func Names(wave []*unstructured.Unstructured) string {
	names := make([]string, len(wave))
	for i, o := range wave {
		names[i] = o.GetName()
	}
	return strings.Join(names, ", ")
}

// Has reports whether objs hold an engine group.
func Has(objs []*unstructured.Unstructured) bool {
	return slices.ContainsFunc(objs, IsGroup)
}
