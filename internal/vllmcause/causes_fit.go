// The hints of a model-fit refusal: the ones a rollout that failed with
// the same cause gives, for the same container.

package vllmcause

import (
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

// FitHints returns the hints of cause (CauseGPUOOM or CauseKVCache) for
// container of pod, as the classifier gives them when a rollout fails
// with that cause; maxLen, when positive, is the longest --max-model-len
// the memory left holds (the kv-cache hint quotes it); values is the
// chart's values mapping (nil: flags only). Other causes have none here.
func FitHints(cause Cause, pod *corev1.Pod, container string, maxLen int64, values vllm.ValuesMap) []string {
	spec := newServerSpec(pod, container)
	if spec == nil {
		spec = &serverSpec{flags: map[string]string{}}
	}
	spec.values = values
	m := causeMatch{cause: cause}
	if maxLen > 0 {
		m.re = regexp.MustCompile(`(?P<maxlen>\d+)`)
		m.sub = m.re.FindStringSubmatch(strconv.FormatInt(maxLen, 10))
	}
	switch cause {
	case CauseGPUOOM:
		return gpuOOMHints(spec, m)
	case CauseKVCache:
		return kvCacheHints(spec, m)
	}
	return nil
}
