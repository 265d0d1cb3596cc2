package canary

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// Target is one Deployment the canary holds.
type Target struct {
	Ref      object.Ref
	Replicas int32
	Pods     int32 // canary pods
}

// Targets are the Deployments whose pod template the deploy changes
// against the release's deployed revision (deployed: its objects; none on
// a first install) and that have pods today, with their canary counts.
// The decision is never taken against the live object: after a refused or
// interrupted canary the live template already is the new one, and the
// canary must still hold. The replica count is the server-side dry run's
// (live when there is none), so an HPA's live replica count counts.
func Targets(objs, deployed []*unstructured.Unstructured, live, dryRun map[string]*unstructured.Unstructured, count intstr.IntOrString, namespace string) []Target {
	before := map[string]*unstructured.Unstructured{}
	for _, o := range deployed {
		if r := charts.RefIn(o, namespace); r.IsDeployment() {
			before[r.String()] = o
		}
	}
	var out []Target
	for _, o := range objs {
		ref := charts.RefIn(o, namespace)
		if !ref.IsDeployment() {
			continue
		}
		key := ref.String()
		prev, cur := before[key], live[key]
		if prev == nil || cur == nil || SameTemplate(prev, o) {
			continue // a new Deployment, or the deployed pod template
		}
		replicas := ReplicasOf(dryRun[key])
		if dryRun[key] == nil {
			replicas = ReplicasOf(cur)
		}
		if replicas <= 0 {
			continue
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(&count, int(replicas), true)
		if err != nil || n < 1 {
			n = 1
		}
		out = append(out, Target{Ref: ref, Replicas: replicas, Pods: int32(min(n, int(replicas)))})
	}
	return out
}

// DeployedObjects returns the objects of the deployed revision among
// entries (the highest one; nil when none is deployed): what Targets
// decides against.
func DeployedObjects(entries []storage.Entry) ([]*unstructured.Unstructured, error) {
	for _, e := range slices.Backward(entries) {
		if e.Status != storage.StatusDeployed {
			continue
		}
		r, err := e.Release()
		if err != nil {
			return nil, err
		}
		objs, err := cluster.ParseManifest(r.Manifest)
		if err != nil {
			return nil, fmt.Errorf("release %s revision %d: %w", r.Name, r.Revision, err)
		}
		return objs, nil
	}
	return nil, nil
}

// SameTemplate reports whether two Deployments have the same pod template.
func SameTemplate(a, b *unstructured.Unstructured) bool {
	ta, _, _ := unstructured.NestedFieldNoCopy(a.Object, "spec", "template")
	tb, _, _ := unstructured.NestedFieldNoCopy(b.Object, "spec", "template")
	return reflect.DeepEqual(ta, tb)
}

// ReplicasOf is a Deployment's spec.replicas (1 when unset, 0 for nil).
func ReplicasOf(o *unstructured.Unstructured) int32 {
	if o == nil {
		return 0
	}
	n, found, err := unstructured.NestedInt64(o.Object, "spec", "replicas")
	if err != nil || !found {
		return 1
	}
	return int32(min(max(n, 0), math.MaxInt32))
}

// PodCount is the number of canary pods of targets.
func PodCount(targets []Target) int32 {
	var n int32
	for _, t := range targets {
		n += t.Pods
	}
	return n
}

// Objects returns copies of objs with the transient canary strategy
// on every target Deployment: maxSurge its canary count, maxUnavailable 0,
// a minReadySeconds no canary pod reaches (MinReadySeconds: no old
// pod is ever taken down before promotion), a progress deadline above
// that, and Annotation naming revision.
func Objects(objs []*unstructured.Unstructured, targets []Target, revision int, namespace string) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, obj := range objs {
		out[i] = obj
		t := TargetOf(targets, charts.RefIn(obj, namespace))
		if t == nil {
			continue
		}
		c := obj.DeepCopy()
		deadline, found, _ := unstructured.NestedInt64(c.Object, "spec", "progressDeadlineSeconds")
		if !found || deadline <= 0 {
			deadline = defaultProgressDeadline
		}
		strategy := map[string]any{
			"type":          "RollingUpdate",
			"rollingUpdate": map[string]any{"maxSurge": int64(t.Pods), "maxUnavailable": int64(0)},
		}
		if err := unstructured.SetNestedField(c.Object, strategy, "spec", "strategy"); err != nil {
			return nil, fmt.Errorf("%s: set the canary strategy: %w", t.Ref, err)
		}
		if err := unstructured.SetNestedField(c.Object, int64(MinReadySeconds), "spec", "minReadySeconds"); err != nil {
			return nil, fmt.Errorf("%s: set the canary minReadySeconds: %w", t.Ref, err)
		}
		progress := min(int64(MinReadySeconds)+deadline, math.MaxInt32)
		if err := unstructured.SetNestedField(c.Object, progress, "spec", "progressDeadlineSeconds"); err != nil {
			return nil, fmt.Errorf("%s: set the canary progress deadline: %w", t.Ref, err)
		}
		annotations := c.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[Annotation] = strconv.Itoa(revision)
		c.SetAnnotations(annotations)
		out[i] = c
	}
	return out, nil
}

// TargetOf returns the target of ref, or nil.
func TargetOf(targets []Target, ref object.Ref) *Target {
	for i := range targets {
		t := &targets[i].Ref
		if t.Kind == ref.Kind && t.Group == ref.Group && t.Namespace == ref.Namespace && t.Name == ref.Name {
			return &targets[i]
		}
	}
	return nil
}

// TargetObjects returns the objects of objs that are targets.
func TargetObjects(objs []*unstructured.Unstructured, targets []Target, namespace string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		if TargetOf(targets, charts.RefIn(obj, namespace)) != nil {
			out = append(out, obj)
		}
	}
	return out
}
