// The cause classifier's patterns, each with its provenance: the place in
// vLLM, or in a library whose error vLLM surfaces (transformers,
// huggingface_hub, torch, the CUDA runtime, NCCL, Ray, the kubelet), where
// the message it matches is raised or logged, at the releases read; or,
// for the few no such place was found for, the corpus logs it was written
// for. docs/vllm-causes.md is this table (a test keeps the two equal), and
// the real-log test scores the corpus leaving each source's log-only
// patterns out.

package vllmcause

import (
	"regexp"
	"strings"
)

// causePattern is one message pattern of a rule.
type causePattern struct {
	// rule is the rule the pattern belongs to: a cause ("kv-cache"), or a
	// cause and a variant ("nccl/p2p", "cuda-driver/event",
	// "shm/termination").
	rule string
	// re is the regular expression, as matched (on the message of an
	// error line, an event, or a termination's description). Named groups
	// feed the hints: heads, tp, world, gpus, maxlen, gpu, cc, free.
	re string
	// where is the source file and releases where the message is raised
	// or logged ("vllm/worker/worker.py@v0.4.0,v0.6.0"); "" when none was
	// found.
	where string
	// lib is the library that raises it, "" for vLLM.
	lib string
	// logs are the corpus logs (testdata/reallogs) the pattern was written
	// for, when where is "": the only provenance such a pattern has.
	logs []string
}

// kind is where the pattern is matched: "log", "event" or "termination".
func (p causePattern) kind() string {
	_, variant, _ := strings.Cut(p.rule, "/")
	switch variant {
	case "event", "termination":
		return variant
	}
	return "log"
}

// cause is the cause of the pattern's rule.
func (p causePattern) cause() Cause {
	c, _, _ := strings.Cut(p.rule, "/")
	return Cause(c)
}

// Libraries whose messages the classifier matches.
const (
	libTorch       = "torch"
	libCUDA        = "CUDA runtime (through torch)"
	libNCCL        = "NCCL"
	libHub         = "huggingface_hub"
	libHubServer   = "Hugging Face Hub API (through huggingface_hub)"
	libTransformer = "transformers"
	libNVML        = "nvidia-ml-py (pynvml)"
	libContainer   = "libnvidia-container"
	libKubelet     = "kubelet"
)

