// Tests of the cause classifier on log fixtures from real vLLM output
// (testdata/causes/README.md says where each comes from), including lines
// that must not decide a cause.

package vllmcause

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/vllm"
)

var updateLogs = flag.Bool("update", false, "rewrite the simulated logs of the local cluster from testdata/causes")

// kubelet events of a container killed by its startup probe, as the
// kubelet words them (pkg/kubelet/prober, kuberuntime).
var startupKillEvents = []string{
	"Normal Scheduled: Successfully assigned llm/chat-7557874574-jtdj8 to gpu-node-1",
	"Normal Started: Started container server",
	`Warning Unhealthy: Startup probe failed: Get "http://10.244.1.17:8000/health": dial tcp 10.244.1.17:8000: connect: connection refused`,
	"Normal Killing: Container server failed startup probe, will be restarted",
}

func TestClassifyFixtures(t *testing.T) {
	cases := []struct {
		name     string
		logs     []string // fixtures, most telling first
		pod      *corev1.Pod
		events   []string
		term     *corev1.ContainerStateTerminated
		cause    Cause
		evidence string   // prefix of the evidence
		hints    []string // substrings of the hints
	}{
		{name: "GPU memory exhausted loading the weights", logs: []string{"gpu-oom-weights.log"},
			pod:      chartPod(func(_ *corev1.Pod, c *corev1.Container) { setArg(c, "--gpu-memory-utilization", "0.95") }),
			cause:    CauseGPUOOM,
			evidence: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 44.39 GiB",
			hints: []string{"lower `--gpu-memory-utilization` (model.gpuMemoryUtilization, now 0.95) or `--max-model-len` (model.maxModelLen, not set: the model's full context)",
				"raise `gpu` to 2 (resources.gpu, now 1) and `--tensor-parallel-size` to 2 (model.tensorParallelSize, now 1"}},
		{name: "GPU memory held by another process", logs: []string{"gpu-oom-free-memory.log"}, pod: chartPod(nil),
			cause:    CauseGPUOOM,
			evidence: "ValueError: Free memory on device cuda:0 (15.32/22.04 GiB) on startup is less than desired GPU memory utilization (0.95, 20.94 GiB).",
			hints:    []string{"another process holds memory on this GPU", "`--gpu-memory-utilization` (model.gpuMemoryUtilization, now 0.9)"}},
		{name: "KV cache too small for the max model len", logs: []string{"kv-cache-max-model-len.log"}, pod: chartPod(nil),
			cause:    CauseKVCache,
			evidence: "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed",
			hints: []string{"lower `--max-model-len` (model.maxModelLen, not set: the model's full context) to at most 34480",
				"raise `--gpu-memory-utilization` (model.gpuMemoryUtilization, now 0.9) toward 0.95", "`--kv-cache-dtype fp8`"}},
		{name: "no memory left for KV cache blocks", logs: []string{"kv-cache-no-blocks.log"},
			pod:      chartPod(func(_ *corev1.Pod, c *corev1.Container) { setArg(c, "--max-model-len", "32768") }),
			cause:    CauseKVCache,
			evidence: "ValueError: No available memory for the cache blocks.",
			hints:    []string{"lower `--max-model-len` (model.maxModelLen, now 32768) to what the memory left for the KV cache holds"}},
		{name: "gated model without a token", logs: []string{"model-auth-gated.log"},
			pod:      chartPod(func(_ *corev1.Pod, c *corev1.Container) { setArg(c, "--model", "meta-llama/Llama-3.1-8B-Instruct") }),
			cause:    CauseModelAuth,
			evidence: "Access to model meta-llama/Llama-3.1-8B-Instruct is restricted. You must have access to it and be authenticated",
			hints: []string{"the container has no Hugging Face token", "set hfToken.secretName",
				"license accepted by the token's account on https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct"}},
		{name: "gated model refusing the token of a Secret", logs: []string{"model-auth-gated.log"},
			pod: chartPod(func(_ *corev1.Pod, c *corev1.Container) {
				c.Env = []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token"}, Key: "token"}}}}
			}),
			cause: CauseModelAuth,
			hints: []string{"Hugging Face refused the token in HF_TOKEN (from secret hf-token key token, hfToken.secretName)"}},
		{name: "model repository not found, with Hugging Face's private-repo wording", logs: []string{"model-not-found.log"},
			pod:      chartPod(func(_ *corev1.Pod, c *corev1.Container) { setArg(c, "--model", "Qwen/Qwen3-0.7B") }),
			cause:    CauseModelNotFound,
			evidence: "ValueError: Invalid repository ID or local directory specified: 'Qwen/Qwen3-0.7B'.",
			hints:    []string{"`--model` is Qwen/Qwen3-0.7B (model.name)", "https://huggingface.co/Qwen/Qwen3-0.7B exists", "if Qwen/Qwen3-0.7B is private, set hfToken.secretName"}},
		{name: "/dev/shm too small for NCCL", logs: []string{"shm-nccl-segment.log"},
			pod: chartPod(func(p *corev1.Pod, c *corev1.Container) {
				setArg(c, "--tensor-parallel-size", "2")
				p.Spec.Volumes[1].EmptyDir.SizeLimit = ptr.To(resource.MustParse("64Mi"))
			}),
			cause:    CauseShm,
			evidence: "Error while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888), error: No space left on device (28)",
			hints:    []string{"raise shm.sizeLimit (now 64Mi)", "resources.limits.memory, now 32Gi", "with `--tensor-parallel-size` 2 every worker needs NCCL buffers"}},
		{name: "/dev/shm not mounted", logs: []string{"shm-nccl-segment.log"},
			pod: chartPod(func(p *corev1.Pod, c *corev1.Container) {
				c.VolumeMounts = c.VolumeMounts[:1]
				p.Spec.Volumes = p.Spec.Volumes[:1]
			}),
			cause: CauseShm,
			hints: []string{"nothing is mounted at /dev/shm, so the container runtime's 64Mi default applies: set shm.enabled"}},
		{name: "NCCL peer access failure", logs: []string{"nccl-p2p.log"},
			pod:      chartPod(func(_ *corev1.Pod, c *corev1.Container) { setArg(c, "--tensor-parallel-size", "2") }),
			cause:    CauseNCCL,
			evidence: "ncclUnhandledCudaError: Call to CUDA function failed.",
			hints:    []string{"`--tensor-parallel-size` (model.tensorParallelSize, now 2)", "NCCL_DEBUG=INFO", "NCCL_P2P_DISABLE=1", "shm.sizeLimit, 8Gi"}},
		{name: "bfloat16 on a T4", logs: []string{"dtype-bf16-t4.log"}, pod: chartPod(nil),
			cause:    CauseDtypeUnsupported,
			evidence: "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5.",
			hints:    []string{"add `--dtype=half` to extraArgs: the Tesla T4 GPU (compute capability 7.5) cannot run bfloat16"}},
		{name: "bfloat16 asked for explicitly", logs: []string{"dtype-bf16-t4.log"},
			pod:   chartPod(func(_ *corev1.Pod, c *corev1.Container) { setArg(c, "--dtype", "bfloat16") }),
			cause: CauseDtypeUnsupported,
			hints: []string{"replace `--dtype` (extraArgs, now bfloat16) with `--dtype=half`"}},
		{name: "tensor parallel size not dividing the heads", logs: []string{"tp-attention-heads.log"},
			pod: chartPod(func(_ *corev1.Pod, c *corev1.Container) {
				setArg(c, "--tensor-parallel-size", "3")
				c.Resources.Limits[vllm.GPUResource] = resource.MustParse("3")
			}),
			cause:    CauseTensorParallel,
			evidence: "Value error, Total number of attention heads (64) must be divisible by tensor parallel size (3).",
			hints:    []string{"`--tensor-parallel-size` (model.tensorParallelSize, now 3) must divide the model's 64 attention heads: use 1, 2, 4 or 8, and set `gpu` (resources.gpu, now 3)"}},
		{name: "tensor parallel size beyond the GPUs", logs: []string{"tp-world-size.log"},
			pod:      chartPod(func(_ *corev1.Pod, c *corev1.Container) { setArg(c, "--tensor-parallel-size", "2") }),
			cause:    CauseTensorParallel,
			evidence: "Value error, World size (2) is larger than the number of available GPUs (1) in this node.",
			hints:    []string{"needs 2 GPUs but the container sees 1: set `gpu` (resources.gpu, now 1) to match"}},
		{name: "no GPU requested", logs: []string{"gpu-not-visible.log"},
			pod: chartPod(func(_ *corev1.Pod, c *corev1.Container) {
				delete(c.Resources.Limits, vllm.GPUResource)
				delete(c.Resources.Requests, vllm.GPUResource)
			}),
			cause:    CauseGPUNotVisible,
			evidence: "RuntimeError: Failed to infer device type",
			hints:    []string{"the container requests no nvidia.com/gpu, so no GPU is mounted into it: set `gpu` (resources.gpu) to 1 or more"}},
		{name: "GPU requested but not visible", logs: []string{"gpu-not-visible.log"}, pod: chartPod(nil),
			cause: CauseGPUNotVisible,
			hints: []string{"requests 1 nvidia.com/gpu but sees none", "device plugin"}},
		{name: "CUDA driver too old", logs: []string{"cuda-driver.log"}, pod: chartPod(nil),
			cause:    CauseCUDADriver,
			evidence: "RuntimeError: The NVIDIA driver on your system is too old (found version 12020).",
			hints:    []string{"older than the CUDA image vllm/vllm-openai:v0.11.0 was built with", "image.tag"}},
		{name: "killed by the startup probe while loading", logs: []string{"startup-loading.log"}, pod: chartPod(nil), events: startupKillEvents,
			term:     &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 137},
			cause:    CauseStartupProbe,
			evidence: "Normal Killing: Container server failed startup probe, will be restarted",
			hints: []string{"the startup probe (GET :http/health) killed the container after its budget of 30m0s (failureThreshold 180 × periodSeconds 10 + initialDelaySeconds 0)",
				"raise probes.startup.failureThreshold (now 180)", "modelCache.persistence.enabled", "raise --timeout"}},
		{name: "a driver too old for the image's CUDA: the runtime refuses to start the container", pod: chartPod(nil),
			events:   []string{"Warning Failed: Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to a newer version, or use an earlier cuda container: unknown"},
			cause:    CauseCUDADriver,
			evidence: "Warning Failed: Error: failed to create containerd task",
			hints:    []string{"image.tag"}},
		{name: "a write to a full /dev/shm: SIGBUS", pod: chartPod(nil),
			term:     &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 135},
			cause:    CauseShm,
			evidence: "the container was killed by SIGBUS (Error, exit code 135)"},

		// No rule may match these.
		{name: "an error no rule knows", logs: []string{"unknown-keyerror.log"}, pod: chartPod(nil), cause: CauseUnknown},
		{name: "warnings that mention memory", logs: []string{"negative-memory-warnings.log"}, pod: chartPod(nil), cause: CauseUnknown},
		{name: "a retry that succeeded", logs: []string{"negative-retry.log"}, pod: chartPod(nil), cause: CauseUnknown},
		{name: "loading, failing the startup probe, not killed yet", logs: []string{"startup-loading.log"}, pod: chartPod(nil),
			events: startupKillEvents[:3], cause: CauseUnknown},
		{name: "the previous log names no cause, the current one does", logs: []string{"unknown-keyerror.log", "gpu-oom-weights.log"},
			pod: chartPod(nil), cause: CauseGPUOOM},
	}
	cls := newClassifier()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := causeInput{events: tc.events, term: tc.term, spec: newServerSpec(tc.pod, "server")}
			in.spec.values = builtinValues(t) // the pods are the built-in chart's
			for _, f := range tc.logs {
				in.logs = append(in.logs, fixture(t, f))
			}
			cause, evidence, hints := cls.classify(in)
			assert.Equal(t, tc.cause, cause)
			if tc.cause == CauseUnknown {
				assert.Empty(t, evidence)
				assert.Empty(t, hints)
				return
			}
			assert.True(t, strings.HasPrefix(evidence, tc.evidence), "evidence %q", evidence)
			assert.LessOrEqual(t, len(evidence), maxEvidence+len("…"))
			require.NotEmpty(t, hints)
			all := strings.Join(hints, "\n")
			for _, h := range tc.hints {
				assert.Contains(t, all, h)
			}
		})
	}
}

