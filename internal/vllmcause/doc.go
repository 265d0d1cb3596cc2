// Package vllmcause names why a vLLM server failed, in vLLM's terms, and
// what to change.
//
// Kubernetes says only "Error, exit code 1" or "startup probe failed";
// most failed rollouts of an LLM server are one of a short list of causes
// its log names: GPU memory, KV cache, a gated model, /dev/shm, NCCL, a
// dtype, the tensor-parallel size, ... (see [Cause]). The classifier is a
// table of message patterns, each with its provenance (causes_table.go;
// docs/vllm-causes.md is generated from it), tried in order on the
// failing container's log, its last termination, the pod's events and the
// pod spec ([PodInput], [LogInput], [Classifier]); the first that matches
// decides the cause, the line it matched is the evidence, and its hints
// name the setting to change, quoting the values the pod runs with (the
// server's flags read from its spec, causes_spec.go). A cause no restart
// cures is [Cause.Decisive]. [FitHints] gives the same hints to the
// model-fit preflight's refusal.
//
// The fixtures are in testdata/causes; the classifier is scored on the
// real logs of the repository's testdata/reallogs. It imports only
// internal/vllm of the module: the rollout watcher (package wait), the
// record's types (internal/rollout) and the model-fit preflight import it.
package vllmcause
