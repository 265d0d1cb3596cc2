// Tests of the classifier's pattern table: messages as vLLM and the
// libraries it surfaces raise them at several releases (the literal text
// around the formatted values, with plausible values), each naming its
// cause; and docs/vllm-causes.md, which must be the table.

package vllmcause

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateCausesDoc = flag.Bool("update-causes-doc", false, "rewrite the table of docs/vllm-causes.md from causePatterns")

func TestSourceMessages(t *testing.T) {
	cls := newClassifier()
	for _, tc := range []struct {
		name, line string
		want       Cause
		group      map[string]string
	}{
		// gpu-not-visible
		{"v0.6 DeviceConfig", "RuntimeError: Failed to infer device type", CauseGPUNotVisible, nil},
		{"v0.10 DeviceConfig", "(APIServer pid=1) RuntimeError: Failed to infer device type, please set the environment variable `VLLM_LOGGING_LEVEL=DEBUG` to turn on verbose logging to help debug the issue.", CauseGPUNotVisible, nil},
		{"v0.7 empty device type", "RuntimeError: Device string must not be empty", CauseGPUNotVisible, nil},
		{"ray_utils no GPU", "ValueError: Current node has no GPU available. current_node_resource={'CPU': 8.0, 'memory': 1.0}. vLLM engine cannot start without GPU. Make sure you have at least 1 GPU available in a node current_node_id='9b83' current_ip='10.0.0.3'.", CauseGPUNotVisible, nil},
		{"torch no GPUs", "RuntimeError: No CUDA GPUs are available", CauseGPUNotVisible, nil},
		{"torch no driver", "AssertionError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx", CauseGPUNotVisible, nil},
		{"torch driver init", "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.", CauseGPUNotVisible, nil},
		{"pynvml library", "pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found", CauseGPUNotVisible, nil},
		{"pynvml driver", "pynvml.NVMLError_DriverNotLoaded: Driver Not Loaded", CauseGPUNotVisible, nil},
		{"cuda no device", "RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 100: no CUDA-capable device is detected", CauseGPUNotVisible, nil},

		// tensor-parallel
		{"heads v0.4", "ValueError: Total number of attention heads (12) must be divisible by tensor parallel size (8).", CauseTensorParallel, map[string]string{"heads": "12", "tp": "8"}},
		{"heads v0.11 pydantic", "  Value error, Total number of attention heads (40) must be divisible by tensor parallel size (3). [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]", CauseTensorParallel, map[string]string{"heads": "40", "tp": "3"}},
		{"layers v0.5.1", "ValueError: Total number of hidden layers (61) must be divisible by pipeline parallel size (2).", CauseTensorParallel, nil},
		{"multiproc v0.4", "AssertionError: please set tensor_parallel_size to less than max local gpu count", CauseTensorParallel, nil},
		{"multiproc v0.6", "AssertionError: please set tensor_parallel_size (4) to less than max local gpu count (2)", CauseTensorParallel, map[string]string{"world": "4", "gpus": "2"}},
		{"multiproc v0.6 world", "AssertionError: please ensure that world_size (8) is less than than max local gpu count (4)", CauseTensorParallel, map[string]string{"world": "8", "gpus": "4"}},
		{"v1 world size", "(APIServer pid=1)   Value error, World size (2) is larger than the number of available GPUs (1) in this node. If this is intentional and you are using:", CauseTensorParallel, map[string]string{"world": "2", "gpus": "1"}},
		{"ray placement group", "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.", CauseTensorParallel, nil},
		{"gptq alignment", "ValueError: The input size is not aligned with the quantized weight shape. This can be caused by too large tensor parallel size.", CauseTensorParallel, nil},
		{"marlin shape", "ValueError: Weight output_size_per_partition = 2752 is not divisible by min_thread_n = 64. Consider reducing tensor_parallel_size or running with --quantization gptq.", CauseTensorParallel, nil},
		{"fp8 block", "ValueError: Weight output_partition_size = 576 is not divisible by weight quantization block_n = 128.", CauseTensorParallel, nil},

		// model-not-found
		{"vllm invalid repo", "ValueError: Invalid repository ID or local directory specified: '/models/llama'.", CauseModelNotFound, nil},
		{"vllm config format", "ValueError: Could not detect config format for no config file found. With config_format 'auto', ensure your model has either config.json (HF format) or params.json (Mistral format).", CauseModelNotFound, nil},
		{"transformers identifier", "OSError: foo/bar is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'", CauseModelNotFound, nil},
		{"transformers incorrect id", "OSError: Incorrect path_or_model_id: '/mnt/models/llama'. Please provide either the path to a local folder or the repo_id of a model on the Hub.", CauseModelNotFound, nil},
		{"hub validation", "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/data/models/Qwen2-7B'. Use `repo_type` argument if needed.", CauseModelNotFound, nil},
		{"hub validation chars", "huggingface_hub.utils._validators.HFValidationError: Repo id must use alphanumeric chars or '-', '_', '.', '--' and '..' are forbidden, '-' and '.' cannot start or end the name, max length is 96: '/models//x'.", CauseModelNotFound, nil},
		{"hub repo not found", "huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. (Request ID: Root=1-6) Repository Not Found for url: https://huggingface.co/api/models/foo/bar/revision/main.", CauseModelNotFound, nil},
		{"hub offline", "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to False.", CauseModelNotFound, nil},

		// kv-cache
		{"v0 no blocks", "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.", CauseKVCache, nil},
		{"v0 max seq len", "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (18064). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", CauseKVCache, nil},
		{"v1 v0.8 models's", "ERROR 07-11 06:23:05 [core.py:390] ValueError: To serve at least one request with the models's max seq len (118000), (6.30 GiB KV cache is needed, which is larger than the available KV cache memory (6.11 GiB). Based on the available memory, the estimated maximum model length is 114432. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", CauseKVCache, map[string]string{"maxlen": "114432"}},
		{"v1 main model's", "(EngineCore pid=17) ValueError: To serve at least one request with the model's max seq len (4096), (0.58 GiB KV cache is needed, which is larger than the available KV cache memory (0.47 GiB). Based on the available memory, the estimated maximum model length is 3280. Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine.", CauseKVCache, map[string]string{"maxlen": "3280"}},
		{"v1 wrapped estimate", "  Based on the available memory, the estimated maximum model length is 7740.", CauseKVCache, map[string]string{"maxlen": "7740"}},
		{"wrapped advice", "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", CauseUnknown, nil},
		{"wrapped advice whole", "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", CauseKVCache, nil},

		// gpu-oom
		{"torch oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 266.00 MiB. GPU 0 has a total capacity of 79.10 GiB", CauseGPUOOM, nil},
		{"rocm oom", "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.00 GiB.", CauseGPUOOM, nil},
		{"cublas alloc", "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", CauseGPUOOM, nil},
		{"v1 free memory", "ValueError: Free memory on device cuda:0 (15.32/22.04 GiB) on startup is less than desired GPU memory utilization (0.88, 19.39 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.", CauseGPUOOM, nil},
		{"ray oom is not gpu", "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.", CauseUnknown, nil},

		// model-auth
		{"hub gated", "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-6) Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json.", CauseModelAuth, nil},
		{"transformers gated", "OSError: You are trying to access a gated repo.", CauseModelAuth, nil},

		// dtype, driver, shm, nccl, startup probe
		{"bf16 v0.6", "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for example: --dtype=half.", CauseDtypeUnsupported, map[string]string{"gpu": "Tesla T4", "cc": "7.5"}},
		{"bf16 no cc", "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla V100 GPU does not have a compute capability.", CauseDtypeUnsupported, nil},
		{"driver too old", "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).", CauseCUDADriver, nil},
		{"nccl shm extend", "host:1:2 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-ZZxQ to 9637892 bytes", CauseShm, nil},
		{"nccl shm old", "host:1:2 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device", CauseShm, nil},
		{"nccl error", "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", CauseNCCL, nil},
		{"describe output", "  Normal   Killing    2m (x3 over 32m)   kubelet  Container vllm failed startup probe, will be restarted", CauseStartupProbe, nil},

		// lines that name no cause
		{"info line", "INFO 10-21 00:33:12 [gpu_worker.py:276] Available KV cache memory: 8.04 GiB", CauseUnknown, nil},
		{"warning quoting a cause", "WARNING 01-23 10:00:00 [config.py:1] Failed to infer device type, falling back", CauseUnknown, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, _ := cls.classify(causeInput{logs: [][]string{{tc.line}}})
			assert.Equal(t, tc.want, got)
			if len(tc.group) == 0 {
				return
			}
			for _, r := range cls.rules {
				m, ok := cls.match(r, causeInput{}, [][]string{cls.messages([]string{tc.line})})
				if !ok {
					continue
				}
				for name, want := range tc.group {
					assert.Equal(t, want, m.group(name), name)
				}
				return
			}
			t.Fatal("no rule matched")
		})
	}
}

