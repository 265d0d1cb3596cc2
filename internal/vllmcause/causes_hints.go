// The hints of the cause classifier: for each cause, the settings to
// change, named as vLLM flags with the values the pod runs with, and as
// the chart's values where the chart maps them (causes_values.go).

package vllmcause

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

// moreGPUs is the GPU count a hint suggests to shard the weights over:
// twice what the container has (2 without GPUs).
func (s *serverSpec) moreGPUs() int64 {
	n := max(s.gpus, s.tensorParallel()*s.pipelineParallel(), 1)
	return 2 * n
}

// shardHint suggests more GPUs with a matching tensor-parallel size.
func shardHint(s *serverSpec, why string) string {
	n := s.moreGPUs()
	gpu := paren(fmt.Sprintf("the container's `nvidia.com/gpu` to %d", n), "", s.gpuNow())
	if p := s.values.Path(vllm.SettingGPU); p != "" {
		gpu = paren(fmt.Sprintf("`gpu` to %d", n), p, s.gpuNow())
	}
	return fmt.Sprintf("or %s: raise %s and %s", why, gpu,
		paren(fmt.Sprintf("`--tensor-parallel-size` to %d", n), s.valuesPath(vllm.SettingTensorParallelSize), s.now("tensor-parallel-size", "now 1")))
}

func gpuOOMHints(s *serverSpec, m causeMatch) []string {
	gmu := s.flagSetting("gpu-memory-utilization", "not set: 0.9")
	if m.group("free") != "" {
		return []string{
			fmt.Sprintf("another process holds memory on this GPU, so vLLM cannot take the share it asks for: lower %s below the free share the error names, or keep other pods off the GPU (no time-slicing or MIG sharing)", gmu),
			shardHint(s, "spread the model over more GPUs"),
		}
	}
	return []string{
		fmt.Sprintf("lower %s or %s so the weights, activations and KV cache fit the GPU",
			gmu, s.flagSetting("max-model-len", "not set: the model's full context")),
		shardHint(s, "shard the weights over more GPUs"),
		fmt.Sprintf("CUDA graphs take GPU memory too: `--enforce-eager` added %s skips them, a lower %s shrinks them; %s shrinks the weights",
			s.addFlag(), s.flagSetting("max-num-seqs", "not set: 256 or 1024"), paren("a quantized checkpoint", s.values.Path(vllm.SettingModel), s.modelNow())),
	}
}

func kvCacheHints(s *serverSpec, m causeMatch) []string {
	maxLen := s.flagSetting("max-model-len", "not set: the model's full context")
	first := fmt.Sprintf("lower %s to what the memory left for the KV cache holds", maxLen)
	if n := m.group("maxlen"); n != "" {
		first = fmt.Sprintf("lower %s to at most %s, the longest vLLM estimated the memory left for the KV cache holds", maxLen, n)
	}
	return []string{
		first,
		fmt.Sprintf("or give the KV cache more memory: raise %s toward 0.95, %s",
			s.flagSetting("gpu-memory-utilization", "not set: 0.9"), shardHint(s, "add GPUs")),
		fmt.Sprintf("`--kv-cache-dtype fp8` added %s halves the KV cache of each token", s.addFlag()),
	}
}

func modelAuthHints(s *serverSpec, _ causeMatch) []string {
	model := s.modelOr("the model")
	secret := s.values.Path(vllm.SettingHFTokenSecret)
	var out []string
	switch {
	case s.token == "" && secret != "":
		out = append(out, fmt.Sprintf("the container has no Hugging Face token (no HF_TOKEN in its env): put a token that can read %s in a Secret (kubectl create secret generic hf-token --from-literal=token=hf_...) and set %s to its name", model, secret))
	case s.token == "":
		out = append(out, fmt.Sprintf("the container has no Hugging Face token (no HF_TOKEN in its env): put a token that can read %s in a Secret (kubectl create secret generic hf-token --from-literal=token=hf_...) and give it to the container as HF_TOKEN (env valueFrom.secretKeyRef)", model))
	case s.token == "literal":
		ref := "an env valueFrom.secretKeyRef"
		if secret != "" {
			ref = secret
		}
		out = append(out, fmt.Sprintf("%s is a literal value in the pod spec, so in the manifest and the release record: put the token in a Secret referenced by %s, and check it is valid and can read %s", s.tokenEnv, ref, model))
	default:
		out = append(out, fmt.Sprintf("Hugging Face refused the token in %s (from %s): check it is valid (not revoked or expired) and can read %s", s.tokenEnv, strings.TrimSuffix(s.token+", "+secret, ", "), model))
	}
	if s.repoID() {
		out = append(out, fmt.Sprintf("a gated model needs its license accepted by the token's account on https://huggingface.co/%s (approval can take a while)", s.model))
	}
	return out
}