// TestClassifyLines checks single lines: what each rule recognises beyond
// the fixtures, and lines that must not decide anything.
func TestClassifyLines(t *testing.T) {
	cases := []struct {
		line  string
		cause Cause
	}{
		{"RuntimeError: CUDA driver error: out of memory", CauseGPUOOM},
		{"OutOfMemoryError                          Traceback (most recent call last)", CauseGPUOOM},
		// Ray's memory monitor killing a worker for the node's memory, not the GPU's
		// (vllm-project/vllm#15102).
		{"ERROR 03-21 17:27:44 [core.py:340] ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.", CauseUnknown},
		{"(EngineCore_DP0 pid=12473) ERROR 11-05 12:19:32 [linear.py:210] Failed to create unquantized linear weights: CUDA out of memory. Tried to allocate 896.00 MiB.", CauseGPUOOM},
		{"ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (7344). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", CauseKVCache},
		{"huggingface_hub.errors.GatedRepoError: 403 Client Error.", CauseModelAuth},
		{"Access to model mistralai/Mistral-7B-Instruct-v0.1 is restricted and you are not in the authorized list. Visit https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.1 to ask for access.", CauseModelAuth},
		{"OSError: Qwen/Qwen3-0.7B is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'", CauseModelNotFound},
		{"RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW", CauseCUDADriver},
		{"RuntimeError: No CUDA GPUs are available", CauseGPUNotVisible},
		{"Bus error (core dumped)", CauseShm},
		{"(RayWorker pid=1451) Fatal Python error: Bus error", CauseShm},
		// A paste that lost its newlines: an NCCL INFO line quoted after the error
		// does not make the line NCCL's INFO (vllm-project/vllm#21661).
		{` ERROR 11-04 18:02:56 [v1/executor/multiproc_executor.py:597] raise RuntimeError(f"NCCL error: {error_str}") ERROR 11-04 18:02:56 [v1/executor/multiproc_executor.py:597] RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details) 02fdc141b80d:213:213 [1] NCCL INFO cudaDriverVersion 12080`, CauseNCCL},
		{"(pid=909608) z-pc:909608:910337 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v7 symbol.", CauseUnknown},
		{"RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1603729062494/work/torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled cuda error, NCCL version 2.7.8", CauseNCCL},
		// NCCL's shared memory transport naming only the full /dev/shm
		// (NVIDIA/nccl#290), and the all-reduce watchdog (vllm-project/vllm#1846).
		{"gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device", CauseShm},
		{"(RayWorker pid=1080651) [E ProcessGroupNCCL.cpp:474] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800305 milliseconds before timing out.", CauseNCCL},
		{"ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.", CauseTensorParallel},
		// The V1 KV cache error cut by a terminal's line wrap
		// (SergiioB/intel-arc-pro-b70-inference-cookbook#4), and peer
		// access as CUDA reports it to a custom all-reduce (sgl-project/sglang#1509).
		{"(EngineCore pid=316) ValueError: To serve at least one request with the model's max seq len (100000), (4.26 GiB KV cach", CauseKVCache},
		{"Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 'peer access is not supported between these two devices'", CauseNCCL},

		{"(Worker_TP0 pid=3216417) WARNING 03-13 17:30:52 [kv_cache_utils.py:1054] Add 3 padding layers, may waste at most 6.25% KV cache memory", CauseUnknown},
		{"INFO 12-19 22:58:27 model_runner.py:1415] Capturing cudagraphs for decoding. If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization` or switching to eager mode.", CauseUnknown},
		{"(APIServer pid=1) WARNING 12-01 06:00:02 [config.py:1262] Casting torch.bfloat16 to torch.float16.", CauseUnknown},
		{"If you are trying to access a private or gated repo, make sure you are authenticated. For more details, see https://huggingface.co/docs/huggingface_hub/authentication", CauseUnknown},
		{"chat-7557874574-jtdj8:412:430 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC", CauseUnknown},
		{"WARNING:huggingface_hub.utils._http:Retrying in 1s [Retry 1/5].", CauseUnknown},
		{"(EngineCore_DP0 pid=268) INFO 12-01 06:00:41 [gpu_worker.py:298] Available KV cache memory: 4.21 GiB", CauseUnknown},
		// Warnings and debug lines behind a Ray worker's, a container
		// runtime's or Python logging's prefix.
		{"(RayWorkerWrapper pid=336, ip=10.1.0.67) WARNING 10-10 10:22:58 _custom_ops.py:18] Failed to import from vllm._C with ImportError('libcuda.so.1: cannot open shared object file: No such file or directory')", CauseUnknown},
		{"2024-10-23T17:56:46.209003136Z DEBUG 08-29 04:29:54 [__init__.py:82] Exception happens when checking CUDA platform: NVML Shared Library Not Found", CauseUnknown},
		{"2023-07-04 08:55:35,252 WARNING services.py:1826 -- WARNING: The object store is using /tmp instead of /dev/shm because /dev/shm has only 67108864 bytes available. This will harm performance!", CauseUnknown},
		{"[rank0]:[W914 04:53:45.615225908 ProcessGroupNCCL.cpp:1476] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources.", CauseUnknown},
		{"(MapWorker(MapBatches(vLLMEngineStageUDF)) pid=12390, ip=10.0.118.90) INFO 06-16 10:00:00 [gpu_worker.py:298] Available KV cache memory: 4.21 GiB", CauseUnknown},
	}
	// The source line a traceback quotes under a frame is code, not what
	// happened.
	t.Run("traceback source lines", func(t *testing.T) {
		cause, _, _ := newClassifier().classify(causeInput{logs: [][]string{{
			"Traceback (most recent call last):",
			`  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3120, in _dummy_sampler_run`,
			`    raise RuntimeError("CUDA out of memory occurred when warming up sampler")`,
			"KeyError: 'layers.1.mlp.experts.w13_weight'",
		}}})
		assert.Equal(t, CauseUnknown, cause)
	})
	t.Run("traceback source lines under torch.distributed's prefix", func(t *testing.T) {
		cause, _, _ := newClassifier().classify(causeInput{logs: [][]string{{
			"[rank0]: Traceback (most recent call last):",
			`[rank0]:   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3120, in _dummy_sampler_run`,
			`[rank0]:     raise RuntimeError("CUDA out of memory occurred when warming up sampler")`,
			"[rank0]: KeyError: 'layers.1.mlp.experts.w13_weight'",
		}}})
		assert.Equal(t, CauseUnknown, cause)
	})
	cls := newClassifier()
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			cause, _, _ := cls.classify(causeInput{logs: [][]string{{tc.line}}})
			assert.Equal(t, tc.cause, cause)
		})
	}
}

