// The hints of the cause classifier: for each cause, the settings to
// change, named as vLLM flags and as the built-in chart's values, with the
// values the pod runs with.

package vllmcause

import (
	"fmt"
	"strconv"
	"strings"
)

// Where the built-in chart (charts/vllm) sets what the hints name.
const (
	valGMU         = "model.gpuMemoryUtilization"
	valMaxModelLen = "model.maxModelLen"
	valTP          = "model.tensorParallelSize"
	valGPU         = "resources.gpu"
	valModel       = "model.name"
	valExtraArgs   = "extraArgs"
)

// setting names a setting for a hint: "`--gpu-memory-utilization`
// (model.gpuMemoryUtilization, now 0.95)".
func setting(name, value, now string) string {
	if now == "" {
		return fmt.Sprintf("`%s` (%s)", name, value)
	}
	return fmt.Sprintf("`%s` (%s, %s)", name, value, now)
}

// moreGPUs is the GPU count a hint suggests to shard the weights over:
// twice what the container has (2 without GPUs).
func (s *serverSpec) moreGPUs() int64 {
	n := max(s.gpus, s.tensorParallel()*s.pipelineParallel(), 1)
	return 2 * n
}

// shardHint suggests more GPUs with a matching tensor-parallel size.
func shardHint(s *serverSpec, why string) string {
	n := s.moreGPUs()
	return fmt.Sprintf("or %s: raise `gpu` to %d (%s, %s) and `--tensor-parallel-size` to %d (%s, %s; 0 follows %s)",
		why, n, valGPU, s.gpuNow(), n, valTP, s.now("tensor-parallel-size", "now 1"), valGPU)
}

func gpuOOMHints(s *serverSpec, m causeMatch) []string {
	gmu := setting("--gpu-memory-utilization", valGMU, s.now("gpu-memory-utilization", "not set: 0.9"))
	if m.group("free") != "" {
		return []string{
			fmt.Sprintf("another process holds memory on this GPU, so vLLM cannot take the share it asks for: lower %s below the free share the error names, or keep other pods off the GPU (no time-slicing or MIG sharing)", gmu),
			shardHint(s, "spread the model over more GPUs"),
		}
	}
	return []string{
		fmt.Sprintf("lower %s or %s so the weights, activations and KV cache fit the GPU",
			gmu, setting("--max-model-len", valMaxModelLen, s.now("max-model-len", "not set: the model's full context"))),
		shardHint(s, "shard the weights over more GPUs"),
		fmt.Sprintf("CUDA graphs take GPU memory too: `--enforce-eager` in %s skips them, a lower `--max-num-seqs` (%s, %s) shrinks them; a quantized checkpoint (%s, %s) shrinks the weights",
			valExtraArgs, valExtraArgs, s.now("max-num-seqs", "not set: 256 or 1024"), valModel, s.modelNow()),
	}
}

func kvCacheHints(s *serverSpec, m causeMatch) []string {
	maxLen := setting("--max-model-len", valMaxModelLen, s.now("max-model-len", "not set: the model's full context"))
	first := fmt.Sprintf("lower %s to what the memory left for the KV cache holds", maxLen)
	if n := m.group("maxlen"); n != "" {
		first = fmt.Sprintf("lower %s to at most %s, the longest vLLM estimated the memory left for the KV cache holds", maxLen, n)
	}
	return []string{
		first,
		fmt.Sprintf("or give the KV cache more memory: raise %s toward 0.95, %s",
			setting("--gpu-memory-utilization", valGMU, s.now("gpu-memory-utilization", "not set: 0.9")), shardHint(s, "add GPUs")),
		fmt.Sprintf("`--kv-cache-dtype fp8` in %s halves the KV cache of each token", valExtraArgs),
	}
}

func modelAuthHints(s *serverSpec, _ causeMatch) []string {
	model := s.modelOr("the model")
	var out []string
	switch {
	case s.token == "":
		out = append(out, fmt.Sprintf("the container has no Hugging Face token (no HF_TOKEN in its env): put a token that can read %s in a Secret (kubectl create secret generic hf-token --from-literal=token=hf_...) and set hfToken.secretName to its name", model))
	case s.token == "literal":
		out = append(out, fmt.Sprintf("%s is a literal value in the pod spec, so in the manifest and the release record: put the token in a Secret referenced by hfToken.secretName, and check it is valid and can read %s", s.tokenEnv, model))
	default:
		out = append(out, fmt.Sprintf("Hugging Face refused the token in %s (from %s, hfToken.secretName): check it is valid (not revoked or expired) and can read %s", s.tokenEnv, s.token, model))
	}
	if s.repoID() {
		out = append(out, fmt.Sprintf("a gated model needs its license accepted by the token's account on https://huggingface.co/%s (approval can take a while)", s.model))
	}
	return out
}