func modelNotFoundHints(s *serverSpec, _ causeMatch) []string {
	var out []string
	modelPath := s.values.Path(vllm.SettingModel)
	switch {
	case s.repoID():
		out = append(out, fmt.Sprintf("%s: check the repository id's spelling and that https://huggingface.co/%s exists (and --revision, if set)", paren("`--model` is "+s.model, modelPath, ""), s.model))
		if s.token == "" {
			give := "give the container a token that can read it as HF_TOKEN from a Secret"
			if p := s.values.Path(vllm.SettingHFTokenSecret); p != "" {
				give = "set " + p + " to a Secret holding a token that can read it"
			}
			out = append(out, fmt.Sprintf("Hugging Face answers \"not found\" for a private repository when no token is sent: if %s is private, %s", s.model, give))
		}
	case s.model != "":
		out = append(out, fmt.Sprintf("%s: it must hold config.json inside the container: check the volume mounted there%s and that the weights were copied%s",
			paren("`--model` is the local path "+s.model, modelPath, ""), s.via(vllm.SettingModelCacheMountPath), s.via(vllm.SettingWeightsFetcher)))
	default:
		out = append(out, fmt.Sprintf("check %s: a Hugging Face repository id that exists, or a local directory holding config.json", paren("`--model`", modelPath, "")))
	}
	if s.offline {
		out = append(out, fmt.Sprintf("HF_HUB_OFFLINE is set in env: the weights must already be in the cache (a persistent volume%s, or fetched by an init container%s)",
			s.via(vllm.SettingModelCachePersistence), s.via(vllm.SettingWeightsFetcher)))
	}
	return out
}

func shmHints(s *serverSpec, _ causeMatch) []string {
	shmPath, sizePath := s.values.Path(vllm.SettingShm), s.values.Path(vllm.SettingShmSizeLimit)
	sizeLimit := "its sizeLimit"
	if sizePath != "" {
		sizeLimit = sizePath
	}
	var first string
	switch {
	case s.shmMount == "" && shmPath != "":
		first = fmt.Sprintf("nothing is mounted at /dev/shm, so the container runtime's 64Mi default applies: set %s to mount an emptyDir with medium: Memory at /dev/shm, sized by %s", shmPath, sizeLimit)
	case s.shmMount == "":
		first = fmt.Sprintf("nothing is mounted at /dev/shm, so the container runtime's 64Mi default applies: mount an emptyDir with medium: Memory at /dev/shm, sized by %s", sizeLimit)
	case !s.shmMemory:
		first = fmt.Sprintf("volume %s mounted at /dev/shm is not an emptyDir with medium: Memory: make it one%s", s.shmMount, s.via(vllm.SettingShm))
	case s.shmSize != "" && sizePath != "":
		first = fmt.Sprintf("raise %s (now %s): vLLM's workers and NCCL exchange tensors through /dev/shm", sizePath, s.shmSize)
	case s.shmSize != "":
		first = fmt.Sprintf("raise the sizeLimit of the emptyDir at /dev/shm (volume %s, now %s): vLLM's workers and NCCL exchange tensors through /dev/shm", s.shmMount, s.shmSize)
	default:
		first = "the memory-backed /dev/shm has no sizeLimit, so the container's memory limit bounds it"
	}
	out := []string{first}
	if s.memoryLimit != "" {
		out = append(out, fmt.Sprintf("/dev/shm counts against the container's memory limit (resources.limits.memory, now %s): raise it with %s", s.memoryLimit, sizeLimit))
	}
	if tp := s.tensorParallel(); tp > 1 {
		out = append(out, fmt.Sprintf("with `--tensor-parallel-size` %d every worker needs NCCL buffers in /dev/shm: size it for all of them", tp))
	}
	return out
}

