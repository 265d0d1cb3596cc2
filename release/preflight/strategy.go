package preflight

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	deploymentutil "k8s.io/kubectl/pkg/util/deployment"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/object"
)

// SurgePolicy says what the rollout preflight does when a Deployment's
// surge pods cannot fit (--surge-policy).
type SurgePolicy string

// The surge policies.
const (
	// SurgePolicyAuto lowers maxSurge to 0 and raises maxUnavailable just
	// enough (within the PodDisruptionBudget, never for a single replica)
	// when the surge cannot fit, and refuses when nothing fits.
	SurgePolicyAuto SurgePolicy = "auto"
	// SurgePolicyStrict never changes the strategy and refuses when the
	// surge cannot fit.
	SurgePolicyStrict SurgePolicy = "strict"
	// SurgePolicyOff only reports.
	SurgePolicyOff SurgePolicy = "off"
)

// ParseSurgePolicy parses a --surge-policy value; "" is auto.
func ParseSurgePolicy(s string) (SurgePolicy, error) {
	switch p := SurgePolicy(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return SurgePolicyAuto, nil
	case SurgePolicyAuto, SurgePolicyStrict, SurgePolicyOff:
		return p, nil
	}
	return "", &StrategyInputError{Reason: fmt.Sprintf("invalid surge policy %q: want auto, strict or off", s)}
}

// ParseMaxUnavailable parses a --max-unavailable value as
// ParseIntOrPercent does, and refuses a percentage over 100%, as the API
// server refuses a Deployment's maxUnavailable: grouped releases
// (StatefulSet groups, which no API server validates) are held to the
// same rule. (A maxSurge percentage may exceed 100%, as a Deployment's
// may.) flag names the flag in the error.
func ParseMaxUnavailable(flag, value string) (*intstr.IntOrString, error) {
	v, err := ParseIntOrPercent(flag, value)
	if err != nil {
		return nil, err
	}
	if v.Type == intstr.String {
		if n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%")); err == nil && n > 100 {
			return nil, &StrategyInputError{Reason: fmt.Sprintf("invalid %s %q: a percentage may not be more than 100%%", flag, value)}
		}
	}
	return v, nil
}

// ParseIntOrPercent parses a --max-surge or --max-unavailable value: a
// non-negative integer or a percentage ("25%"). flag names the flag in the
// error.
func ParseIntOrPercent(flag, value string) (*intstr.IntOrString, error) {
	v := strings.TrimSpace(value)
	bad := &StrategyInputError{Reason: fmt.Sprintf("invalid %s %q: want a non-negative integer or a percentage such as 25%%", flag, value)}
	if num, ok := strings.CutSuffix(v, "%"); ok {
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			return nil, bad
		}
		return ptr.To(intstr.FromString(strconv.Itoa(n) + "%")), nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return nil, bad
	}
	return ptr.To(intstr.FromInt32(int32(n))), nil
}

// Strategy is a Deployment's rollout strategy, as written and as the
// Deployment controller resolves it for the replica count.
type Strategy struct {
	// Type is RollingUpdate or Recreate.
	Type string `json:"type"`
	// MaxSurge and MaxUnavailable as written (defaulted to 25% as the API
	// server does); nil for Recreate.
	MaxSurge       *intstr.IntOrString `json:"maxSurge,omitempty"`
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// Surge and Unavailable are the pod counts they resolve to: surge
	// rounds up, unavailable down, and when both are 0 unavailable is 1.
	Surge       int32 `json:"surge"`
	Unavailable int32 `json:"unavailable"`
}

func (s Strategy) recreate() bool { return s.Type == string(appsv1.RecreateDeploymentStrategyType) }

func sameStrategy(a, b Strategy) bool {
	return a.Type == b.Type && intOrPercent(a.MaxSurge) == intOrPercent(b.MaxSurge) && intOrPercent(a.MaxUnavailable) == intOrPercent(b.MaxUnavailable)
}

