package groups

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func groupSet(name string, group string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": name},
	}}
	if group != "" {
		u.SetLabels(map[string]string{Label: group})
	}
	return u
}

func names(objs []*unstructured.Unstructured) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

func TestPlanWaves(t *testing.T) {
	svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "chat"}}}
	plain := groupSet("cache", "")
	groups := func(n int) []*unstructured.Unstructured {
		out := []*unstructured.Unstructured{svc, plain}
		for i := n - 1; i >= 0; i-- { // out of order: the plan sorts by index
			out = append(out, groupSet(fmt.Sprintf("chat-g%d", i), fmt.Sprint(i)))
		}
		return out
	}
	all := func(*unstructured.Unstructured) bool { return true }
	none := func(*unstructured.Unstructured) bool { return false }
	pct := intstr.FromString("50%")
	two := intstr.FromInt32(2)
	huge := intstr.FromInt32(1 << 30)
	zero := intstr.FromInt32(0)
	for _, tc := range []struct {
		name      string
		objs      []*unstructured.Unstructured
		changed   func(*unstructured.Unstructured) bool
		maxUnav   *intstr.IntOrString
		canary    int
		wave1     []string
		later     [][]string
		firstHasN int
	}{
		{"two groups, default one per wave", groups(2), all, nil, 0, []string{"chat-g0"}, [][]string{{"chat-g1"}}, 3},
		{"nothing changes: all at once", groups(2), none, nil, 0, []string{}, nil, 4},
		{"four groups, two per wave", groups(4), all, &two, 0, []string{"chat-g0", "chat-g1"}, [][]string{{"chat-g2", "chat-g3"}}, 4},
		{"50% of four groups", groups(4), all, &pct, 0, []string{"chat-g0", "chat-g1"}, [][]string{{"chat-g2", "chat-g3"}}, 4},
		{"three groups, two per wave: last wave short", groups(3), all, &two, 0, []string{"chat-g0", "chat-g1"}, [][]string{{"chat-g2"}}, 4},
		{"a huge maxUnavailable is one wave", groups(3), all, &huge, 0, []string{"chat-g0", "chat-g1", "chat-g2"}, nil, 5},
		{"maxUnavailable 0 still moves one group", groups(2), all, &zero, 0, []string{"chat-g0"}, [][]string{{"chat-g1"}}, 3},
		{"canary of one group, then two per wave", groups(5), all, &two, 1, []string{"chat-g0"}, [][]string{{"chat-g1", "chat-g2"}, {"chat-g3", "chat-g4"}}, 3},
		{"only group 1 changes", groups(3), func(o *unstructured.Unstructured) bool { return o.GetName() == "chat-g1" }, nil, 0, []string{"chat-g1"}, nil, 5},
		{"groups 0 and 2 change", groups(3), func(o *unstructured.Unstructured) bool { return o.GetName() != "chat-g1" }, nil, 0,
			[]string{"chat-g0"}, [][]string{{"chat-g2"}}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanWaves(tc.objs, tc.changed, tc.maxUnav, tc.canary)
			assert.Equal(t, tc.wave1, names(p.Wave1))
			var later [][]string
			for _, w := range p.Later {
				later = append(later, names(w))
			}
			assert.Equal(t, tc.later, later)
			assert.Len(t, p.First, tc.firstHasN, "first apply: %v", names(p.First))
			// Every object is applied exactly once.
			seen := map[string]int{}
			for _, o := range p.First {
				seen[o.GetName()]++
			}
			for _, w := range p.Later {
				for _, o := range w {
					seen[o.GetName()]++
				}
			}
			require.Len(t, seen, len(tc.objs))
			for n, c := range seen {
				assert.Equal(t, 1, c, n)
			}
			// withoutLater keeps the first apply's objects.
			assert.Equal(t, names(p.First), names(p.WithoutLater(tc.objs)))
		})
	}
}
