package charts

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// CheckNumbers checks every number of the objects of the kinds Kubernetes
// itself serves against its API type: a value its field cannot hold (an
// int32 beyond ±2³¹, a fraction in an integer, -9223372036854775808 from a
// values number too big for int64) would be silently changed on the way to
// the server — replicas: 99999999999999999999999 became 0 replicas. Negative
// replica counts are refused too. Objects of other kinds (custom
// resources) are left to their server. The error is an *InputError naming
// the object and the field (exit code 2).
func CheckNumbers(objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if err := checkObjectNumbers(o); err != nil {
			return err
		}
	}
	return nil
}

func checkObjectNumbers(o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	if !scheme.Scheme.Recognizes(gvk) {
		return nil
	}
	typed, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, typed); err != nil {
		// A shape the type cannot take (a string where a number goes...):
		// the API server names it better.
		return nil
	}
	back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return nil
	}
	bad := func(path []string, msg string) error {
		return &InputError{Source: "manifest", File: ObjectRef(o), Path: strings.Join(path, "."), Msg: msg}
	}
	if r, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "replicas"); ok {
		switch f, isNum := number(r); {
		case isNum && f <= math.MinInt64:
			return bad([]string{"spec", "replicas"}, fmt.Sprintf("%s: out of range (a number too big for a 64-bit integer in the values?)", formatNumber(r)))
		case isNum && f < 0:
			return bad([]string{"spec", "replicas"}, fmt.Sprintf("%s: must not be negative", formatNumber(r)))
		}
	}
	return compareNumbers(o.Object, back, nil, bad)
}

// compareNumbers walks orig and reports the first number that the typed
// round trip changed. Fields the type does not know are left alone.
func compareNumbers(orig, back any, path []string, bad func([]string, string) error) error {
	switch v := orig.(type) {
	case map[string]any:
		b, ok := back.(map[string]any)
		if !ok {
			return nil
		}
		for k, sub := range v {
			bsub, present := b[k]
			if !present {
				continue
			}
			if err := compareNumbers(sub, bsub, append(path, k), bad); err != nil {
				return err
			}
		}
	case []any:
		b, ok := back.([]any)
		if !ok {
			return nil
		}
		for i := range min(len(v), len(b)) {
			if err := compareNumbers(v[i], b[i], append(path, "["+strconv.Itoa(i)+"]"), bad); err != nil {
				return err
			}
		}
	default:
		f, isNum := number(orig)
		if !isNum {
			return nil
		}
		g, backNum := number(back)
		if backNum && f == g && !(f >= math.MaxInt64 || f <= math.MinInt64) {
			return nil
		}
		if !backNum {
			return nil // an int-or-string and the like: the type took it as text
		}
		return bad(path, fmt.Sprintf("%s is out of range for this field (it would be sent as %s)", formatNumber(orig), formatNumber(back)))
	}
	return nil
}

// number returns v as a float64 when it is a number.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func formatNumber(v any) string {
	if f, ok := v.(float64); ok {
		if f == math.Trunc(f) && math.Abs(f) < 1e21 {
			return strconv.FormatFloat(f, 'f', -1, 64)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// CheckMetadata refuses an object whose labels or annotations are not a
// map of strings (an unquoted number or boolean in a template, say
// `helm.sh/hook-weight: -5`): Kubernetes cannot take it, and vllmctl would
// read its labels as absent. The error is an *InputError naming the
// object and the key (exit code 2).
func CheckMetadata(o *unstructured.Unstructured) error {
	for _, field := range []string{"labels", "annotations"} {
		v, ok, _ := unstructured.NestedFieldNoCopy(o.Object, "metadata", field)
		if !ok || v == nil {
			continue
		}
		m, isMap := v.(map[string]any)
		if !isMap {
			return &InputError{Source: "manifest", File: ObjectRef(o), Path: "metadata." + field,
				Msg: fmt.Sprintf("must be a map of strings, not %T", v)}
		}
		for k, val := range m {
			if _, isString := val.(string); !isString {
				return &InputError{Source: "manifest", File: ObjectRef(o), Path: "metadata." + field + "." + k,
					Msg: fmt.Sprintf("must be a string, not %T %v (quote it in the template)", val, val)}
			}
		}
	}
	return nil
}
