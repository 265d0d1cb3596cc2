package lint

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// minServerCPU is the smallest cpu limit VL005 accepts on a GPU server.
const minServerCPU = 4

// checkGPUInteger is VL001: nvidia.com/gpu must be a whole number, limited,
// with requests equal to limits.
func checkGPUInteger(w *workload, _ Options) []Finding {
	var out []Finding
	for _, c := range w.containers {
		req, hasReq := resourceValue(c.raw, "requests", gpuResource)
		lim, hasLim := resourceValue(c.raw, "limits", gpuResource)
		if !hasReq && !hasLim {
			continue
		}
		var parsed [2]*resource.Quantity
		for i, s := range []struct {
			section string
			v       any
			set     bool
		}{{"requests", req, hasReq}, {"limits", lim, hasLim}} {
			if !s.set {
				continue
			}
			field := fmt.Sprintf("%s.resources.%s.%s", c.path, s.section, gpuResource)
			q, err := parseQuantity(s.v)
			switch {
			case err != nil:
				out = append(out, Finding{Field: field, Message: fmt.Sprintf(
					"container %q: %s %s %q is not a quantity (%v)", c.name, gpuResource, s.section, formatValue(s.v), err)})
			case q.MilliValue()%1000 != 0 || q.Sign() < 0:
				out = append(out, Finding{Field: field, Message: fmt.Sprintf(
					"container %q: %s %s is %s; GPUs are indivisible, use a whole number (share a card with MIG or time-slicing instead)",
					c.name, gpuResource, s.section, q.String())})
			default:
				parsed[i] = &q
			}
		}
		if hasReq && !hasLim {
			out = append(out, Finding{
				Field: fmt.Sprintf("%s.resources.limits.%s", c.path, gpuResource),
				Message: fmt.Sprintf("container %q requests %s %s without a limit; extended resources need limits equal to requests",
					c.name, formatValue(req), gpuResource),
			})
			continue
		}
		if parsed[0] != nil && parsed[1] != nil && parsed[0].Cmp(*parsed[1]) != 0 {
			out = append(out, Finding{
				Field: fmt.Sprintf("%s.resources.requests.%s", c.path, gpuResource),
				Message: fmt.Sprintf("container %q: %s requests (%s) differ from limits (%s); GPUs cannot be overcommitted, set them equal",
					c.name, gpuResource, parsed[0].String(), parsed[1].String()),
			})
		}
	}
	return out
}

