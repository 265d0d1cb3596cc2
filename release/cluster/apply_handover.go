package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/owner"
)

// hpaTargets returns the Deployments among plan that a
// HorizontalPodAutoscaler targets, from the HPAs being applied and those
// live in the Deployments' namespaces.
func (a *Applier) hpaTargets(ctx context.Context, r *resolver, plan []planned, opts ApplyOptions, missing map[string]bool) (map[object.ID]bool, error) {
	deployments := map[object.ID]bool{}
	namespaces := map[string]bool{}
	applied := map[object.ID]bool{}
	for _, p := range plan {
		if p.ref.IsDeployment() {
			deployments[p.ref.ID()] = true
			namespaces[p.ref.Namespace] = true
		}
		if p.ref.IsHPA() {
			applied[p.ref.ID()] = true
		}
	}
	targets := map[object.ID]bool{}
	if len(deployments) == 0 {
		return targets, nil
	}
	mark := func(hpa *unstructured.Unstructured, ns string) {
		if k, ok := hpaTarget(hpa, ns); ok && deployments[k] {
			targets[k] = true
		}
	}
	for _, p := range plan {
		if p.ref.IsHPA() {
			mark(p.body, p.ref.Namespace)
		}
	}

	mapping, err := r.mappingIn(ctx, schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, "v2", "v1")
	if meta.IsNoMatchError(err) {
		return targets, nil // the cluster serves no HPAs
	}
	if err != nil {
		return nil, fmt.Errorf("look up HorizontalPodAutoscalers: %w", err)
	}
	nsList := make([]string, 0, len(namespaces))
	for ns := range namespaces {
		nsList = append(nsList, ns)
	}
	sort.Strings(nsList)
	for _, ns := range nsList {
		if missing[ns] {
			continue
		}
		items, err := opts.LiveHPAs.list(ns, func() ([]unstructured.Unstructured, error) {
			list, err := a.dynamic.Resource(mapping.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return list.Items, nil
		})
		if err != nil {
			return nil, fmt.Errorf("list HorizontalPodAutoscalers in namespace %s: %w", ns, err)
		}
		for i := range items {
			hpa := &items[i]
			ref := object.RefOf(hpa)
			ref.Group = "autoscaling"
			if opts.Release != "" && !applied[ref.ID()] && owner.Owns(hpa, opts.Release, opts.Namespace) {
				continue // this release's HPA, about to be pruned
			}
			mark(hpa, ns)
		}
	}
	return targets, nil
}

// hpaTarget returns the Deployment an HPA scales, if it scales one.
func hpaTarget(hpa *unstructured.Unstructured, ns string) (object.ID, bool) {
	kind, _, _ := unstructured.NestedString(hpa.Object, "spec", "scaleTargetRef", "kind")
	name, _, _ := unstructured.NestedString(hpa.Object, "spec", "scaleTargetRef", "name")
	apiVersion, _, _ := unstructured.NestedString(hpa.Object, "spec", "scaleTargetRef", "apiVersion")
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind != "Deployment" || gv.Group != "apps" || name == "" {
		return object.ID{}, false
	}
	return object.Ref{Group: "apps", Kind: "Deployment", Namespace: ns, Name: name}.ID(), true
}

// handOver applies the live replicas value under the handover manager, so
// that the field survives vllmctl dropping it. A conflict means another
// manager (the autoscaler) already owns the field, which is what we want.
func (a *Applier) handOver(ctx context.Context, client dynamic.ResourceInterface, p planned, replicas int64, manager string) error {
	h := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": p.body.GetAPIVersion(),
		"kind":       p.body.GetKind(),
		"metadata":   map[string]any{"name": p.ref.Name, "namespace": p.ref.Namespace},
		"spec":       map[string]any{"replicas": replicas},
	}}
	_, err := client.Apply(ctx, p.ref.Name, h, metav1.ApplyOptions{FieldManager: manager})
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("hand .spec.replicas of %s over to its HorizontalPodAutoscaler: %w", p.ref, err)
	}
	return nil
}

// ownsField reports whether manager owns the field at path through an
// apply (not a subresource) according to obj's managedFields.
func ownsField(obj *unstructured.Unstructured, manager string, path ...string) bool {
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager != manager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(mf.FieldsV1.Raw, &fields); err != nil {
			continue
		}
		cur := fields
		found := true
		for _, p := range path {
			next, ok := cur["f:"+p]
			if !ok {
				found = false
				break
			}
			cur, _ = next.(map[string]any)
		}
		if found {
			return true
		}
	}
	return false
}