func ncclHints(s *serverSpec, _ causeMatch) []string {
	shm := "nothing is mounted at /dev/shm" + s.via(vllm.SettingShm)
	if s.shmMount != "" {
		shm = orDefault(s.values.Path(vllm.SettingShmSizeLimit), "its sizeLimit") + ", " + orDefault(s.shmSize, "no limit")
	}
	return []string{
		fmt.Sprintf("NCCL failed between the tensor-parallel workers (%s; %s): add NCCL_DEBUG=INFO to env to see which transport failed",
			s.flagSetting("tensor-parallel-size", "now 1"), s.gpuSetting()),
		fmt.Sprintf("peer-to-peer access between the GPUs may be unsupported on this node (no NVLink, IOMMU or ACS on): set NCCL_P2P_DISABLE=1 in env, or add `--disable-custom-all-reduce` %s", s.addFlag()),
		fmt.Sprintf("NCCL also needs room in /dev/shm (%s)", shm),
	}
}

func dtypeHints(s *serverSpec, m causeMatch) []string {
	gpu := "the GPU"
	if name := m.group("gpu"); name != "" {
		gpu = fmt.Sprintf("the %s GPU (compute capability %s)", strings.Trim(name, "b'\""), m.group("cc"))
	}
	fix := fmt.Sprintf("add `--dtype=half` %s", s.addFlag())
	if d, ok := s.flags["dtype"]; ok && d != "" {
		fix = fmt.Sprintf("replace %s with `--dtype=half`", paren("`--dtype`", s.valuesPath(vllm.SettingDtype), "now "+d))
	}
	return []string{
		fmt.Sprintf("%s: %s cannot run bfloat16, which needs compute capability 8.0 (Ampere) or newer", fix, gpu),
		"or run the pods on Ampere or newer GPUs: nodeSelector (for example nvidia.com/gpu.product, from GPU feature discovery)",
	}
}

func tensorParallelHints(s *serverSpec, m causeMatch) []string {
	tp := s.flagSetting("tensor-parallel-size", "now 1")
	switch {
	case m.group("heads") != "":
		heads, _ := strconv.Atoi(m.group("heads"))
		return []string{fmt.Sprintf("%s must divide the model's %d attention heads: use %s, and set %s to the same number",
			tp, heads, divisors(heads), s.gpuSetting())}
	case m.group("world") != "" && m.group("gpus") != "":
		return []string{fmt.Sprintf("%s × `--pipeline-parallel-size` needs %s GPUs but the container sees %s: set %s to match, or lower the parallel sizes",
			tp, m.group("world"), m.group("gpus"), s.gpuSetting())}
	}
	return []string{fmt.Sprintf("%s × `--pipeline-parallel-size` must equal the container's GPUs (%s) and divide the model's attention heads", tp, s.gpuSetting())}
}

func gpuNotVisibleHints(s *serverSpec, _ causeMatch) []string {
	if !s.gpuSet {
		return []string{fmt.Sprintf("the container requests no nvidia.com/gpu, so no GPU is mounted into it: set %s to 1 or more", s.gpuName())}
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
		fmt.Sprintf("the GPU node's NVIDIA driver is older than the CUDA %s was built with: use an image tag built for the nodes' driver%s or upgrade the driver on the GPU nodes", image, s.via(vllm.SettingImageTag)),
		"or run the pods on nodes with a newer driver: nodeSelector (for example nvidia.com/cuda.driver.major, from GPU feature discovery)",
	}
}

func startupProbeHints(s *serverSpec, _ causeMatch) []string {
	load := fmt.Sprintf("keep the weights on a PersistentVolumeClaim%s or fetch them in an initContainer%s, so a restarted pod does not download them again",
		s.via(vllm.SettingModelCachePersistence), s.via(vllm.SettingWeightsFetcher))
	threshold := orDefault(s.values.Path(vllm.SettingStartupFailureThreshold), "the startup probe's failureThreshold")
	period := orDefault(s.values.Path(vllm.SettingStartupPeriodSeconds), "its periodSeconds")
	if s.startup == nil {
		return []string{fmt.Sprintf("the startup probe killed the container while it was still loading: raise %s so its budget covers downloading and loading the weights", threshold), load}
	}
	p := s.startup
	target := ""
	if t := probeTarget(p); t != "" {
		target = " (" + t + ")"
	}
	return []string{
		fmt.Sprintf("the startup probe%s killed the container after its budget of %s while it was still loading: raise %s (now %d) or %s (now %d) so the budget covers downloading and loading the weights",
			target, describeStartupBudget(p), threshold, p.FailureThreshold, period, p.PeriodSeconds),
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
