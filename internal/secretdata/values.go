package secretdata

import (
	"encoding/base64"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Redacted is the one marker of a withheld Secret value, wherever it is
// withheld (diff.Redacted is this).
const Redacted = "(redacted)"

// Values are the values of the core Secrets among objs in every form a
// message could echo (data as stored and decoded, stringData as written
// and encoded), each once, sorted; empty strings left out.
func Values(objs ...*unstructured.Unstructured) []string {
	set := map[string]bool{}
	add := func(s string) {
		if s != "" {
			set[s] = true
		}
	}
	for _, o := range objs {
		if o == nil || !IsSecret(o) {
			continue
		}
		if d, ok := o.Object["data"].(map[string]any); ok {
			for _, v := range d {
				s := fmt.Sprint(v)
				add(s)
				if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
					add(string(dec))
				}
			}
		}
		if sd, ok := o.Object["stringData"].(map[string]any); ok {
			for _, v := range sd {
				s := fmt.Sprint(v)
				add(s)
				add(base64.StdEncoding.EncodeToString([]byte(s)))
			}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// IsSecret reports whether o is a core v1 Secret.
func IsSecret(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}
