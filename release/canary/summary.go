package canary

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/release/storage"
)

// Summary is the canary's note in the revision's description.
func Summary(r *storage.CanaryReport) string {
	if r == nil {
		return ""
	}
	s := fmt.Sprintf("canary %s: %s", r.Count, r.Outcome)
	if r.Outcome == storage.CanarySkipped || r.Outcome == storage.CanaryFailed || r.Outcome == storage.CanaryInterrupted {
		if r.Reason != "" {
			s += " (" + firstLine(r.Reason) + ")"
		}
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// ServiceOf names the first Service among objs ("" when none).
func ServiceOf(objs []*unstructured.Unstructured) string {
	for _, o := range objs {
		if o.GetKind() == "Service" && o.GroupVersionKind().Group == "" {
			return o.GetName()
		}
	}
	return ""
}
