package diff

import (
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	resourcehelper "k8s.io/component-helpers/resource"
	deploymentutil "k8s.io/kubectl/pkg/util/deployment"

	"github.com/vllmctl/vllmctl/internal/podspec"
	"github.com/vllmctl/vllmctl/internal/vllm"
)

// Rollout is the impact of a Deployment change that replaces its pods: the
// Deployment controller rolls out a new ReplicaSet.
type Rollout struct {
	// Strategy is RollingUpdate or Recreate.
	Strategy string `json:"strategy"`
	// Pods is the Deployment's desired replica count.
	Pods int32 `json:"pods"`
	// MaxSurge and MaxUnavailable are resolved against Pods as the
	// Deployment controller resolves them (surge rounds up, unavailable
	// down, and both 0 makes unavailable 1); both 0 for Recreate.
	MaxSurge       int32 `json:"maxSurge"`
	MaxUnavailable int32 `json:"maxUnavailable"`
	// MaxSurgeSpec and MaxUnavailableSpec are the values as written when
	// they are percentages ("25%"), for display.
	MaxSurgeSpec       string `json:"maxSurgeSpec,omitempty"`
	MaxUnavailableSpec string `json:"maxUnavailableSpec,omitempty"`
	// GPUsPerPod is the nvidia.com/gpu a pod of the new template needs.
	GPUsPerPod int64 `json:"gpusPerPod"`
	// ExtraGPUs is MaxSurge × GPUsPerPod: the GPUs the rollout needs on top
	// of those the old pods hold, at most.
	ExtraGPUs int64 `json:"extraGPUs"`
}

// String returns the rollout impact line, e.g. "rolls out a new
// ReplicaSet: 2 pods, maxSurge 1, maxUnavailable 0, needs up to 1 extra
// GPU".
func (r Rollout) String() string {
	var gpus string
	switch r.ExtraGPUs {
	case 0:
		gpus = "needs no extra GPUs"
	case 1:
		gpus = "needs up to 1 extra GPU"
	default:
		gpus = fmt.Sprintf("needs up to %d extra GPUs", r.ExtraGPUs)
	}
	if r.Strategy == string(appsv1.RecreateDeploymentStrategyType) {
		return fmt.Sprintf("rolls out a new ReplicaSet: %s, strategy Recreate (all old pods stop first), %s", pods(r.Pods), gpus)
	}
	return fmt.Sprintf("rolls out a new ReplicaSet: %s, maxSurge %s, maxUnavailable %s, %s",
		pods(r.Pods), withSpec(r.MaxSurge, r.MaxSurgeSpec), withSpec(r.MaxUnavailable, r.MaxUnavailableSpec), gpus)
}

func pods(n int32) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

func withSpec(n int32, spec string) string {
	if spec == "" {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (%s)", n, spec)
}

// resolveFenceposts resolves a rolling update's maxSurge and
// maxUnavailable against the desired replica count with the Deployment
// controller's own rule (deploymentutil.ResolveFenceposts: surge rounds up,
// unavailable down, both 0 makes unavailable 1); nil means the API default
// 25%, which the library leaves to defaulting.
func resolveFenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (surge, unavailable int32, err error) {
	def := intstr.FromString("25%")
	ms := intstr.ValueOrDefault(maxSurge, def)
	mu := intstr.ValueOrDefault(maxUnavailable, def)
	surge, unavailable, err = deploymentutil.ResolveFenceposts(ms, mu, desired)
	if err != nil {
		return 0, 0, fmt.Errorf("resolve maxSurge %s / maxUnavailable %s: %w", ms, mu, err)
	}
	return surge, unavailable, nil
}

// PodGPUs returns the nvidia.com/gpu a pod of spec needs, as the scheduler
// counts it (component-helpers resource.PodRequests): the sum over its
// containers and restartable (sidecar) init containers, or the largest
// plain init container (plus the sidecars started before it) if that is
// more. A container with a GPU limit and no GPU request requests its limit,
// as API defaulting sets it.
func PodGPUs(spec *corev1.PodSpec) int64 {
	reqs := resourcehelper.PodRequests(podspec.Defaulted(spec), resourcehelper.PodResourcesOptions{ExcludeOverhead: true})
	q := reqs[vllm.GPUResource]
	return q.Value()
}

// rolloutOf returns the rollout impact of changing Deployment before into
// after (their contents, noise stripped), or nil when the pod template
// stays the same (no new ReplicaSet) or either is not a Deployment.
func rolloutOf(before, after map[string]any) (*Rollout, error) {
	if !isKind(before, "apps", "Deployment") || !isKind(after, "apps", "Deployment") {
		return nil, nil
	}
	tb, _, _ := unstructured.NestedFieldNoCopy(before, "spec", "template")
	ta, _, _ := unstructured.NestedFieldNoCopy(after, "spec", "template")
	if reflect.DeepEqual(tb, ta) {
		return nil, nil
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(after, &d); err != nil {
		return nil, fmt.Errorf("read Deployment: %w", err)
	}
	r := &Rollout{Strategy: string(d.Spec.Strategy.Type), Pods: 1}
	if d.Spec.Replicas != nil {
		r.Pods = *d.Spec.Replicas
	}
	if r.Strategy == "" {
		r.Strategy = string(appsv1.RollingUpdateDeploymentStrategyType)
	}
	r.GPUsPerPod = PodGPUs(&d.Spec.Template.Spec)
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return r, nil
	}
	var ms, mu *intstr.IntOrString
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		ms, mu = ru.MaxSurge, ru.MaxUnavailable
	}
	surge, unavailable, err := resolveFenceposts(ms, mu, r.Pods)
	if err != nil {
		return nil, err
	}
	r.MaxSurge, r.MaxUnavailable = surge, unavailable
	r.MaxSurgeSpec, r.MaxUnavailableSpec = percentSpec(ms), percentSpec(mu)
	r.ExtraGPUs = int64(surge) * r.GPUsPerPod
	return r, nil
}

// percentSpec returns v when it is a percentage, else "".
func percentSpec(v *intstr.IntOrString) string {
	if v == nil {
		return "25%"
	}
	if v.Type == intstr.String {
		return v.StrVal
	}
	return ""
}
