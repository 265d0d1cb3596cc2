package diff

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// StripNoise returns a deep copy of obj's content without what the API
// server and controllers set by themselves: metadata.managedFields,
// resourceVersion, generation, uid, creationTimestamp, selfLink, the
// deletion timestamps, status, and the annotations
// deployment.kubernetes.io/revision and
// kubectl.kubernetes.io/last-applied-configuration (annotations left empty
// are dropped). A nil obj gives nil.
func StripNoise(obj *unstructured.Unstructured) map[string]any {
	if obj == nil {
		return nil
	}
	c := obj.DeepCopy().Object
	// The metadata the API server writes by itself.
	for _, f := range []string{
		"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp",
		"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds",
	} {
		unstructured.RemoveNestedField(c, "metadata", f)
	}
	unstructured.RemoveNestedField(c, "status")
	if ann, ok, _ := unstructured.NestedMap(c, "metadata", "annotations"); ok {
		// Written by controllers and clients; not the desired state.
		for _, a := range []string{
			"deployment.kubernetes.io/revision",
			"kubectl.kubernetes.io/last-applied-configuration",
		} {
			delete(ann, a)
		}
		if len(ann) == 0 {
			unstructured.RemoveNestedField(c, "metadata", "annotations")
		} else {
			_ = unstructured.SetNestedMap(c, ann, "metadata", "annotations")
		}
	}
	return c
}

// stripAllocated removes from a created Service the cluster IPs a dry run
// invents (the server allocates none in a dry run but answers with a
// placeholder), unless the rendered object asks for them.
func stripAllocated(obj map[string]any, rendered *unstructured.Unstructured) {
	if !isKind(obj, "", "Service") {
		return
	}
	for _, f := range []string{"clusterIP", "clusterIPs"} {
		if rendered != nil {
			if _, set, _ := unstructured.NestedFieldNoCopy(rendered.Object, "spec", f); set {
				continue
			}
		}
		unstructured.RemoveNestedField(obj, "spec", f)
	}
}

// isKind reports whether obj (an object's content) has the group and kind.
func isKind(obj map[string]any, group, kind string) bool {
	if obj == nil {
		return false
	}
	u := unstructured.Unstructured{Object: obj}
	gvk := u.GroupVersionKind()
	return gvk.Group == group && gvk.Kind == kind
}

// isSecret reports whether obj (an object's content) is a core Secret.
func isSecret(obj map[string]any) bool { return isKind(obj, "", "Secret") }

// Markers that replace Secret values.
const (
	MarkerChanged   = "(changed)"
	MarkerUnchanged = "(unchanged)"
	MarkerAdded     = "(added)"
	MarkerRemoved   = "(removed)"
)

// Sentinels keep the two sides of a changed Secret value apart so the line
// shows as removed and added; they are cut from the rendered diff.
const (
	sentinelBefore = "~~vllmctl-mask-before~~"
	sentinelAfter  = "~~vllmctl-mask-after~~"
)

// MaskSecrets replaces, in place, every value of the data and stringData of
// before and after (the contents of the live object and of the object the
// deploy would leave; either may be nil) by a marker when they are
// Secrets: (unchanged) on both sides for a key whose value stays, (changed)
// on both sides for one whose value changes, (added) for a key only after
// has, (removed) for one only before has. stringData is first folded into
// data the way the API server does. Objects that are not Secrets are left
// alone.
func MaskSecrets(before, after map[string]any) {
	masked := func(obj map[string]any) map[string]any {
		if !isSecret(obj) {
			return nil
		}
		return foldStringData(obj)
	}
	b, a := masked(before), masked(after)
	if b == nil && a == nil {
		return
	}
	keys := map[string]bool{}
	for k := range b {
		keys[k] = true
	}
	for k := range a {
		keys[k] = true
	}
	outB, outA := map[string]any{}, map[string]any{}
	for k := range keys {
		vb, inB := b[k]
		va, inA := a[k]
		switch {
		case inB && inA && reflect.DeepEqual(vb, va):
			outB[k], outA[k] = MarkerUnchanged, MarkerUnchanged
		case inB && inA:
			outB[k], outA[k] = MarkerChanged+sentinelBefore, MarkerChanged+sentinelAfter
		case inA:
			outA[k] = MarkerAdded
		default:
			outB[k] = MarkerRemoved
		}
	}
	set := func(obj, data map[string]any) {
		if obj == nil {
			return
		}
		delete(obj, "stringData")
		if len(data) == 0 {
			delete(obj, "data")
			return
		}
		obj["data"] = data
	}
	if before != nil && isSecret(before) {
		set(before, outB)
	}
	if after != nil && isSecret(after) {
		set(after, outA)
	}
}

// foldStringData returns a Secret's data with its stringData merged in
// (base64-encoded; stringData wins), never nil.
func foldStringData(obj map[string]any) map[string]any {
	data := map[string]any{}
	if d, ok := obj["data"].(map[string]any); ok {
		for k, v := range d {
			data[k] = v
		}
	}
	if sd, ok := obj["stringData"].(map[string]any); ok {
		for k, v := range sd {
			s, isString := v.(string)
			if !isString {
				s = fmt.Sprint(v)
			}
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	return data
}

// unmask cuts the sentinels of changed Secret values from rendered text.
func unmask(s string) string {
	return strings.NewReplacer(sentinelBefore, "", sentinelAfter, "").Replace(s)
}