// TestEvidenceWithoutPrefix checks that the evidence is the message,
// without the prefixes the classifier recognises before it.
func TestEvidenceWithoutPrefix(t *testing.T) {
	cases := []struct {
		line, evidence string
	}{
		{"(RayWorkerWrapper pid=335, ip=10.1.0.67) ERROR 01-29 07:44:33 worker_base.py:467] RuntimeError: NCCL error: internal error - please report this issue to the NCCL developers",
			"RuntimeError: NCCL error: internal error"},
		{"[rank0]: OSError: You are trying to access a gated repo.", "OSError: You are trying to access a gated repo."},
		{"ERROR 2025-07-21 14:34:24.934 async_trtllm_engine_factory.py:62] Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Quadro RTX 6000 GPU has compute capability 7.5.",
			"Bfloat16 is only supported"},
		{"[2025-10-13 09:06:25] vllm-deepseek-ep-decode-0:3663:4044 [0] misc/shmutils.cc:129 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Ewjreo (size 33030528), error: No space left on device (28)",
			"vllm-deepseek-ep-decode-0:3663:4044 [0] misc/shmutils.cc:129 NCCL WARN"},
	}
	cls := newClassifier()
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			cause, evidence, _ := cls.classify(causeInput{logs: [][]string{{tc.line}}})
			require.NotEqual(t, CauseUnknown, cause)
			assert.True(t, strings.HasPrefix(evidence, tc.evidence), "evidence %q", evidence)
		})
	}
}

