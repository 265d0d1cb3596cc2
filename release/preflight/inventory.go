package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/pager"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/owner"
)

// This file holds what the preflight reads from the cluster: the live
// Deployments and their pod templates, nodes, pods, ResourceQuotas,
// PodDisruptionBudgets and HorizontalPodAutoscalers.

// liveDeployment reads the live copy of d's Deployment and whether the
// apply changes its pod template: from what the operation already knows
// (Options.Known), else by a GET and a dry-run apply.
func (p *preflighter) liveDeployment(ctx context.Context, d *deploymentInput, ref object.Ref) error {
	e := d.entry
	if p.opts.Known != nil {
		if live, applied, ok := p.opts.Known(e.Namespace, e.Name); ok {
			if live == nil {
				e.Change = ChangeNew
				return nil
			}
			d.live = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.UnstructuredContent(), d.live); err != nil {
				return fmt.Errorf("preflight: read %s: %w", ref, err)
			}
			e.Change = ChangeChanged
			var dry appsv1.Deployment
			if applied != nil && runtime.DefaultUnstructuredConverter.FromUnstructured(applied.UnstructuredContent(), &dry) == nil &&
				apiequality.Semantic.DeepEqual(dry.Spec.Template, d.live.Spec.Template) {
				e.Change = ChangeUnchanged
			}
			return nil
		}
	}
	live, err := p.client.AppsV1().Deployments(e.Namespace).Get(ctx, e.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		e.Change = ChangeNew
	case err != nil:
		return fmt.Errorf("preflight: get %s: %w", ref, err)
	default:
		d.live = live
		if e.Change, err = p.templateChange(ctx, d, ref); err != nil {
			return err
		}
	}
	return nil
}

// templateChange compares the pod template the apply would produce (a
// server-side dry-run apply) with the live one.
func (p *preflighter) templateChange(ctx context.Context, d *deploymentInput, ref object.Ref) (TemplateChange, error) {
	data, err := json.Marshal(applyBody(d.obj, ref.Namespace).Object)
	if err != nil {
		return "", fmt.Errorf("preflight: encode %s: %w", ref, err)
	}
	dry, err := p.client.AppsV1().Deployments(ref.Namespace).Patch(ctx, ref.Name, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true), DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		p.note("could not dry-run the apply of %s (%v): its pod template is taken as changed", ref, err)
		return ChangeChanged, nil
	}
	if apiequality.Semantic.DeepEqual(dry.Spec.Template, d.live.Spec.Template) {
		return ChangeUnchanged, nil
	}
	return ChangeChanged, nil
}

