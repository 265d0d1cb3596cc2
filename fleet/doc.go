// Package fleet rolls one release out across many clusters in waves:
// `vllmctl fleet deploy|diff|status FILE`.
//
// A fleet file (see [Parse]) names the release, the chart and its values
// shared by every target, the targets (a kubeconfig context and a
// namespace each, with their own values overlays), the waves the targets
// are deployed in, and the policy: how many targets of a wave run at
// once, how long a finished wave is watched before the next starts, the
// gate command run between waves and what happens to the targets already
// changed when one fails.
//
// The [Runner] drives the waves. Each target is a [Target]: the full
// deploy pipeline of package release on one cluster (see [ReleaseTarget]),
// or a fake in tests. The records in each cluster are the fleet's state:
// there is no fleet state file, a second run skips the targets already up
// to date and continues where a stopped run ended.
//
// The targets are built here too: [File.ResolveTargets] checks each
// target's kubeconfig context and settles its namespace, [BuildTargets]
// makes a [ReleaseTarget] of each, with its deploy options (the shared
// values then the target's). This package never imports cobra:
// cmd/vllmctl parses the flags, opens the engine of each target's context
// and namespace (its kubeconfig factory and progress printer, an
// [EngineFunc]) and prints the [Result].
package fleet