func modelNotFoundHints(s *serverSpec, _ causeMatch) []string {
	var out []string
	switch {
	case s.repoID():
		out = append(out, fmt.Sprintf("`--model` is %s (%s): check the repository id's spelling and that https://huggingface.co/%s exists (and --revision, if set)", s.model, valModel, s.model))
		if s.token == "" {
			out = append(out, fmt.Sprintf("Hugging Face answers \"not found\" for a private repository when no token is sent: if %s is private, set hfToken.secretName to a Secret holding a token that can read it", s.model))
		}
	case s.model != "":
		out = append(out, fmt.Sprintf("`--model` is the local path %s (%s): it must hold config.json inside the container: check the volume mounted there (modelCache.mountPath) and that the weights were copied (weightsFetcher)", s.model, valModel))
	default:
		out = append(out, fmt.Sprintf("check `--model` (%s): a Hugging Face repository id that exists, or a local directory holding config.json", valModel))
	}
	if s.offline {
		out = append(out, "HF_HUB_OFFLINE is set in env: the weights must already be in the cache (modelCache.persistence.enabled, or a weightsFetcher)")
	}
	return out
}

func shmHints(s *serverSpec, _ causeMatch) []string {
	var first string
	switch {
	case s.shmMount == "":
		first = "nothing is mounted at /dev/shm, so the container runtime's 64Mi default applies: set shm.enabled to mount an emptyDir with medium: Memory at /dev/shm, sized by shm.sizeLimit"
	case !s.shmMemory:
		first = fmt.Sprintf("volume %s mounted at /dev/shm is not an emptyDir with medium: Memory: use shm.enabled (and shm.sizeLimit) instead", s.shmMount)
	case s.shmSize != "":
		first = fmt.Sprintf("raise shm.sizeLimit (now %s): vLLM's workers and NCCL exchange tensors through /dev/shm", s.shmSize)
	default:
		first = "the memory-backed /dev/shm has no sizeLimit, so the container's memory limit bounds it"
	}
	out := []string{first}
	if s.memoryLimit != "" {
		out = append(out, fmt.Sprintf("/dev/shm counts against the container's memory limit (resources.limits.memory, now %s): raise it with shm.sizeLimit", s.memoryLimit))
	}
	if tp := s.tensorParallel(); tp > 1 {
		out = append(out, fmt.Sprintf("with `--tensor-parallel-size` %d every worker needs NCCL buffers in /dev/shm: size it for all of them", tp))
	}
	return out
}

func ncclHints(s *serverSpec, _ causeMatch) []string {
	shm := "nothing is mounted at /dev/shm (shm.enabled)"
	if s.shmMount != "" {
		shm = "shm.sizeLimit, " + orDefault(s.shmSize, "no limit")
	}
	return []string{
		fmt.Sprintf("NCCL failed between the tensor-parallel workers (%s; `gpu` %s, %s): add NCCL_DEBUG=INFO to env to see which transport failed",
			setting("--tensor-parallel-size", valTP, s.now("tensor-parallel-size", "now 1")), s.gpuNow(), valGPU),
		fmt.Sprintf("peer-to-peer access between the GPUs may be unsupported on this node (no NVLink, IOMMU or ACS on): set NCCL_P2P_DISABLE=1 in env, or add `--disable-custom-all-reduce` to %s", valExtraArgs),
		fmt.Sprintf("NCCL also needs room in /dev/shm (%s)", shm),
	}
}

func dtypeHints(s *serverSpec, m causeMatch) []string {
	gpu := "the GPU"
	if name := m.group("gpu"); name != "" {
		gpu = fmt.Sprintf("the %s GPU (compute capability %s)", strings.Trim(name, "b'\""), m.group("cc"))
	}
	fix := fmt.Sprintf("add `--dtype=half` to %s", valExtraArgs)
	if d, ok := s.flags["dtype"]; ok && d != "" {
		fix = fmt.Sprintf("replace `--dtype` (%s, now %s) with `--dtype=half`", valExtraArgs, d)
	}
	return []string{
		fmt.Sprintf("%s: %s cannot run bfloat16, which needs compute capability 8.0 (Ampere) or newer", fix, gpu),
		"or run the pods on Ampere or newer GPUs: nodeSelector (for example nvidia.com/gpu.product, from GPU feature discovery)",
	}
}

