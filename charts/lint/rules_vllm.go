package lint

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

// Thresholds of the vLLM rules.
const (
	// minStartupBudget is the least startup probe budget VL015 accepts on
	// a GPU server: loading (let alone downloading) an LLM's weights takes
	// minutes.
	minStartupBudget = 5 * time.Minute
	// minTensorParallelShm is the least /dev/shm sizeLimit VL012 accepts
	// with tensor parallelism: NCCL's shared memory segments alone take
	// tens of MiB per peer.
	minTensorParallelShm = "1Gi"
)

// hfTokenEnv are the environment variables Hugging Face libraries read a
// token from.
func hfTokenEnv() []string {
	return []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACEHUB_API_TOKEN"}
}

// vllmArgs are the vLLM flags of a container's command and args, by name
// without dashes and with "-" for "_"; ok is false when the container does
// not run vLLM (its image, command and args never say "vllm").
func vllmArgs(c container) (flags map[string]string, ok bool) {
	var args []string
	for _, field := range []string{"command", "args"} {
		items, _ := c.raw[field].([]any)
		for _, it := range items {
			if s, isString := it.(string); isString {
				args = append(args, s)
			}
		}
	}
	image, _ := c.raw["image"].(string)
	ok = strings.Contains(strings.ToLower(image), "vllm")
	for _, a := range args {
		ok = ok || strings.Contains(strings.ToLower(a), "vllm")
	}
	flags, _ = vllm.Args(args)
	return flags, ok
}

