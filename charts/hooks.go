package charts

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Helm's hook annotations (helm.sh/helm/v4/pkg/release/v1).
const (
	AnnotationHook             = "helm.sh/hook"
	AnnotationHookWeight       = "helm.sh/hook-weight"
	AnnotationHookDeletePolicy = "helm.sh/hook-delete-policy"
	// AnnotationResourcePolicy "keep" keeps an object on prune and
	// uninstall.
	AnnotationResourcePolicy = "helm.sh/resource-policy"
	ResourcePolicyKeep       = "keep"
)

// HookEvent is when a hook runs (Helm's release.HookEvent).
type HookEvent string

// The hook events, as Helm names them.
const (
	HookPreInstall   HookEvent = "pre-install"
	HookPostInstall  HookEvent = "post-install"
	HookPreDelete    HookEvent = "pre-delete"
	HookPostDelete   HookEvent = "post-delete"
	HookPreUpgrade   HookEvent = "pre-upgrade"
	HookPostUpgrade  HookEvent = "post-upgrade"
	HookPreRollback  HookEvent = "pre-rollback"
	HookPostRollback HookEvent = "post-rollback"
	HookTest         HookEvent = "test"
)

// hookEvents maps the values of helm.sh/hook to events; "test-success"
// is Helm 2's name of test, which Helm still reads.
var hookEvents = map[string]HookEvent{
	"pre-install": HookPreInstall, "post-install": HookPostInstall,
	"pre-delete": HookPreDelete, "post-delete": HookPostDelete,
	"pre-upgrade": HookPreUpgrade, "post-upgrade": HookPostUpgrade,
	"pre-rollback": HookPreRollback, "post-rollback": HookPostRollback,
	"test": HookTest, "test-success": HookTest,
}

// HookDeletePolicy says when a hook's object is deleted (Helm's
// release.HookDeletePolicy).
type HookDeletePolicy string

// The delete policies, as Helm names them.
const (
	HookSucceeded          HookDeletePolicy = "hook-succeeded"
	HookFailed             HookDeletePolicy = "hook-failed"
	HookBeforeHookCreation HookDeletePolicy = "before-hook-creation"
)

// Hook is one rendered object annotated helm.sh/hook: not one of the
// release's objects, but run at its events (Helm's release.Hook).
type Hook struct {
	// Object is the hook's object, marked as the release's (owner.Mark).
	Object *unstructured.Unstructured
	// Path is the template that rendered it.
	Path string
	// Events are when it runs.
	Events []HookEvent
	// Weight orders hooks of one event (helm.sh/hook-weight; 0 when
	// absent or not an integer, as with Helm).
	Weight int
	// DeletePolicies say when its object is deleted; before-hook-creation
	// when the chart names none (Helm's default).
	DeletePolicies []HookDeletePolicy
}

// Has reports whether h runs at event e.
func (h Hook) Has(e HookEvent) bool { return slices.Contains(h.Events, e) }

// HasPolicy reports whether h is deleted on p.
func (h Hook) HasPolicy(p HookDeletePolicy) bool { return slices.Contains(h.DeletePolicies, p) }

// hookOf returns the hook an object is, if it carries helm.sh/hook. An
// object whose helm.sh/hook names an event Helm does not know is left out
// of the render as Helm leaves it out (skip is then true).
func hookOf(o *unstructured.Unstructured, path string) (h Hook, isHook, skip bool) {
	ann := o.GetAnnotations()
	value, ok := ann[AnnotationHook]
	if !ok {
		return Hook{}, false, false
	}
	h = Hook{Object: o, Path: path}
	for _, v := range strings.Split(value, ",") {
		e, known := hookEvents[strings.ToLower(strings.TrimSpace(v))]
		if !known {
			return Hook{}, true, true
		}
		h.Events = append(h.Events, e)
	}
	if w, err := strconv.Atoi(ann[AnnotationHookWeight]); err == nil {
		h.Weight = w
	}
	if dp, ok := ann[AnnotationHookDeletePolicy]; ok {
		for _, v := range strings.Split(dp, ",") {
			h.DeletePolicies = append(h.DeletePolicies, HookDeletePolicy(strings.ToLower(strings.TrimSpace(v))))
		}
	}
	if len(h.DeletePolicies) == 0 {
		h.DeletePolicies = []HookDeletePolicy{HookBeforeHookCreation}
	}
	return h, true, false
}

// splitHooks takes the hooks out of objs (in render order, so that a
// stable sort by kind gives Helm's order of hooks) and returns the rest,
// the hooks sorted as Helm sorts them (by kind, in install order), and a
// warning for each object left out for an unknown hook event.
func splitHooks(objs []*unstructured.Unstructured, sources map[string]string) ([]*unstructured.Unstructured, []Hook, []string) {
	var rest []*unstructured.Unstructured
	var hooks []Hook
	var warnings []string
	for _, o := range objs {
		h, isHook, skip := hookOf(o, sources[SourceKey(o)])
		switch {
		case skip:
			warnings = append(warnings, fmt.Sprintf("%s (%s): skipped: unknown hook %q", ObjectRef(o),
				sources[SourceKey(o)], o.GetAnnotations()[AnnotationHook]))
		case isHook:
			hooks = append(hooks, h)
		default:
			rest = append(rest, o)
		}
	}
	slices.SortStableFunc(hooks, func(a, b Hook) int {
		return cmp.Compare(kindPriority(a.Object.GetKind()), kindPriority(b.Object.GetKind()))
	})
	return rest, hooks, warnings
}

// HooksFor returns the hooks of event e in the order Helm runs them: by
// weight, then name (stable over hooks' kind order).
func HooksFor(hooks []Hook, e HookEvent) []Hook {
	var out []Hook
	for _, h := range hooks {
		if h.Has(e) {
			out = append(out, h)
		}
	}
	slices.SortStableFunc(out, func(a, b Hook) int {
		return cmp.Or(cmp.Compare(a.Weight, b.Weight), cmp.Compare(a.Object.GetName(), b.Object.GetName()))
	})
	return out
}

// HookObjects returns the hooks' objects, in order.
func HookObjects(hooks []Hook) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(hooks))
	for i, h := range hooks {
		out[i] = h.Object
	}
	return out
}

// KeepsResource reports whether o is annotated helm.sh/resource-policy:
// keep: prune and uninstall leave it (as Helm does).
func KeepsResource(o *unstructured.Unstructured) bool {
	return strings.TrimSpace(strings.ToLower(o.GetAnnotations()[AnnotationResourcePolicy])) == ResourcePolicyKeep
}