// checkGuaranteed is VL002: a GPU pod should be Guaranteed QoS.
func checkGuaranteed(w *workload, _ Options) []Finding {
	if !w.gpuPod() {
		return nil
	}
	var reasons []string
	firstField := ""
	anySet := false
	for _, c := range w.containers {
		for _, name := range []string{"cpu", "memory"} {
			req, hasReq := resourceValue(c.raw, "requests", name)
			lim, hasLim := resourceValue(c.raw, "limits", name)
			if hasReq || hasLim {
				anySet = true
			}
			var reason, field string
			switch {
			case !hasLim:
				reason = fmt.Sprintf("container %q has no %s limit", c.name, name)
				field = fmt.Sprintf("%s.resources.limits.%s", c.path, name)
			case hasReq && !quantitiesEqual(req, lim):
				reason = fmt.Sprintf("container %q %s request %s != limit %s", c.name, name, formatValue(req), formatValue(lim))
				field = fmt.Sprintf("%s.resources.requests.%s", c.path, name)
			default:
				continue
			}
			reasons = append(reasons, reason)
			if firstField == "" {
				firstField = field
			}
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	class := "Burstable"
	if !anySet && !w.anyOtherResource() {
		class = "BestEffort"
	}
	return []Finding{{
		Field: firstField,
		Message: fmt.Sprintf("GPU pod is %s QoS, not Guaranteed (evicted before Guaranteed pods under node pressure): %s; set cpu and memory limits on every container with requests equal to them",
			class, strings.Join(reasons, "; ")),
	}}
}

// anyOtherResource reports whether any container sets any request or limit
// (a pod with only GPU limits is Burstable, not BestEffort).
func (w *workload) anyOtherResource() bool {
	for _, c := range w.containers {
		res, _ := c.raw["resources"].(map[string]any)
		for _, section := range []string{"requests", "limits"} {
			if m, _ := res[section].(map[string]any); len(m) > 0 {
				return true
			}
		}
	}
	return false
}

// quantitiesEqual compares two raw quantities; unparsable values are equal
// only when written identically.
func quantitiesEqual(a, b any) bool {
	qa, errA := parseQuantity(a)
	qb, errB := parseQuantity(b)
	if errA != nil || errB != nil {
		return formatValue(a) == formatValue(b)
	}
	return qa.Cmp(qb) == 0
}

// checkShm is VL003: GPU server containers need a memory-backed emptyDir at
// /dev/shm.
func checkShm(w *workload, _ Options) []Finding {
	if !w.gpuPod() {
		return nil
	}
	type vol struct{ memory bool }
	vols := map[string]vol{}
	items, _ := w.spec["volumes"].([]any)
	for _, item := range items {
		v, _ := item.(map[string]any)
		name, _ := v["name"].(string)
		ed, isEmptyDir := v["emptyDir"].(map[string]any)
		medium, _ := ed["medium"].(string)
		vols[name] = vol{memory: isEmptyDir && medium == "Memory"}
	}
	var out []Finding
	for _, c := range w.servers() {
		mounted, memory := "", false
		mounts, _ := c.raw["volumeMounts"].([]any)
		for _, item := range mounts {
			m, _ := item.(map[string]any)
			if p, _ := m["mountPath"].(string); strings.TrimRight(p, "/") == "/dev/shm" {
				mounted, _ = m["name"].(string)
				memory = vols[mounted].memory
				break
			}
		}
		switch {
		case mounted == "":
			out = append(out, Finding{
				Field: c.path + ".volumeMounts",
				Message: fmt.Sprintf("GPU container %q mounts nothing at /dev/shm; the runtime default is 64Mi, too small for vLLM/NCCL shared memory: mount an emptyDir with medium: Memory and a sizeLimit",
					c.name),
			})
		case !memory:
			out = append(out, Finding{
				Field: c.path + ".volumeMounts",
				Message: fmt.Sprintf("GPU container %q mounts volume %q at /dev/shm but it is not an emptyDir with medium: Memory",
					c.name, mounted),
			})
		}
	}
	return out
}

// checkProbes is VL004: server containers need readiness and startup
// probes.
func checkProbes(w *workload, _ Options) []Finding {
	var out []Finding
	for _, c := range w.servers() {
		if _, ok := c.raw["readinessProbe"].(map[string]any); !ok {
			out = append(out, Finding{
				Field: c.path + ".readinessProbe",
				Message: fmt.Sprintf("container %q has no readinessProbe: the Service sends traffic to a pod still loading weights and rollouts cannot tell when it is ready",
					c.name),
			})
		}
		if _, ok := c.raw["startupProbe"].(map[string]any); !ok {
			out = append(out, Finding{
				Field: c.path + ".startupProbe",
				Message: fmt.Sprintf("container %q has no startupProbe: give slow weight loading its own budget (failureThreshold x periodSeconds) instead of stretching readiness/liveness",
					c.name),
			})
		}
	}
	return out
}

// checkCPULimit is VL005: a GPU server's cpu limit should be at least 4.
func checkCPULimit(w *workload, _ Options) []Finding {
	var out []Finding
	for _, c := range w.servers() {
		if !c.gpuSet {
			continue
		}
		v, ok := resourceValue(c.raw, "limits", "cpu")
		if !ok {
			continue
		}
		q, err := parseQuantity(v)
		if err != nil || q.Cmp(*resource.NewQuantity(minServerCPU, resource.DecimalSI)) >= 0 {
			continue
		}
		out = append(out, Finding{
			Field: c.path + ".resources.limits.cpu",
			Message: fmt.Sprintf("GPU container %q has a cpu limit of %s (< %d): tokenisation, sampling, HTTP and PyTorch threads get throttled, which shows as TTFT jitter and an underused GPU",
				c.name, q.String(), minServerCPU),
		})
	}
	return out
}

// checkRequests is VL006: every container needs cpu and memory requests (a
// limit alone defaults the request).
func checkRequests(w *workload, _ Options) []Finding {
	var out []Finding
	for _, c := range w.containers {
		for _, name := range []string{"cpu", "memory"} {
			_, hasReq := resourceValue(c.raw, "requests", name)
			_, hasLim := resourceValue(c.raw, "limits", name)
			if hasReq || hasLim {
				continue
			}
			out = append(out, Finding{
				Field: fmt.Sprintf("%s.resources.requests.%s", c.path, name),
				Message: fmt.Sprintf("container %q has no %s request: the scheduler cannot account for it and an HPA on %s utilisation cannot work (it divides usage by requests)",
					c.name, name, name),
			})
		}
	}
	return out
}

// checkSelector is VL007: the selector must exist and match the template
// labels.
func checkSelector(w *workload, _ Options) []Finding {
	if w.kind == "Pod" || w.kind == "LeaderWorkerSet" { // the LWS controller writes its selectors
		return nil
	}
	raw, found, err := unstructured.NestedMap(w.obj.Object, "spec", "selector")
	if err != nil || !found || len(raw) == 0 {
		return []Finding{{Field: "spec.selector", Message: "no selector: set spec.selector.matchLabels to stable pod template labels"}}
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		return []Finding{{Field: "spec.selector", Message: fmt.Sprintf("invalid selector: %v", err)}}
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return []Finding{{Field: "spec.selector", Message: fmt.Sprintf("invalid selector: %v", err)}}
	}
	if sel.Empty() {
		return []Finding{{Field: "spec.selector", Message: "empty selector: set spec.selector.matchLabels to stable pod template labels"}}
	}
	if sel.Matches(labels.Set(w.templateLabels)) {
		return nil
	}
	return []Finding{{
		Field: "spec.selector",
		Message: fmt.Sprintf("selector %q does not match the pod template labels {%s} (%s.metadata.labels); the API server rejects the object",
			sel.String(), formatLabels(w.templateLabels), w.templatePath),
	}}
}

func formatLabels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// checkNamespace is VL008: no workloads in the default namespace.
func checkNamespace(w *workload, _ Options) []Finding {
	if w.namespace != metav1.NamespaceDefault {
		return nil
	}
	return []Finding{{
		Field:   "metadata.namespace",
		Message: `workload in the "default" namespace: run each project and environment in its own namespace with a ResourceQuota (-n/--namespace)`,
	}}
}

// checkImageTag is VL009: images need a pinned tag other than latest.
func checkImageTag(w *workload, _ Options) []Finding {
	var out []Finding
	for _, c := range w.containers {
		image, _ := c.raw["image"].(string)
		problem := imageTagProblem(image)
		if problem == "" {
			continue
		}
		out = append(out, Finding{
			Field:   c.path + ".image",
			Message: fmt.Sprintf("container %q image %q %s: pin a version tag or digest so rollouts and rollbacks are reproducible", c.name, image, problem),
		})
	}
	return out
}

// imageTagProblem returns why an image reference is not pinned, or "".
func imageTagProblem(image string) string {
	if image == "" {
		return "is empty"
	}
	if strings.Contains(image, "@") {
		return "" // pinned by digest
	}
	last := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(last, ":")
	if i < 0 {
		return "has no tag (means :latest)"
	}
	if last[i+1:] == "latest" {
		return "uses :latest"
	}
	return ""
}

// checkSurge is VL010: surging a GPU Deployment needs spare GPUs.
func checkSurge(w *workload, _ Options) []Finding {
	if w.kind != "Deployment" || !w.gpuPod() {
		return nil
	}
	strategyType, _, _ := unstructured.NestedString(w.obj.Object, "spec", "strategy", "type")
	if strategyType == "Recreate" {
		return nil
	}
	surge := intstr.FromString("25%") // the Kubernetes default
	field := "spec.strategy.rollingUpdate.maxSurge"
	count := int64(-1) // an integer maxSurge, as written (no 32-bit cut)
	if v, found, _ := unstructured.NestedFieldNoCopy(w.obj.Object, "spec", "strategy", "rollingUpdate", "maxSurge"); found && v != nil {
		switch x := v.(type) {
		case string:
			surge = intstr.Parse(x)
		case int64:
			surge, count = intstr.FromString(strconv.FormatInt(x, 10)), x
		case float64:
			surge, count = intstr.FromString(strconv.FormatInt(int64(x), 10)), int64(x)
		}
	}
	replicas := int64(1)
	if v, found, _ := unstructured.NestedFieldNoCopy(w.obj.Object, "spec", "replicas"); found {
		switch x := v.(type) {
		case int64:
			replicas = x
		case float64:
			replicas = int64(x)
		}
	}
	n := count
	if n < 0 {
		scaled, err := intstr.GetScaledValueFromIntOrPercent(&surge, int(replicas), true)
		if err != nil {
			return nil
		}
		n = int64(scaled)
	}
	// The Deployment controller never grows the new ReplicaSet past the
	// replicas: no more extra pods run than that, however large maxSurge.
	n = min(n, replicas)
	if n <= 0 {
		return nil
	}
	gpus := w.gpusPerPod()
	return []Finding{{
		Field: field,
		Message: fmt.Sprintf("maxSurge %s lets the rollout run %d extra pod(s), needing %d spare %s beyond the running replicas or the surge pods stay Pending; with no spare GPUs use maxSurge 0 and maxUnavailable >= 1",
			surge.String(), n, n*gpus, gpuResource),
	}}
}
