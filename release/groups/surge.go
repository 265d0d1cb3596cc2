package groups

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/release/preflight"
)

// SurgeLabel marks a temporary surge group (value "true"): it is in no
// revision's manifest, and a deploy deletes it once the upgrade ended (or
// finds it left behind by an interrupted one).
const SurgeLabel = "vllmctl.io/surge-group"

// surgeSuffix is added to a group's name (and its group label) to name its
// temporary copy.
const surgeSuffix = "-surge"

// maxStatefulSetName is the longest StatefulSet name whose pods' revision
// label (name-hash) stays within a label's 63 characters.
const maxStatefulSetName = 52

// SurgeCopy returns the temporary copy of group g: named g's name plus
// surgeSuffix, its group label (in its labels, selector, pod template and
// anywhere its pod template names it, as an anti-affinity term does)
// suffixed likewise so that the two never select each other's pods,
// labelled SurgeLabel, and with every reference to one of g's pods by its
// stable DNS name (g-<ordinal>.) in its pod template pointing at the
// copy's pod of that ordinal instead (a multi-node group's leader
// address).
func SurgeCopy(g *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	base := g.GetName()
	name := base + surgeSuffix
	if len(name) > maxStatefulSetName {
		return nil, fmt.Errorf("StatefulSet %s: its surge copy's name %s is longer than %d characters", base, name, maxStatefulSetName)
	}
	c := g.DeepCopy()
	c.SetName(name)
	c.SetResourceVersion("")
	c.SetUID("")
	pods := regexp.MustCompile(`(^|[^a-z0-9.-])` + regexp.QuoteMeta(base) + `-([0-9]+)\.`)
	c.Object = rewrite(c.Object, func(key string, v any) any {
		s, ok := v.(string)
		if !ok {
			return v
		}
		if key == Label {
			return s + surgeSuffix
		}
		return pods.ReplaceAllString(s, "${1}"+name+"-${2}.")
	}).(map[string]any)
	c.SetName(name)
	labels := c.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[SurgeLabel] = "true"
	c.SetLabels(labels)
	return c, nil
}

// rewrite returns v with every string value replaced by fn(key, value),
// key being the map key it stands under ("" in lists).
func rewrite(v any, fn func(key string, v any) any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			switch e.(type) {
			case map[string]any, []any:
				t[k] = rewrite(e, fn)
			default:
				t[k] = fn(k, e)
			}
		}
		return t
	case []any:
		for i, e := range t {
			switch e.(type) {
			case map[string]any, []any:
				t[i] = rewrite(e, fn)
			default:
				t[i] = fn("", e)
			}
		}
		return t
	}
	return v
}

// SurgeRefused reports whether err is a preflight refusal of surge groups
// only.
func SurgeRefused(err error, surge []*unstructured.Unstructured) bool {
	var pe *preflight.Error
	if !errors.As(err, &pe) || len(pe.Refused) > 0 || len(pe.RefusedGroups) == 0 {
		return false
	}
	for _, g := range pe.RefusedGroups {
		if !slices.ContainsFunc(surge, func(s *unstructured.Unstructured) bool { return s.GetName() == g.StatefulSet }) {
			return false
		}
	}
	return true
}