func tensorParallelHints(s *serverSpec, m causeMatch) []string {
	tp := setting("--tensor-parallel-size", valTP, s.now("tensor-parallel-size", "now 1"))
	switch {
	case m.group("heads") != "":
		heads, _ := strconv.Atoi(m.group("heads"))
		return []string{fmt.Sprintf("%s must divide the model's %d attention heads: use %s, and set `gpu` (%s, %s) to the same number",
			tp, heads, divisors(heads), valGPU, s.gpuNow())}
	case m.group("world") != "" && m.group("gpus") != "":
		return []string{fmt.Sprintf("%s × `--pipeline-parallel-size` needs %s GPUs but the container sees %s (`gpu`, %s, %s): make them equal (%s 0 follows %s)",
			tp, m.group("world"), m.group("gpus"), valGPU, s.gpuNow(), valTP, valGPU)}
	}
	return []string{fmt.Sprintf("%s × `--pipeline-parallel-size` must equal the container's GPUs (`gpu`, %s, %s) and divide the model's attention heads", tp, valGPU, s.gpuNow())}
}

func gpuNotVisibleHints(s *serverSpec, _ causeMatch) []string {
	if !s.gpuSet {
		return []string{fmt.Sprintf("the container requests no nvidia.com/gpu, so no GPU is mounted into it: set `gpu` (%s) to 1 or more", valGPU)}
	}
	return []string{
		fmt.Sprintf("the container requests %d nvidia.com/gpu but sees none: check the node's NVIDIA device plugin (or GPU operator) and container runtime, and runtimeClassName: nvidia where the cluster needs it", s.gpus),
		"env must not override NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES",
	}
}

func cudaDriverHints(s *serverSpec, _ causeMatch) []string {
	image := "the image"
	if s.image != "" {
		image = "image " + s.image
	}
	return []string{
		fmt.Sprintf("the GPU node's NVIDIA driver is older than the CUDA %s was built with: use an image tag built for the nodes' driver (image.tag) or upgrade the driver on the GPU nodes", image),
		"or run the pods on nodes with a newer driver: nodeSelector (for example nvidia.com/cuda.driver.major, from GPU feature discovery)",
	}
}

func startupProbeHints(s *serverSpec, _ causeMatch) []string {
	load := "keep the weights on a PersistentVolumeClaim (modelCache.persistence.enabled) or fetch them in an initContainer (weightsFetcher.enabled), so a restarted pod does not download them again"
	if s.startup == nil {
		return []string{"the startup probe killed the container while it was still loading: raise probes.startup.failureThreshold so its budget covers downloading and loading the weights", load}
	}
	p := s.startup
	target := ""
	if t := probeTarget(p); t != "" {
		target = " (" + t + ")"
	}
	return []string{
		fmt.Sprintf("the startup probe%s killed the container after its budget of %s while it was still loading: raise probes.startup.failureThreshold (now %d) or probes.startup.periodSeconds (now %d) so the budget covers downloading and loading the weights",
			target, describeStartupBudget(p), p.FailureThreshold, p.PeriodSeconds),
		"shorten the load: " + load,
		"raise --timeout above the new budget, or vllmctl gives up before the probe does",
	}
}

// modelOr is the model, or def when unknown.
func (s *serverSpec) modelOr(def string) string {
	if s.model == "" {
		return def
	}
	return s.model
}

// modelNow quotes the model for a hint.
func (s *serverSpec) modelNow() string {
	if s.model == "" {
		return "not set"
	}
	return "now " + s.model
}

// repoID reports whether the model looks like a Hugging Face repository
// id ("org/name"), not a local path.
func (s *serverSpec) repoID() bool {
	return strings.Count(s.model, "/") == 1 && !strings.HasPrefix(s.model, "/") && !strings.HasPrefix(s.model, ".")
}

// divisors lists the tensor-parallel sizes up to 8 that divide heads:
// "1, 2, 4 or 8".
func divisors(heads int) string {
	var ds []string
	for _, d := range []int{1, 2, 4, 8} {
		if heads > 0 && heads%d == 0 {
			ds = append(ds, strconv.Itoa(d))
		}
	}
	if len(ds) <= 1 {
		return "1"
	}
	return strings.Join(ds[:len(ds)-1], ", ") + " or " + ds[len(ds)-1]
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