// causesDocPath is the table's documentation, from the package's
// directory.
var causesDocPath = filepath.Join("..", "..", "docs", "vllm-causes.md")

const (
	causesDocBegin = "<!-- table: generated from internal/vllmcause/causes_table.go; go test ./internal/vllmcause -run TestCausesDoc -update-causes-doc -->"
	causesDocEnd   = "<!-- end of table -->"
)

// causesDocTable renders the pattern table as Markdown.
func causesDocTable() string {
	var b strings.Builder
	b.WriteString("| # | cause | matched in | message pattern (as matched) | raised at (source file @ versions) | library | provenance |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for i, p := range causePatterns() {
		lib, prov := p.lib, "source"
		if lib == "" {
			lib = "vLLM"
		}
		where := p.where
		if where == "" {
			lib, where = "", "none found"
			prov = "corpus log"
			if len(p.logs) > 0 {
				prov += ": " + strings.Join(p.logs, ", ")
			} else {
				prov += ": none in the corpus"
			}
		}
		fmt.Fprintf(&b, "| %d | %s | %s | `%s` | %s | %s | %s |\n", i+1, p.cause(), p.kind(), esc(p.re), esc(where), esc(lib), prov)
	}
	return b.String()
}

// TestCausesDoc checks that docs/vllm-causes.md holds the table of
// causePatterns, every row a pattern of the classifier and every pattern a
// row; -update-causes-doc rewrites it.
func TestCausesDoc(t *testing.T) {
	data, err := os.ReadFile(causesDocPath)
	require.NoError(t, err)
	doc := string(data)
	before, rest, ok := strings.Cut(doc, causesDocBegin+"\n")
	require.True(t, ok, "%s has no %q", causesDocPath, causesDocBegin)
	_, after, ok := strings.Cut(rest, causesDocEnd)
	require.True(t, ok, "%s has no %q", causesDocPath, causesDocEnd)
	want := causesDocTable()
	if *updateCausesDoc {
		require.NoError(t, os.WriteFile(causesDocPath, []byte(before+causesDocBegin+"\n"+want+causesDocEnd+after), 0o644))
		return
	}
	assert.Equal(t, want, strings.TrimSuffix(rest, causesDocEnd+after), "%s is not the table of causePatterns: go test ./internal/vllmcause -run TestCausesDoc -update-causes-doc", causesDocPath)

	// Every pattern compiles, belongs to a rule that is tried and names a
	// cause; every rule's pattern count is the table's.
	order := map[string]bool{}
	for _, r := range causeRuleOrder() {
		order[r] = true
	}
	n := 0
	for _, p := range causePatterns() {
		assert.True(t, order[p.rule], "pattern %q: rule %s is not in causeRuleOrder", p.re, p.rule)
		assert.Contains(t, knownCauses, p.cause(), p.rule)
		assert.True(t, p.where != "" || p.logs != nil, "pattern %q has no provenance", p.re)
		if p.kind() != "termination" {
			n++
		}
	}
	compiled := 0
	for _, r := range causeRules(nil) {
		compiled += len(r.log) + len(r.event)
	}
	assert.Equal(t, n, compiled, "patterns in the rules")
}
