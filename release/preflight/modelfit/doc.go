// Package modelfit is vllmctl's model-fit preflight: before a release is
// applied, for every container that runs a vLLM OpenAI server (`vllm
// serve MODEL`, `python -m vllm.entrypoints.openai.api_server`, or the
// built-in chart's image entrypoint with `--model`), it computes whether
// the model can fit the GPUs its pods may be placed on, and refuses
// (exit code 2, cause gpu-oom or kv-cache) what cannot.
//
// The package owns:
//
//   - reading the model's config.json and checkpoint index ([Source]:
//     --model-config FILE, a local directory, or the Hugging Face Hub API
//     at HF_ENDPOINT with HF_TOKEN, bounded in time and size); a config
//     that cannot be read skips the check with one line, never an error;
//   - what a config implies ([Config]: layers, attention and KV heads,
//     head dim, MoE experts, MLA latent sizes, sliding-window layers,
//     dtype and quantization) and the arithmetic ([Fit]: weight bytes per
//     GPU, KV-cache bytes per token per GPU, the activation reserve and
//     the verdict, with a documented grey zone that only warns);
//   - finding the vLLM servers of a render and their settings from each
//     pod template's command, args and env ([Servers], read by
//     internal/vllm.ContainerCommand, the reader the failure hints use
//     too), not from chart values, so that third-party charts are covered;
//   - the GPU memory per device of the nodes the pods may use (GPU
//     Feature Discovery's nvidia.com/gpu.memory label, MiB), or an
//     override;
//   - the check itself, [Check], its [Report] and its refusal, [Error]
//     (ExitCode 2), whose hints are the ones a rollout that failed with
//     the same cause gives (vllmcause.FitHints).
//
// Files: config.go (config.json), weights.go (parameter and weight
// bytes), fit.go (the arithmetic and verdicts), source.go (where a config
// is read from), server.go (the vLLM servers of a render),
// nodes.go (GPU memory of the candidate nodes), check.go (the entry point,
// the report and the refusal).
//
// The method and its limits are in docs/model-fit.md.
package modelfit