// resolveStrategy defaults a strategy as the API server does, applies the
// overrides, and resolves the pod counts as the Deployment controller does.
func resolveStrategy(s appsv1.DeploymentStrategy, maxSurge, maxUnavailable *intstr.IntOrString, replicas int32) (Strategy, error) {
	out := Strategy{Type: string(s.Type)}
	if out.Type == "" {
		out.Type = string(appsv1.RollingUpdateDeploymentStrategyType)
	}
	if out.recreate() {
		return out, nil
	}
	if out.Type != string(appsv1.RollingUpdateDeploymentStrategyType) {
		return out, fmt.Errorf("unknown strategy type %q", out.Type)
	}
	def := intstr.FromString("25%")
	out.MaxSurge, out.MaxUnavailable = ptr.To(def), ptr.To(def)
	if ru := s.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			out.MaxSurge = ptr.To(*ru.MaxSurge)
		}
		if ru.MaxUnavailable != nil {
			out.MaxUnavailable = ptr.To(*ru.MaxUnavailable)
		}
	}
	if maxSurge != nil {
		out.MaxSurge = ptr.To(*maxSurge)
	}
	if maxUnavailable != nil {
		out.MaxUnavailable = ptr.To(*maxUnavailable)
	}
	// As validation does: both may not be 0 (before rounding).
	if zeroIntOrPercent(*out.MaxSurge) && zeroIntOrPercent(*out.MaxUnavailable) {
		return out, fmt.Errorf("maxSurge and maxUnavailable may not both be 0")
	}
	if out.MaxUnavailable.Type == intstr.String {
		if n, err := strconv.Atoi(strings.TrimSuffix(out.MaxUnavailable.StrVal, "%")); err == nil && n > 100 {
			return out, fmt.Errorf("maxUnavailable %s is more than 100%%", out.MaxUnavailable.StrVal)
		}
	}
	// The Deployment controller adds the resolved maxSurge to the replica
	// count in 32 bits (NewRSNewReplicas in
	// pkg/controller/deployment/util): past that the sum wraps, negative
	// for some values, and then the new ReplicaSet never grows.
	if n, err := intstr.GetScaledValueFromIntOrPercent(out.MaxSurge, int(replicas), true); err == nil && int64(n)+int64(replicas) > math.MaxInt32 {
		return out, fmt.Errorf("maxSurge %s resolves to %d pods for %d replica(s): the Deployment controller adds it to the replica count in 32 bits, where this wraps: how many new pods it starts is then arbitrary, for some values none; use at most 100%% or a pod count", out.MaxSurge, n, replicas)
	}
	surge, unavailable, err := deploymentutil.ResolveFenceposts(out.MaxSurge, out.MaxUnavailable, replicas)
	if err != nil {
		return out, fmt.Errorf("resolve maxSurge %s / maxUnavailable %s: %w", out.MaxSurge, out.MaxUnavailable, err)
	}
	out.Surge, out.Unavailable = surge, unavailable
	return out, nil
}

func zeroIntOrPercent(v intstr.IntOrString) bool {
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	return err == nil && n == 0
}

// SetStrategy is the one rule for overriding a Deployment's rollout
// strategy: it sets obj's spec.strategy.type to RollingUpdate and, for each
// of surge and unavailable that is not nil, spec.strategy.rollingUpdate's
// maxSurge or maxUnavailable (an integer as int64, a percentage as its
// string). obj is changed in place; errors name the object.
func SetStrategy(obj *unstructured.Unstructured, surge, unavailable *intstr.IntOrString) error {
	set := func(v *intstr.IntOrString, field string) error {
		if v == nil {
			return nil
		}
		var val any = v.String()
		if v.Type == intstr.Int {
			val = int64(v.IntValue())
		}
		return unstructured.SetNestedField(obj.Object, val, "spec", "strategy", "rollingUpdate", field)
	}
	if err := unstructured.SetNestedField(obj.Object, string(appsv1.RollingUpdateDeploymentStrategyType), "spec", "strategy", "type"); err != nil {
		return fmt.Errorf("%s: set strategy: %w", object.RefOf(obj), err)
	}
	if err := set(surge, "maxSurge"); err != nil {
		return fmt.Errorf("%s: set maxSurge: %w", object.RefOf(obj), err)
	}
	if err := set(unavailable, "maxUnavailable"); err != nil {
		return fmt.Errorf("%s: set maxUnavailable: %w", object.RefOf(obj), err)
	}
	return nil
}

// ApplyOverrides returns objs with the strategy of every Deployment whose
// report entry has an Effective strategy (overrides, surge policy)
// rewritten by [SetStrategy]. Rewritten Deployments are copies; other
// objects are returned as they are. A nil report returns objs.
//
// An Effective strategy is always a RollingUpdate: overrides on a Recreate
// Deployment are refused by [Run], and the surge policy only changes
// rolling updates.
func ApplyOverrides(objs []*unstructured.Unstructured, report *Report) ([]*unstructured.Unstructured, error) {
	if report == nil {
		return objs, nil
	}
	out := make([]*unstructured.Unstructured, len(objs))
	copy(out, objs)
	for i, obj := range objs {
		if !object.RefOf(obj).IsDeployment() {
			continue
		}
		ns := obj.GetNamespace()
		if ns == "" {
			ns = report.namespace
		}
		var eff *Strategy
		for _, d := range report.Deployments {
			if d.Name == obj.GetName() && d.Namespace == ns {
				eff = d.Effective
			}
		}
		if eff == nil {
			continue
		}
		c := obj.DeepCopy()
		if err := SetStrategy(c, eff.MaxSurge, eff.MaxUnavailable); err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// CheckStrategies refuses, with no cluster access, a rendered Deployment
// whose rollout strategy (with the overrides already set on it) the API
// server would refuse: maxSurge and maxUnavailable both 0, maxUnavailable
// over 100%, an unknown type or a value that does not parse. It is the
// check [Run] starts with, and its error is the same *StrategyInputError
// naming the Deployment; a deploy runs it before its server-side dry run,
// so that the refusal is the preflight's, not the server's. Objects
// without a namespace take namespace.
func CheckStrategies(objs []*unstructured.Unstructured, namespace string) error {
	p := &preflighter{opts: Options{Namespace: namespace}, report: &Report{}} // its notes are not reported
	deps, err := p.collect(objs)
	if err != nil {
		return err
	}
	for _, d := range deps {
		if _, err := d.resolve(nil, nil, ptr.Deref(d.rendered.Spec.Replicas, 1)); err != nil {
			return err
		}
	}
	return nil
}