// applyBody is the body of the dry-run apply of obj in namespace ns:
// a copy without the fields the server sets.
func applyBody(obj *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	body := obj.DeepCopy()
	body.SetNamespace(ns)
	for _, f := range []string{"resourceVersion", "uid", "managedFields", "creationTimestamp", "generation", "selfLink", "deletionTimestamp"} {
		unstructured.RemoveNestedField(body.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(body.Object, "status")
	return body
}

// replicas sets the replica count the rollout runs with: with an HPA, the
// live count (the HPA owns it) raised to its minReplicas, or minReplicas
// for a new Deployment; else the chart's, the live one's, or 1.
func (p *preflighter) replicas(ctx context.Context, d *deploymentInput) error {
	e := d.entry
	hpa, err := p.hpaFor(ctx, e.Namespace, e.Name)
	if err != nil {
		return err
	}
	switch {
	case hpa != nil && d.live != nil:
		// The HPA scales a Deployment below its minReplicas up to it, but
		// leaves one scaled to 0 alone (autoscaling disabled).
		live := ptr.Deref(d.live.Spec.Replicas, 1)
		e.Replicas = live
		e.ReplicasFrom = "live (HorizontalPodAutoscaler " + hpa.name + ")"
		if live > 0 && hpa.minReplicas > live {
			e.Replicas = hpa.minReplicas
			e.ReplicasFrom = "HorizontalPodAutoscaler " + hpa.name + " minReplicas"
		}
	case hpa != nil:
		e.Replicas = max(1, hpa.minReplicas)
		e.ReplicasFrom = "HorizontalPodAutoscaler " + hpa.name + " minReplicas"
	case d.rendered.Spec.Replicas != nil:
		e.Replicas = *d.rendered.Spec.Replicas
		e.ReplicasFrom = "chart"
	case d.live != nil:
		e.Replicas = ptr.Deref(d.live.Spec.Replicas, 1)
		e.ReplicasFrom = "live"
	default:
		e.Replicas = 1
		e.ReplicasFrom = "default"
	}
	return nil
}

// hpaFor returns the HPA that scales Deployment ns/name: a rendered one,
// else a live one (not one of this release's that is about to be pruned).
func (p *preflighter) hpaFor(ctx context.Context, ns, name string) (*hpaInfo, error) {
	for i, h := range p.renderedHPAs {
		if h.namespace == ns && h.target == name {
			return &p.renderedHPAs[i], nil
		}
	}
	live, ok := p.liveHPAs[ns]
	if !ok {
		list, err := p.listHPAs(ctx, ns)
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			p.note("HorizontalPodAutoscalers in namespace %s not readable (%v): replica counts come from the chart", ns, err)
		case err != nil:
			return nil, fmt.Errorf("preflight: list HorizontalPodAutoscalers in namespace %s: %w", ns, err)
		default:
			if p.opts.OnHPAs != nil {
				p.opts.OnHPAs(ns, list.Items)
			}
			for _, h := range list.Items {
				gv, _ := schema.ParseGroupVersion(h.Spec.ScaleTargetRef.APIVersion)
				if h.Spec.ScaleTargetRef.Kind != "Deployment" || gv.Group != "apps" {
					continue
				}
				live = append(live, hpaInfo{name: h.Name, namespace: ns, target: h.Spec.ScaleTargetRef.Name,
					minReplicas: ptr.Deref(h.Spec.MinReplicas, 1), labels: h.Labels, annotations: h.Annotations})
			}
		}
		p.liveHPAs[ns] = live
	}
	for i, h := range live {
		if h.target != name || p.beingPruned(h.labels, h.annotations, "HorizontalPodAutoscaler", h.name, ns) {
			continue
		}
		return &live[i], nil
	}
	return nil, nil
}

// listHPAs lists the HPAs of namespace ns, or takes those the operation
// already listed (Options.HPAs).
func (p *preflighter) listHPAs(ctx context.Context, ns string) (*autoscalingv2.HorizontalPodAutoscalerList, error) {
	if p.opts.HPAs != nil {
		if items, ok := p.opts.HPAs(ns); ok {
			return &autoscalingv2.HorizontalPodAutoscalerList{Items: items}, nil
		}
	}
	return p.client.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
}

// beingPruned reports whether a live object carries this release's labels
// but is not rendered: the deploy prunes it.
func (p *preflighter) beingPruned(l, a map[string]string, kind, name, ns string) bool {
	if p.opts.Release == "" || !owner.OwnsKeys(l, a, p.opts.Release, p.opts.Namespace) {
		return false
	}
	switch kind {
	case "HorizontalPodAutoscaler":
		for _, h := range p.renderedHPAs {
			if h.name == name && h.namespace == ns {
				return false
			}
		}
	case "PodDisruptionBudget":
		for _, b := range p.renderedPDBs {
			if b.Name == name && b.Namespace == ns {
				return false
			}
		}
	}
	return true
}

// listAll lists objects a page at a time with k8s.io/client-go/tools/pager
// (500 per page, falling back to one full list should a continue token
// expire) and returns what keep makes of each item it keeps. A page is
// dropped once read, so keep can make a big list's items smaller. The
// error is list's, unwrapped.
func listAll[T runtime.Object](ctx context.Context, opts metav1.ListOptions, list pager.ListPageFunc, keep func(T) (T, bool)) ([]T, error) {
	var out []T
	collect := func(o runtime.Object) error {
		item, ok := o.(T)
		if !ok {
			return fmt.Errorf("list returned a %T", o)
		}
		if v, ok := keep(item); ok {
			out = append(out, v)
		}
		return nil
	}
	pg := pager.New(list)
	pg.PageBufferSize = 0
	err := pg.EachListItem(ctx, opts, collect)
	if apierrors.IsResourceExpired(err) {
		// As pager.List does: the pages so far are dropped, and one full
		// list replaces them.
		out = nil
		full := opts
		full.Limit, full.Continue = 0, ""
		var obj runtime.Object
		if obj, err = list(ctx, full); err == nil {
			err = meta.EachListItem(obj, collect)
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// podsIn returns the pods of ns that are not terminated.
func (p *preflighter) podsIn(ctx context.Context, ns string) ([]*corev1.Pod, error) {
	if pods, ok := p.nsPods[ns]; ok {
		return pods, nil
	}
	pods, err := p.listPods(ctx, ns, "", nil)
	switch {
	case apierrors.IsForbidden(err):
		p.note("pods in namespace %s not readable (%v): the room old pods free is not counted", ns, err)
		pods = nil
	case err != nil:
		return nil, err
	default:
		p.nsListed[ns] = true
	}
	p.nsPods[ns] = pods
	return pods, nil
}

// quotasIn returns the ResourceQuotas of ns as they will be once the
// release is applied: the live ones, with the hard limits of the rendered
// ones (applied before the pods roll). A quota's usage is its status; for
// a quota or key that has none yet it is computed from the namespace's
// pods.
func (p *preflighter) quotasIn(ctx context.Context, ns string) ([]*quotaState, error) {
	if q, ok := p.quotas[ns]; ok {
		return q, nil
	}
	byName := map[string]*corev1.ResourceQuota{}
	list, err := p.client.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		p.note("ResourceQuotas in namespace %s not readable (%v): only the rendered ones are checked", ns, err)
	case err != nil:
		return nil, fmt.Errorf("preflight: list ResourceQuotas in namespace %s: %w", ns, err)
	default:
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
	}
	for _, r := range p.renderedQuotas {
		if r.Namespace != ns {
			continue
		}
		q := r.DeepCopy()
		if live, ok := byName[r.Name]; ok {
			q.Status = *live.Status.DeepCopy()
		} else {
			q.Status = corev1.ResourceQuotaStatus{}
		}
		q.Status.Hard = q.Spec.Hard
		byName[r.Name] = q
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []*quotaState
	for _, name := range names {
		q := byName[name]
		if err := p.fillQuotaUsage(ctx, q); err != nil {
			return nil, err
		}
		out = append(out, newQuotaState(q))
	}
	p.quotas[ns] = out
	return out, nil
}

// fillQuotaUsage computes, from the namespace's pods, the usage of the
// keys of q whose status has none (a quota not created yet, or a key just
// added).
func (p *preflighter) fillQuotaUsage(ctx context.Context, q *corev1.ResourceQuota) error {
	var missing []corev1.ResourceName
	for key := range q.Spec.Hard {
		if _, ok := quotaKeyOf(key); !ok {
			continue
		}
		if _, ok := q.Status.Used[key]; !ok {
			missing = append(missing, key)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	pods, err := p.podsIn(ctx, q.Namespace)
	if err != nil {
		return err
	}
	if q.Status.Used == nil {
		q.Status.Used = corev1.ResourceList{}
	}
	for _, key := range missing {
		k, _ := quotaKeyOf(key)
		var sum int64
		for _, pod := range pods {
			if quotaApplies(q, &pod.Spec) {
				sum += usageOf(&pod.Spec).amount(k)
			}
		}
		q.Status.Used[key] = *resource.NewMilliQuantity(sum, resource.DecimalSI)
	}
	return nil
}

// pdbsIn returns the PodDisruptionBudgets that will hold in ns after the
// apply: the rendered ones, and the live ones the apply neither replaces
// nor prunes.
func (p *preflighter) pdbsIn(ctx context.Context, ns string) ([]policyv1.PodDisruptionBudget, error) {
	live, ok := p.livePDBs[ns]
	if !ok {
		list, err := p.client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			p.note("PodDisruptionBudgets in namespace %s not readable (%v): only the rendered ones count", ns, err)
		case err != nil:
			return nil, fmt.Errorf("preflight: list PodDisruptionBudgets in namespace %s: %w", ns, err)
		default:
			live = list.Items
		}
		p.livePDBs[ns] = live
	}
	var out []policyv1.PodDisruptionBudget
	rendered := map[string]bool{}
	for _, b := range p.renderedPDBs {
		if b.Namespace == ns {
			out = append(out, b)
			rendered[b.Name] = true
		}
	}
	for _, b := range live {
		if !rendered[b.Name] && !p.beingPruned(b.Labels, b.Annotations, "PodDisruptionBudget", b.Name, ns) {
			out = append(out, b)
		}
	}
	return out, nil
}
