package storage

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/charts"
)

// Hook is one hook of a revision, as Helm's release.Hook records it.
type Hook struct {
	// Name and Kind name its object.
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Path is the template that rendered it.
	Path string `json:"path,omitempty"`
	// Manifest is its object, as applied.
	Manifest string `json:"manifest"`
	// Events are when it runs (helm.sh/hook).
	Events []charts.HookEvent `json:"events"`
	// Weight orders the hooks of one event (helm.sh/hook-weight).
	Weight int `json:"weight,omitempty"`
	// DeletePolicies say when its object is deleted
	// (helm.sh/hook-delete-policy; before-hook-creation by default).
	DeletePolicies []charts.HookDeletePolicy `json:"deletePolicies,omitempty"`
}

// HooksOf returns the records of rendered hooks.
func HooksOf(hooks []charts.Hook) ([]Hook, error) {
	out := make([]Hook, 0, len(hooks))
	for _, h := range hooks {
		m, err := charts.Manifest([]*unstructured.Unstructured{h.Object})
		if err != nil {
			return nil, fmt.Errorf("hook %s: %w", charts.ObjectRef(h.Object), err)
		}
		out = append(out, Hook{Name: h.Object.GetName(), Kind: h.Object.GetKind(), Path: h.Path, Manifest: m,
			Events: h.Events, Weight: h.Weight, DeletePolicies: h.DeletePolicies})
	}
	return out, nil
}
