// Package canary owns a deploy's canary, without the engine: the options
// (--canary N|P%, --canary-hold, --canary-gate, --canary-gate-timeout,
// --canary-max-restarts) and their checks; which Deployments a canary
// holds, decided against the deployed revision and never the live object
// (Targets), and the transient strategy that holds them (Objects,
// Annotation, MinReadySeconds); the phase machine (Machine: starting, the
// serve check, holding with the analysis, the gate, promoting), each step's
// I/O a function the engine supplies, so that it runs on a fake clock in
// tests; the gate command in a process group of its own (RunGate, and
// RunGateCommand for fleet's gate between waves); the canaries left behind
// (Leftover); the analysis targets of a canary (AnalysisTargets,
// GroupAnalysisTargets).
//
// It imports release/analysis, release/cluster, release/storage, wait,
// charts and internal/*, never release: release.Engine wires it to its
// clients, its watcher and its progress (release/canary_deploy.go).
package canary
