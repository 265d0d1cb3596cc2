package lint

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

// gpuResource is the GPU resource's name as a key of a container's
// resources map.
const gpuResource = string(vllm.GPUResource)

// workload is an object with a pod template, as the rules see it.
type workload struct {
	obj       *unstructured.Unstructured
	kind      string
	namespace string // effective namespace: the object's, else Options.Namespace
	display   string // "Kind namespace/name"
	// specPath is the JSON path of the pod spec inside the object, e.g.
	// "spec.template.spec" (or "spec" for a Pod).
	specPath string
	// templatePath is the JSON path of the pod template ("" for a Pod).
	templatePath string
	spec         map[string]any
	// templateLabels are the pod template's labels.
	templateLabels map[string]string
	containers     []container // init containers first, then containers
}

// container is one (init) container of a pod spec.
type container struct {
	path string // JSON path, e.g. spec.template.spec.containers[0]
	name string
	init bool
	raw  map[string]any
	// gpu is the container's nvidia.com/gpu limit (else request) when it
	// parses; gpuSet tells whether either is set to a non-zero value.
	gpu    int64
	gpuSet bool
}

// newWorkload returns the workload view of obj, or nil when obj has no pod
// template.
func newWorkload(obj *unstructured.Unstructured, opts Options) *workload {
	if obj == nil {
		return nil
	}
	kind := obj.GetKind()
	var templatePath []string
	switch kind {
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet":
		templatePath = []string{"spec", "template"}
	case "LeaderWorkerSet":
		// The worker template: the leader's (optional) differs in its
		// command and probes, not in what the rules check.
		templatePath = []string{"spec", "leaderWorkerTemplate", "workerTemplate"}
	case "Pod":
	default:
		return nil
	}
	specFields := append(slicesClone(templatePath), "spec")
	spec, found, err := unstructured.NestedMap(obj.Object, specFields...)
	if err != nil || !found {
		spec = map[string]any{}
	}
	w := &workload{
		obj:          obj,
		kind:         kind,
		namespace:    obj.GetNamespace(),
		specPath:     strings.Join(specFields, "."),
		templatePath: strings.Join(templatePath, "."),
		spec:         spec,
	}
	if w.namespace == "" {
		w.namespace = opts.Namespace
	}
	if w.namespace != "" {
		w.display = fmt.Sprintf("%s %s/%s", kind, w.namespace, obj.GetName())
	} else {
		w.display = fmt.Sprintf("%s %s", kind, obj.GetName())
	}
	if kind == "Pod" {
		w.templateLabels = obj.GetLabels()
	} else {
		labels, _, _ := unstructured.NestedStringMap(obj.Object, append(slicesClone(templatePath), "metadata", "labels")...)
		w.templateLabels = labels
	}
	w.containers = containersOf(spec, w.specPath)
	return w
}

// containersOf returns the (init) containers of the pod spec at specPath,
// init containers first.
func containersOf(spec map[string]any, specPath string) []container {
	var out []container
	for _, list := range []struct {
		field string
		init  bool
	}{{"initContainers", true}, {"containers", false}} {
		items, _ := spec[list.field].([]any)
		for i, item := range items {
			raw, ok := item.(map[string]any)
			if !ok {
				continue
			}
			c := container{
				path: fmt.Sprintf("%s.%s[%d]", specPath, list.field, i),
				init: list.init,
				raw:  raw,
			}
			c.name, _ = raw["name"].(string)
			c.gpu, c.gpuSet = containerGPUs(raw)
			out = append(out, c)
		}
	}
	return out
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// gpuPod reports whether any container asks for GPUs.
func (w *workload) gpuPod() bool {
	for _, c := range w.containers {
		if c.gpuSet {
			return true
		}
	}
	return false
}

// gpusPerPod sums the GPUs of the regular containers.
func (w *workload) gpusPerPod() int64 {
	var n int64
	for _, c := range w.containers {
		if !c.init {
			n += c.gpu
		}
	}
	return n
}

// servers returns the server containers: the regular containers asking for
// GPUs, or the first regular container of a pod without GPUs.
func (w *workload) servers() []container {
	var gpu, regular []container
	for _, c := range w.containers {
		if c.init {
			continue
		}
		regular = append(regular, c)
		if c.gpuSet {
			gpu = append(gpu, c)
		}
	}
	if len(gpu) > 0 {
		return gpu
	}
	if len(regular) > 0 {
		return regular[:1]
	}
	return nil
}

// resourceValue returns resources.<section>.<name> of a container as it was
// written, and whether it is set.
func resourceValue(raw map[string]any, section, name string) (any, bool) {
	res, _ := raw["resources"].(map[string]any)
	sec, _ := res[section].(map[string]any)
	v, ok := sec[name]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

// parseQuantity parses a quantity as found in unstructured content (a
// string, an integer or a float).
func parseQuantity(v any) (resource.Quantity, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case int64, int32, int, float64, float32:
		s = fmt.Sprint(x)
	default:
		return resource.Quantity{}, fmt.Errorf("unexpected %T", v)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("parse quantity %q: %w", s, err)
	}
	return q, nil
}

// containerGPUs returns the container's GPU count (the limit, else the
// request, 0 when it does not parse as a whole number) and whether a
// non-zero GPU value is set at all.
func containerGPUs(raw map[string]any) (int64, bool) {
	set := false
	var n int64
	for _, section := range []string{"requests", "limits"} {
		v, ok := resourceValue(raw, section, gpuResource)
		if !ok {
			continue
		}
		q, err := parseQuantity(v)
		if err != nil || !q.IsZero() {
			set = true
		}
		if err == nil && q.MilliValue()%1000 == 0 && (section == "limits" || n == 0) {
			n = q.Value()
		}
	}
	return n, set
}

// formatValue renders a raw value for a message.
func formatValue(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}
