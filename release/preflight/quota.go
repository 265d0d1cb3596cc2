package preflight

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubectl/pkg/util/qos"
)

// This file holds ResourceQuota accounting: which hard keys count pods,
// which quotas count a pod (scopes), and what is free.

// quotaKey is what one ResourceQuota hard key counts for a pod.
type quotaKey struct {
	limits bool
	name   corev1.ResourceName
}

// quotaKeyOf maps a ResourceQuota hard key to the pod amount it counts;
// ok is false for keys that do not count pods' compute resources (object
// counts, storage).
func quotaKeyOf(key corev1.ResourceName) (quotaKey, bool) {
	s := string(key)
	switch {
	case s == "pods" || s == "count/pods":
		return quotaKey{name: corev1.ResourcePods}, true
	case s == "cpu" || s == "memory" || s == "ephemeral-storage":
		return quotaKey{name: key}, true
	case strings.HasPrefix(s, "requests."):
		name := strings.TrimPrefix(s, "requests.")
		if name == "storage" {
			return quotaKey{}, false
		}
		return quotaKey{name: corev1.ResourceName(name)}, true
	case strings.HasPrefix(s, "limits."):
		return quotaKey{limits: true, name: corev1.ResourceName(strings.TrimPrefix(s, "limits."))}, true
	}
	return quotaKey{}, false
}

func (u podUsage) amount(k quotaKey) int64 {
	if k.limits {
		return u.limits[k.name]
	}
	return u.requests[k.name]
}

// quotaState is one ResourceQuota of a namespace.
type quotaState struct {
	quota *corev1.ResourceQuota
	// free is hard minus used, minus what earlier Deployments of this
	// preflight reserved, per hard key that counts pods.
	free map[corev1.ResourceName]int64
	hard map[corev1.ResourceName]int64
	used map[corev1.ResourceName]int64
}

func newQuotaState(q *corev1.ResourceQuota) *quotaState {
	s := &quotaState{quota: q, free: map[corev1.ResourceName]int64{}, hard: map[corev1.ResourceName]int64{}, used: map[corev1.ResourceName]int64{}}
	hard := q.Spec.Hard
	if len(hard) == 0 {
		hard = q.Status.Hard
	}
	for key, h := range hard {
		if _, ok := quotaKeyOf(key); !ok {
			continue
		}
		used := q.Status.Used[key]
		s.hard[key] = h.MilliValue()
		s.used[key] = used.MilliValue()
		s.free[key] = h.MilliValue() - used.MilliValue()
	}
	return s
}

// keys returns the quota's pod-counting keys, sorted.
func (s *quotaState) keys() []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(s.free))
	for k := range s.free {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// quotaApplies reports whether quota q counts pods of spec, from its
// scopes and scope selector. Unknown scopes are assumed to apply.
//
// Hand-written: the quota evaluator's scope matching lives in
// k8s.io/kubernetes (pkg/quota/v1/evaluator/core), which is not
// importable as a library.
func quotaApplies(q *corev1.ResourceQuota, spec *corev1.PodSpec) bool {
	for _, scope := range q.Spec.Scopes {
		if !scopeMatches(scope, corev1.ScopeSelectorOpExists, nil, spec) {
			return false
		}
	}
	if q.Spec.ScopeSelector != nil {
		for _, e := range q.Spec.ScopeSelector.MatchExpressions {
			if !scopeMatches(e.ScopeName, e.Operator, e.Values, spec) {
				return false
			}
		}
	}
	return true
}

func scopeMatches(scope corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values []string, spec *corev1.PodSpec) bool {
	switch scope {
	case corev1.ResourceQuotaScopeTerminating:
		return spec.ActiveDeadlineSeconds != nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return spec.ActiveDeadlineSeconds == nil
	case corev1.ResourceQuotaScopeBestEffort:
		return isBestEffort(spec)
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !isBestEffort(spec)
	case corev1.ResourceQuotaScopePriorityClass:
		pc := spec.PriorityClassName
		switch op {
		case corev1.ScopeSelectorOpExists:
			return pc != ""
		case corev1.ScopeSelectorOpDoesNotExist:
			return pc == ""
		case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
			in := false
			for _, v := range values {
				in = in || v == pc
			}
			return in == (op == corev1.ScopeSelectorOpIn)
		}
	}
	return true
}

// isBestEffort is Kubernetes' own QoS rule: only cpu and memory count, so
// a pod whose only resource is nvidia.com/gpu is BestEffort (and a
// NotBestEffort quota does not apply to it).
func isBestEffort(spec *corev1.PodSpec) bool {
	return qos.ComputePodQOS(&corev1.Pod{Spec: *spec}) == corev1.PodQOSBestEffort
}