func TestClassifyWithoutSpec(t *testing.T) {
	cause, _, hints := newClassifier().classify(causeInput{logs: [][]string{fixture(t, "gpu-oom-weights.log")}})
	assert.Equal(t, CauseGPUOOM, cause)
	all := strings.Join(hints, "\n")
	assert.Contains(t, all, "`--gpu-memory-utilization` (not set: 0.9)", "no pod, no chart: flags only")
	assert.NotContains(t, all, "model.")
}

func TestEvidenceIsClipped(t *testing.T) {
	long := "torch.OutOfMemoryError: CUDA out of memory. " + strings.Repeat("é", maxEvidence)
	_, evidence, _ := newClassifier().classify(causeInput{logs: [][]string{{long}}})
	assert.True(t, strings.HasSuffix(evidence, "…"))
	assert.LessOrEqual(t, len(evidence), maxEvidence+len("…"))
	assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(evidence, "…")), "cut on a rune boundary")
}

func TestServerSpec(t *testing.T) {
	p := chartPod(func(p *corev1.Pod, c *corev1.Container) {
		c.Command = []string{"vllm", "serve", "Qwen/Qwen3-8B"}
		c.Args = []string{"--gpu_memory_utilization=0.85", "-tp", "2", "--pipeline-parallel-size", "2", "--enforce-eager"}
		c.Env = []corev1.EnvVar{{Name: "HUGGING_FACE_HUB_TOKEN", Value: "hf_literal"}, {Name: "HF_HUB_OFFLINE", Value: "1"}}
	})
	s := newServerSpec(p, "server")
	require.NotNil(t, s)
	assert.Equal(t, "Qwen/Qwen3-8B", s.model)
	assert.Equal(t, "0.85", s.flags["gpu-memory-utilization"])
	assert.Equal(t, int64(2), s.tensorParallel())
	assert.Equal(t, int64(2), s.pipelineParallel())
	assert.Contains(t, s.flags, "enforce-eager")
	assert.Equal(t, int64(1), s.gpus)
	assert.Equal(t, "literal", s.token)
	assert.True(t, s.offline)
	assert.Equal(t, "dshm", s.shmMount)
	assert.True(t, s.shmMemory)
	assert.Equal(t, "8Gi", s.shmSize)
	assert.Equal(t, 30*time.Minute, startupBudget(s.startup))
	assert.Nil(t, newServerSpec(p, "no-such-container"))
	assert.Nil(t, newServerSpec(nil, "server"))
}