// causePatterns is the table, in the order of the rules (most specific
// cause first: see causeRuleOrder) and, within a rule, of preference.
func causePatterns() []causePattern {
	return []causePattern{
		// cuda-driver: the image's CUDA is newer than the node's driver.
		{rule: "cuda-driver", re: `(?i)NVIDIA driver on your system is too old`, lib: libTorch, where: "torch/cuda/__init__.py (_check_driver)@torch 1.x-2.x"},
		{rule: "cuda-driver", re: `(?i)CUDA driver version is insufficient for CUDA runtime version`, lib: libCUDA, where: "cudaGetErrorString(cudaErrorInsufficientDriver = 35), c10/cuda/CUDAException.cpp"},
		{rule: "cuda-driver", re: `(?i)unsupported display driver / cuda driver combination`, lib: libCUDA, where: "cudaGetErrorString(cudaErrorSystemDriverMismatch = 803)"},
		{rule: "cuda-driver", re: `(?i)forward compatibility was attempted on non supported HW`, lib: libCUDA, where: "cudaGetErrorString(cudaErrorCompatNotSupportedOnDevice = 804)"},
		{rule: "cuda-driver", re: `(?i)requirement error: unsatisfied condition: cuda`, lib: libContainer, where: "nvidia-container-cli's check of the image's NVIDIA_REQUIRE_CUDA (cuda>=X.Y)"},
		{rule: "cuda-driver/event", re: `(?i)unsatisfied condition: cuda`, lib: libContainer, where: "nvidia-container-cli's check of NVIDIA_REQUIRE_CUDA, in the kubelet's Failed event"},
		{rule: "cuda-driver/event", re: `(?i)forward compatibility was attempted`, lib: libCUDA, where: "cudaErrorCompatNotSupportedOnDevice (804), in the kubelet's Failed event"},
		{rule: "cuda-driver/event", re: `(?i)CUDA driver version is insufficient`, lib: libCUDA, where: "cudaErrorInsufficientDriver (35), in the kubelet's Failed event"},

		// gpu-not-visible: no GPU in the container.
		{rule: "gpu-not-visible", re: `(?i)No CUDA GPUs are available`, lib: libTorch, where: "c10/cuda/CUDAFunctions.cpp (device_count_ensure_non_zero)@torch 1.x-2.x"},
		{rule: "gpu-not-visible", re: `(?i)Failed to infer device type`, where: "vllm/config.py (DeviceConfig)@v0.8.0,v0.10.0 (added 2024-09-18, commit 6ffa3f3, after v0.6.1); vllm/config/device.py@v0.11.0"},
		{rule: "gpu-not-visible", re: `(?i)Device string must not be empty`, lib: libTorch, where: "c10/core/Device.cpp; vLLM v0.7-v0.8 passes the empty device type of UnspecifiedPlatform to torch.device (vllm/config.py DeviceConfig)"},
		{rule: "gpu-not-visible", re: `(?i)Current node has no GPU available|vLLM engine cannot start without GPU`, where: "vllm/executor/ray_utils.py (_wait_until_pg_ready / initialize_ray_cluster; \"no {device_str} available\")@v0.5.5,v0.6.0,v0.8.0,v0.10.0,v0.11.0; vllm/v1/executor/ray_utils.py@main"},
		{rule: "gpu-not-visible", re: `(?i)Found no NVIDIA driver on your system`, lib: libTorch, where: "torch/cuda/__init__.py (_check_driver), aten/src/ATen/cuda/detail/CUDAHooks.cpp@torch 1.x-2.x"},
		{rule: "gpu-not-visible", re: `(?i)CUDA driver initialization failed, you might not have a CUDA gpu`, lib: libTorch, where: "torch's CUDA lazy init (torch/cuda/__init__.py _lazy_init)@torch 1.x-2.x"},
		{rule: "gpu-not-visible", re: `(?i)NVML Shared Library Not Found`, lib: libNVML, where: "pynvml.py: NVMLError_LibraryNotFound (NVML_ERROR_LIBRARY_NOT_FOUND)"},
		{rule: "gpu-not-visible", re: `(?i)NVMLError_DriverNotLoaded`, lib: libNVML, where: "pynvml.py: NVMLError_DriverNotLoaded (NVML_ERROR_DRIVER_NOT_LOADED)"},
		{rule: "gpu-not-visible", re: `(?i)libcuda\.so[.0-9]*: cannot open shared object file`, lib: "glibc dlopen (ctypes, triton)", where: "dlerror() of dlopen(\"libcuda.so.1\"): no driver mounted into the container"},
		{rule: "gpu-not-visible", re: `(?i)no CUDA-capable device is detected`, lib: libCUDA, where: "cudaGetErrorString(cudaErrorNoDevice = 100)"},

		// shm: /dev/shm too small.
		{rule: "shm", re: `(?i)Error while creating shared memory segment`, lib: libNCCL, where: "src/misc/shmutils.cc (ncclShmOpen)@NCCL 2.12+"},
		{rule: "shm", re: `(?i)failed to extend /dev/shm/\S+ to \d+ bytes`, lib: libNCCL, where: "src/misc/shmutils.cc (ncclShmOpen)@NCCL 2.12+"},
		{rule: "shm", re: `(?i)posix_fallocate failed.*No space left on device`, lib: libNCCL, where: "src/include/shm.h (shmSetup: SYSCHECK posix_fallocate, \"Call to posix_fallocate failed\")@NCCL 2.7-2.11"},
		{rule: "shm", re: `(?i)/dev/shm.*(No space left|too small|insufficient)`, logs: []string{"shm-001.log"}},
		{rule: "shm", re: `(?i)No space left on device.*/dev/shm`, logs: []string{}},
		{rule: "shm", re: `(?i)insufficient shared memory`, lib: libTorch, where: "torch/utils/data/dataloader.py (\"This might be caused by insufficient shared memory (shm)\")"},
		{rule: "shm", re: `(?i)^Bus error`, lib: "the shell (strsignal(SIGBUS))", where: "the shell's report of a child killed by SIGBUS: \"Bus error (core dumped)\""},
		{rule: "shm", re: `(?i)Fatal Python error: Bus error`, lib: "CPython", where: "Modules/faulthandler.c"},
		{rule: "shm", re: `(?i)SIGBUS received`, lib: "abseil (Ray's failure signal handler)", where: "absl/debugging/failure_signal_handler.cc (\"*** SIGBUS received at time=\")"},
		{rule: "shm", re: `(?i)unable to (write to|mmap) .*torch_`, lib: libTorch, where: "aten/src/ATen/MapAllocator.cpp (shared memory of /torch_* segments)"},
		{rule: "shm/termination", re: `SIGBUS \(signal 7, exit code 135\)`, lib: "the kernel", where: "the container's last termination: signal 7 or exit code 135"},

		// tensor-parallel: the parallel sizes do not fit the model or the GPUs.
		{rule: "tensor-parallel", re: `(?i)number of attention heads \((?P<heads>\d+)\) must be divisible by tensor parallel size \((?P<tp>\d+)\)`, where: "vllm/config.py (ModelConfig.verify_with_parallel_config)@v0.4.0,v0.6.0,v0.8.0,v0.10.0; vllm/config/model.py@v0.11+"},
		{rule: "tensor-parallel", re: `(?i)number of hidden layers \(\d+\) must be divisible by pipeline parallel size \(\d+\)`, where: "vllm/config.py (ModelConfig.verify_with_parallel_config)@v0.2.0-v0.5.0.post1 (removed 2024-07-03, before v0.5.1)"},
		{rule: "tensor-parallel", re: `(?i)World size \((?P<world>\d+)\) is larger than the number of available GPUs \((?P<gpus>\d+)\)`, where: "vllm/config/parallel.py (ParallelConfig, backend choice)@main since 2025-12-05 (commit bf4a901; not in v0.11.0)"},
		{rule: "tensor-parallel", re: `(?i)please set tensor_parallel_size (?:\((?P<world>\d+)\) )?to less than max local gpu count(?: \((?P<gpus>\d+)\))?`, where: "vllm/executor/multiproc_gpu_executor.py@v0.4.3-v0.5.2 (no values), v0.5.3-v0.6.x (values); vllm/executor/mp_distributed_executor.py@v0.7.0,v0.8.0,v0.10.0 (removed before v0.11.0)"},
		{rule: "tensor-parallel", re: `(?i)please ensure that world_size \((?P<world>\d+)\) is less than (?:than )?max local gpu count \((?P<gpus>\d+)\)`, where: "vllm/executor/multiproc_gpu_executor.py@v0.5.3-v0.6.x; vllm/executor/mp_distributed_executor.py@v0.7.0,v0.8.0,v0.10.0 (removed before v0.11.0)"},
		{rule: "tensor-parallel", re: `(?i)number of required GPUs exceeds the total number of available GPUs`, where: "vllm/executor/ray_utils.py (initialize_ray_cluster; \"{device_str}s\" from v0.5.4)@v0.5.0,v0.6.0,v0.8.0,v0.10.0,v0.11.0; vllm/v1/executor/ray_utils.py@main"},
		{rule: "tensor-parallel", re: `(?i)This can be caused by too large tensor parallel size`, where: "vllm/model_executor/layers/quantization/awq.py@v0.2.2-v0.11.0, gptq.py@v0.2.6-v0.11.0 (\"The input/output size is not aligned with the quantized weight shape\")"},
		{rule: "tensor-parallel", re: `(?i)Consider reducing tensor_parallel_size`, where: "vllm/model_executor/layers/quantization/utils/marlin_utils.py (verify_marlin_supports_shape)@v0.5.2,v0.6.0,v0.8.0,v0.10.0,v0.11.0; utils/bitblas_utils.py@v0.10.0"},
		{rule: "tensor-parallel", re: `(?i)is not divisible by weight quantization block_[nk]`, where: "vllm/model_executor/layers/quantization/fp8.py (block-quantized weights)@v0.7.0,v0.8.0,v0.10.0,v0.11.0"},
		{rule: "tensor-parallel", re: `(?i)is not divisible by tensor.parallel.size`, logs: []string{}},

		// dtype-unsupported: bfloat16 below compute capability 8.0.
		{rule: "dtype-unsupported", re: `(?i)Bfloat16 is only supported on GPUs with compute capability of at least 8\.0(?:\. Your (?P<gpu>.+?) GPU has compute capability (?P<cc>\d+\.\d+))?`, where: "vllm/worker/worker.py (_check_if_gpu_supports_dtype)@v0.4.0,v0.6.0,v0.8.0,v0.10.0; vllm/v1/worker/gpu_worker.py@v0.8.0,v0.10.0; vllm/platforms/cuda.py@v0.11.0"},

		// kv-cache: the KV cache of one --max-model-len sequence does not fit.
		{rule: "kv-cache", re: `(?i)No available memory for the cache blocks`, where: "vllm/engine/llm_engine.py@v0.2.0-v0.3.3; vllm/executor/utils.py (raise_if_cache_size_invalid)@v0.4.0; vllm/worker/worker.py@v0.4.1,v0.6.0,v0.8.0,v0.10.0; vllm/v1/core/kv_cache_utils.py@v0.8.0,v0.10.0,v0.11.0,main"},
		{rule: "kv-cache", re: `(?i)(?:KV cache is needed, which is larger than the available KV cache memory|To serve at least one request with the models?'s max seq len)(?:.*estimated maximum model length is (?P<maxlen>\d+))?`, where: "vllm/v1/core/kv_cache_utils.py (check_enough_kv_cache_memory)@v0.8.0,v0.10.0,v0.11.0 (\"models's\"); \"model's\" in copies of later sources"},
		{rule: "kv-cache", re: `(?i)larger than the maximum number of tokens that can be stored in KV cache`, where: "vllm/engine/llm_engine.py@v0.3.0; vllm/executor/utils.py (raise_if_cache_size_invalid)@v0.4.0; vllm/worker/worker.py@v0.4.1,v0.6.0,v0.8.0,v0.10.0"},
		{rule: "kv-cache", re: `(?i)Based on the available memory, the estimated maximum model length is (?P<maxlen>\d+)`, where: "vllm/v1/core/kv_cache_utils.py (check_enough_kv_cache_memory, a wrapped line)@v0.9.0,v0.10.0,v0.11.0,main (added 2025-04-08, after v0.8.0)"},
		{rule: "kv-cache", re: "(?i)Try increasing .?gpu_memory_utilization.? (?:or decreasing .?max_model_len.? )?when initializing the engine", where: "vllm/executor/utils.py@v0.4.0, vllm/worker/worker.py@v0.4.1-v0.10.0, vllm/v1/core/kv_cache_utils.py@v0.8.0,v0.10.0,v0.11.0,main (the end of both KV cache errors, a wrapped line)"},

		// gpu-oom: torch's OutOfMemoryError, not Ray's (ray.exceptions.
		// OutOfMemoryError: its memory monitor killed a worker for the
		// node's memory).
		{rule: "gpu-oom", re: `(?i)CUDA out of memory`, lib: libTorch, where: "c10/cuda/CUDACachingAllocator.cpp@torch 1.x-2.x"},
		{rule: "gpu-oom", re: `(?i)HIP out of memory`, lib: libTorch, where: "c10/hip/HIPCachingAllocator.cpp (ROCm builds)@torch 2.x"},
		{rule: "gpu-oom", re: `(?i)(?:^|torch\.(?:cuda\.)?)OutOfMemoryError`, lib: libTorch, where: "torch/cuda/__init__.py (torch.cuda.OutOfMemoryError)@torch 1.13+, torch.OutOfMemoryError@torch 2.5+"},
		{rule: "gpu-oom", re: `(?i)CUDA (?:driver )?error: out of memory`, lib: libCUDA, where: "cudaErrorMemoryAllocation (2) through c10/cuda/CUDAException.cpp; CUDA_ERROR_OUT_OF_MEMORY through C10_CUDA_DRIVER_CHECK"},
		{rule: "gpu-oom", re: `(?i)CUBLAS_STATUS_ALLOC_FAILED`, lib: libTorch, where: "aten/src/ATen/cuda/CublasHandlePool.cpp (cublasCreate: TORCH_CUDABLAS_CHECK)"},
		{rule: "gpu-oom", re: `(?i)Cuda failure 'out of memory'`, lib: libNCCL, where: "src/include/checks.h (CUDACHECK)"},
		{rule: "gpu-oom", re: `(?i)(?P<free>Free memory on device .* on startup is less than desired GPU memory utilization)`, where: "vllm/v1/worker/gpu_worker.py (init_device)@v0.10.0,v0.11.0 (added 2025-06-10, after v0.9.0); vllm/v1/worker/utils.py (request_memory)@main"},

		// model-auth: a gated or private model without a valid token.
		{rule: "model-auth", re: `(?i)GatedRepoError`, lib: libHub, where: "src/huggingface_hub/utils/_errors.py (GatedRepoError)@0.16+"},
		{rule: "model-auth", re: `(?i)Cannot access gated repo`, lib: libHub, where: "src/huggingface_hub/utils/_http.py (hf_raise_for_status)@0.18+"},
		{rule: "model-auth", re: `(?i)You are trying to access a gated repo`, lib: libTransformer, where: "src/transformers/utils/hub.py (cached_file)@4.31+"},
		{rule: "model-auth", re: `(?i)Access to model \S+ is restricted`, lib: libHubServer, where: "the Hub's 401/403 body for a gated model, quoted by hf_raise_for_status"},
		{rule: "model-auth", re: `(?i)Invalid credentials in Authorization header`, lib: libHubServer, where: "the Hub's 401 body for an invalid token, quoted by hf_raise_for_status"},
		{rule: "model-auth", re: `(?i)403 Client Error.*(huggingface|Forbidden)`, lib: libHub, where: "requests' HTTPError, raised by hf_raise_for_status (src/huggingface_hub/utils/_http.py)"},

		// model-not-found: the model name or path does not exist.
		{rule: "model-not-found", re: `(?i)RepositoryNotFoundError`, lib: libHub, where: "src/huggingface_hub/utils/_errors.py (RepositoryNotFoundError)"},
		{rule: "model-not-found", re: `(?i)Repository Not Found for url`, lib: libHub, where: "src/huggingface_hub/utils/_http.py (hf_raise_for_status)"},
		{rule: "model-not-found", re: `(?i)RevisionNotFoundError`, lib: libHub, where: "src/huggingface_hub/utils/_errors.py (RevisionNotFoundError)"},
		{rule: "model-not-found", re: `(?i)Invalid repository ID or local directory specified`, where: "vllm/transformers_utils/config.py (get_config)@v0.8.0,v0.10.0,v0.11.0 (added 2025-02-25, commit 32c3b6b, before v0.8.0)"},
		{rule: "model-not-found", re: `(?i)Could not detect config format for no config file found`, where: "vllm/transformers_utils/config.py (get_config, config_format auto)@v0.9.0,v0.10.0,v0.11.0 (added 2025-04-03, commit 37bfee9, after v0.8.0)"},
		{rule: "model-not-found", re: `(?i)is not a local folder and is not a valid model identifier`, lib: libTransformer, where: "src/transformers/utils/hub.py (cached_file)@4.x"},
		{rule: "model-not-found", re: `(?i)Incorrect path_or_model_id`, lib: libTransformer, where: "src/transformers/utils/hub.py (cached_file: HFValidationError)@4.3x+"},
		{rule: "model-not-found", re: `(?i)Repo id must (?:be in the form 'repo_name' or 'namespace/repo_name'|use alphanumeric chars)`, lib: libHub, where: "src/huggingface_hub/utils/_validators.py (validate_repo_id: HFValidationError)"},
		{rule: "model-not-found", re: `(?i)does not appear to have a file named config\.json`, lib: libTransformer, where: "src/transformers/utils/hub.py (cached_file)@4.x"},
		{rule: "model-not-found", re: `(?i)outgoing traffic has been disabled`, lib: libHub, where: "src/huggingface_hub/file_download.py (LocalEntryNotFoundError, HF_HUB_OFFLINE); src/transformers/utils/hub.py"},
		{rule: "model-not-found", re: `(?i)404 Client Error.*huggingface\.co`, lib: libHub, where: "requests' HTTPError, raised by hf_raise_for_status (src/huggingface_hub/utils/_http.py)"},
		{rule: "model-not-found", re: `(?i)404 Client Error: Not Found for url: https://(?:www\.)?modelscope\.cn/api/v1/models/`, logs: []string{"model-not-found-006.log"}},

		// nccl: NCCL failed between the workers.
		{rule: "nccl", re: `NCCL error`, lib: libTorch, where: "torch/csrc/distributed/c10d/NCCLUtils.hpp (\"NCCL error in: ...\"); vllm/distributed/device_communicators/pynccl.py@v0.4.2, pynccl_wrapper.py (NCCLLibrary.NCCL_CHECK)@v0.4.3,v0.6.0,v0.8.0,v0.10.0"},
		{rule: "nccl", re: `ncclSystemError|ncclInternalError|ncclUnhandledCudaError|ncclInvalidUsage|ncclRemoteError`, lib: libNCCL, where: "src/nccl.h.in (ncclResult_t), quoted by torch's NCCLUtils.hpp"},
		{rule: "nccl", re: `DistBackendError`, lib: libTorch, where: "torch/csrc/distributed/c10d/Utils.hpp (C10D_NCCL_CHECK raises DistBackendError)@torch 2.1+"},
		{rule: "nccl", re: `NCCL WARN .*(failure|failed|[Ee]rror)`, lib: libNCCL, where: "src/include/debug.h (WARN), e.g. src/transport/net_socket.cc, src/proxy.cc"},
		{rule: "nccl", re: `Watchdog caught collective operation timeout|Some NCCL operations have failed or timed out`, lib: libTorch, where: "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (watchdog)@torch 2.x"},
		// GPUs without peer-to-peer access, as CUDA itself reports it
		// (vLLM's or SGLang's custom all-reduce, torch): after the rule
		// above, which quotes NCCL's own line when there is one.
		{rule: "nccl/p2p", re: `peer access is not supported between these two devices`, lib: libCUDA, where: "cudaGetErrorString(cudaErrorPeerAccessUnsupported = 217)"},

		// startup-probe: the kubelet killed a container still loading.
		{rule: "startup-probe/event", re: `failed startup probe, will be restarted`, lib: libKubelet, where: "pkg/kubelet/kuberuntime/kuberuntime_manager.go (\"Container %s failed %s probe, will be restarted\")"},
		{rule: "startup-probe", re: `failed startup probe, will be restarted`, lib: libKubelet, where: "pkg/kubelet/kuberuntime/kuberuntime_manager.go (the event, as `kubectl describe` or `kubectl get events` print it beside a log)"},
	}
}

// causeRuleOrder is the order the rules are tried in: a cause whose log
// also shows a more generic one comes before it (shm before nccl, an
// invalid token before a repository "not found", the KV cache before GPU
// memory).
func causeRuleOrder() []string {
	return []string{"cuda-driver", "cuda-driver/event", "gpu-not-visible", "shm", "shm/termination", "tensor-parallel",
		"dtype-unsupported", "kv-cache", "gpu-oom", "model-auth", "model-not-found", "nccl", "nccl/p2p",
		"startup-probe/event", "startup-probe"}
}

// compiledPatterns compiles the patterns of rule that keep accepts (all
// when keep is nil).
func compiledPatterns(pats []causePattern, rule string, keep func(causePattern) bool) []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, p := range pats {
		if p.rule == rule && (keep == nil || keep(p)) {
			out = append(out, regexp.MustCompile(p.re))
		}
	}
	return out
}