// flagInt returns an integer flag, def when unset; ok is false when set
// to something else than an integer.
func flagInt(flags map[string]string, name string, def int64) (int64, bool) {
	v, set := flags[name]
	if !set {
		return def, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// parallelism returns --tensor-parallel-size × --pipeline-parallel-size of
// a vLLM container and how it was written; ok is false when either is not
// an integer.
func parallelism(flags map[string]string) (workers, tp, pp int64, ok bool) {
	tp, okTP := flagInt(flags, "tensor-parallel-size", 1)
	pp, okPP := flagInt(flags, "pipeline-parallel-size", 1)
	return tp * pp, tp, pp, okTP && okPP
}

// vllmServer is a workload's (non-init) container that runs vLLM, with
// its flags.
type vllmServer struct {
	container container
	flags     map[string]string
}

// vllmServers returns the containers of w that run vLLM, init containers
// left out.
func vllmServers(w *workload) []vllmServer {
	var out []vllmServer
	for _, c := range w.containers {
		if flags, isVLLM := vllmArgs(c); isVLLM && !c.init {
			out = append(out, vllmServer{container: c, flags: flags})
		}
	}
	return out
}

// checkTensorParallelGPUs is VL011: a vLLM container's tensor-parallel
// size times its pipeline-parallel size must equal its GPUs.
func checkTensorParallelGPUs(w *workload, _ Options) []Finding {
	var out []Finding
	for _, srv := range vllmServers(w) {
		c, flags := srv.container, srv.flags
		workers, tp, pp, ok := parallelism(flags)
		if !ok || (c.gpuSet && c.gpu == 0) {
			continue // not integers: vLLM or VL001 says so
		}
		if _, multiNode := nodesOf(flags); multiNode {
			continue // the world size spans the group's pods: VL016's
		}
		if workers == c.gpu || (!c.gpuSet && workers <= 1) {
			continue
		}
		out = append(out, Finding{
			Field: c.path + ".args",
			Message: fmt.Sprintf("container %q runs --tensor-parallel-size %d × --pipeline-parallel-size %d = %d vLLM worker(s) with %d %s: vLLM needs one GPU per worker (fewer fail the start: \"World size is larger than the number of available GPUs\"), more sit idle; make them equal (in the built-in chart model.tensorParallelSize 0 follows resources.gpu)",
				c.name, tp, pp, workers, c.gpu, gpuResource),
		})
	}
	return out
}

// nodesOf returns --nnodes of a vLLM container (1 when unset) and
// whether it runs one engine across several pods: --nnodes set to other
// than 1 (an integer below 1 and a value that is not an integer, if not a
// $(VAR) reference filled in at run time, are VL016's findings too).
func nodesOf(flags map[string]string) (nodes int64, multiNode bool) {
	v, set := flags["nnodes"]
	if !set {
		return 1, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, true
	}
	return n, n != 1
}

// groupSize returns the number of pods of one engine group of a grouped
// workload, where written: a StatefulSet's spec.replicas (one StatefulSet
// per group), a LeaderWorkerSet's spec.leaderWorkerTemplate.size.
func groupSize(w *workload) (size int64, field string, ok bool) {
	var path []string
	switch w.kind {
	case "StatefulSet":
		path = []string{"spec", "replicas"}
	case "LeaderWorkerSet":
		path = []string{"spec", "leaderWorkerTemplate", "size"}
	default:
		return 0, "", false
	}
	v, found, _ := unstructured.NestedFieldNoCopy(w.obj.Object, path...)
	if !found {
		return 1, strings.Join(path, "."), true // both default to 1
	}
	switch x := v.(type) {
	case int64:
		return x, strings.Join(path, "."), true
	case float64:
		return int64(x), strings.Join(path, "."), true
	}
	return 0, "", false
}

// checkMultiNodeWorldSize is VL016: a vLLM engine spread over --nnodes
// pods (a multi-node group) has a world size, --tensor-parallel-size ×
// --pipeline-parallel-size, that must equal the GPUs of the whole group:
// --nnodes × the GPUs of one pod. The group's pod count must be --nnodes.
func checkMultiNodeWorldSize(w *workload, _ Options) []Finding {
	var out []Finding
	for _, srv := range vllmServers(w) {
		c, flags := srv.container, srv.flags
		raw := flags["nnodes"]
		nodes, multiNode := nodesOf(flags)
		if !multiNode {
			continue
		}
		if nodes < 1 {
			if strings.Contains(raw, "$(") {
				continue // filled in from the environment at run time
			}
			out = append(out, Finding{
				Field: c.path + ".args",
				Message: fmt.Sprintf("container %q: --nnodes %q is not a whole number of at least 1: it is the number of pods (nodes) one vLLM engine spans (built-in chart: multiNode.nodes, 1..64)",
					c.name, raw),
			})
			continue
		}
		workers, tp, pp, ok := parallelism(flags)
		if ok && c.gpuSet && c.gpu > 0 && workers != nodes*c.gpu {
			out = append(out, Finding{
				Field: c.path + ".args",
				Message: fmt.Sprintf("container %q runs one vLLM engine across --nnodes %d pods of %d %s each (%d GPUs) with --tensor-parallel-size %d × --pipeline-parallel-size %d = %d workers: vLLM's world size must equal the group's GPUs (fewer fail the start, more sit idle); make tensor × pipeline parallel size %d, e.g. tensor parallel %d (GPUs per pod) × pipeline parallel %d (nodes) (built-in chart: model.tensorParallelSize × --pipeline-parallel-size = multiNode.nodes × resources.gpu)",
					c.name, nodes, c.gpu, gpuResource, nodes*c.gpu, tp, pp, workers, nodes*c.gpu, max(c.gpu, 1), nodes),
			})
		}
		if size, field, known := groupSize(w); known && size != nodes {
			out = append(out, Finding{
				Field: field,
				Message: fmt.Sprintf("a group of %s %s has %d pod(s) but its container %q says --nnodes %d: the engine waits for pods that never come, or leaves some out; make them equal (built-in chart: multiNode.nodes sets both)",
					w.kind, w.obj.GetName(), size, c.name, nodes),
			})
		}
	}
	return out
}

// checkTensorParallelShm is VL012: tensor parallelism needs a
// memory-backed /dev/shm of a useful size, where NCCL puts its shared
// memory segments.
func checkTensorParallelShm(w *workload, _ Options) []Finding {
	var out []Finding
	for _, srv := range vllmServers(w) {
		c, flags := srv.container, srv.flags
		workers, tp, _, ok := parallelism(flags)
		if !ok || workers <= 1 {
			continue
		}
		mount, medium, size := w.shmOf(c)
		var problem string
		switch {
		case mount == "":
			problem = "mounts nothing at /dev/shm (the runtime's default is 64Mi)"
		case medium != "Memory":
			problem = fmt.Sprintf("mounts volume %q at /dev/shm, which is not an emptyDir with medium: Memory", mount)
		case size != nil && size.Cmp(resource.MustParse(minTensorParallelShm)) < 0:
			problem = fmt.Sprintf("limits its memory-backed /dev/shm to %s (less than %s)", size.String(), minTensorParallelShm)
		default:
			continue
		}
		out = append(out, Finding{
			Field: c.path + ".volumeMounts",
			Message: fmt.Sprintf("container %q runs --tensor-parallel-size %d but %s: NCCL creates its shared memory segments there and the start fails (\"Error while creating shared memory segment\", bus error); mount an emptyDir with medium: Memory and a sizeLimit of a few GiB (built-in chart: shm.enabled, shm.sizeLimit)",
				c.name, tp, problem),
		})
	}
	return out
}

// shmOf returns what container c mounts at /dev/shm: the volume's name,
// its emptyDir medium and sizeLimit.
func (w *workload) shmOf(c container) (mount, medium string, size *resource.Quantity) {
	mounts, _ := c.raw["volumeMounts"].([]any)
	for _, item := range mounts {
		m, _ := item.(map[string]any)
		if p, _ := m["mountPath"].(string); strings.TrimRight(p, "/") == "/dev/shm" {
			mount, _ = m["name"].(string)
		}
	}
	if mount == "" {
		return "", "", nil
	}
	items, _ := w.spec["volumes"].([]any)
	for _, item := range items {
		v, _ := item.(map[string]any)
		if name, _ := v["name"].(string); name != mount {
			continue
		}
		ed, isEmptyDir := v["emptyDir"].(map[string]any)
		if !isEmptyDir {
			return mount, "", nil
		}
		medium, _ = ed["medium"].(string)
		if raw, set := ed["sizeLimit"]; set {
			if q, err := parseQuantity(raw); err == nil {
				size = &q
			}
		}
	}
	return mount, medium, size
}

// checkGPUMemoryUtilization is VL013: --gpu-memory-utilization is the
// share of the GPU's memory vLLM may take, in (0, 1].
func checkGPUMemoryUtilization(w *workload, _ Options) []Finding {
	var out []Finding
	for _, c := range w.containers {
		flags, isVLLM := vllmArgs(c)
		v, set := flags["gpu-memory-utilization"]
		if !isVLLM || !set {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err == nil && f > 0 && f <= 1 {
			continue
		}
		out = append(out, Finding{
			Field: c.path + ".args",
			Message: fmt.Sprintf("container %q: --gpu-memory-utilization %q is not a fraction in (0, 1]: it is the share of each GPU's memory vLLM takes for weights, activations and KV cache (0.9 by default; built-in chart: model.gpuMemoryUtilization)",
				c.name, v),
		})
	}
	return out
}

// checkHFTokenSecret is VL014: a Hugging Face token comes from a Secret
// (secretKeyRef), never as a literal value in the manifest, which the
// release record stores and anyone who can read the Deployment sees.
func checkHFTokenSecret(w *workload, _ Options) []Finding {
	var out []Finding
	for _, c := range w.containers {
		env, _ := c.raw["env"].([]any)
		for i, item := range env {
			e, _ := item.(map[string]any)
			name, _ := e["name"].(string)
			if !slices.Contains(hfTokenEnv(), name) {
				continue
			}
			from, _ := e["valueFrom"].(map[string]any)
			if _, fromSecret := from["secretKeyRef"]; fromSecret {
				continue
			}
			where := "a literal value"
			if _, fromConfigMap := from["configMapKeyRef"]; fromConfigMap {
				where = "a ConfigMap"
			} else if v, _ := e["value"].(string); v == "" {
				continue
			}
			out = append(out, Finding{
				Field: fmt.Sprintf("%s.env[%d]", c.path, i),
				Message: fmt.Sprintf("container %q takes the Hugging Face token %s from %s: the manifest (and the release record that stores it) then holds the secret; take it from a Secret with valueFrom.secretKeyRef (built-in chart: hfToken.secretName)",
					c.name, name, where),
			})
		}
	}
	return out
}

// checkStartupBudget is VL015: a GPU server's startup probe must give
// the weights a few minutes to load before the kubelet kills the
// container.
func checkStartupBudget(w *workload, _ Options) []Finding {
	var out []Finding
	for _, c := range w.servers() {
		probe, ok := c.raw["startupProbe"].(map[string]any)
		if !c.gpuSet || !ok {
			continue
		}
		period, threshold, delay := probeInt(probe, "periodSeconds", 10), probeInt(probe, "failureThreshold", 3), probeInt(probe, "initialDelaySeconds", 0)
		budget := time.Duration(delay+threshold*period) * time.Second
		if budget >= minStartupBudget {
			continue
		}
		out = append(out, Finding{
			Field: c.path + ".startupProbe",
			Message: fmt.Sprintf("container %q: its startupProbe lets it start for %s (failureThreshold %d × periodSeconds %d + initialDelaySeconds %d) before the kubelet kills and restarts it, too short to load an LLM's weights: allow at least %s (built-in chart: probes.startup.failureThreshold)",
				c.name, budget, threshold, period, delay, minStartupBudget),
		})
	}
	return out
}

// probeInt returns an integer field of a probe, def when unset or zero.
func probeInt(probe map[string]any, name string, def int64) int64 {
	switch v := probe[name].(type) {
	case int64:
		if v > 0 {
			return v
		}
	case float64:
		if v > 0 {
			return int64(v)
		}
	}
	return def
}