// TestSimulatedLogs checks that the local cluster serves, for each fault
// class, the fixture of its cause in the CRI log format, so each class is
// classified as its cause; -update writes them.
func TestSimulatedLogs(t *testing.T) {
	dir := filepath.Join("..", "..", "cmd", "devcluster", "cluster", "logs")
	classes := []struct {
		dir, fixture string
		cause        Cause
	}{
		{"fault-gpumem", "gpu-oom-weights.log", CauseGPUOOM},
		{"fault-kvcache", "kv-cache-max-model-len.log", CauseKVCache},
		{"fault-hfauth", "model-auth-gated.log", CauseModelAuth},
		{"fault-model404", "model-not-found.log", CauseModelNotFound},
		{"fault-shm", "shm-nccl-segment.log", CauseShm},
		{"fault-nccl", "nccl-p2p.log", CauseNCCL},
		{"fault-bf16", "dtype-bf16-t4.log", CauseDtypeUnsupported},
		{"fault-tp", "tp-attention-heads.log", CauseTensorParallel},
		{"fault-driver", "cuda-driver.log", CauseCUDADriver},
		{"fault-startup", "startup-loading.log", CauseUnknown}, // the kubelet's events decide it
		{".", "unknown-keyerror.log", CauseUnknown},            // the plain crash class: previous.log
	}
	cls := newClassifier()
	for _, c := range classes {
		t.Run(c.dir, func(t *testing.T) {
			want := criLog(fixture(t, c.fixture))
			files := []string{"current.log", "previous.log"}
			if c.dir == "." {
				files = files[1:] // current.log is the log of a healthy server
			}
			for _, name := range files {
				path := filepath.Join(dir, c.dir, name)
				if *updateLogs {
					require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
					require.NoError(t, os.WriteFile(path, want, 0o644))
				}
				got, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Equal(t, string(want), string(got), "%s (rerun with -update to rewrite)", path)
				cause, _, _ := cls.classify(causeInput{logs: [][]string{fromCRI(t, got)}})
				assert.Equal(t, c.cause, cause, path)
			}
		})
	}
}

// criLog renders lines as a container runtime stores them: "<time>
// <stream> F <line>", a tenth of a second apart.
func criLog(lines []string) []byte {
	var b bytes.Buffer
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, l := range lines {
		fmt.Fprintf(&b, "%s stderr F %s\n", at.Add(time.Duration(i)*100*time.Millisecond).Format(time.RFC3339Nano), l)
	}
	return b.Bytes()
}

// fromCRI strips the CRI prefix of each line, as kubectl logs shows them.
func fromCRI(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), " ", 4)
		require.Len(t, parts, 4, "CRI log line %q", sc.Text())
		out = append(out, parts[3])
	}
	return out
}
