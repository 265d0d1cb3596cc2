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
// This package never imports cobra: cmd/vllmctl builds the targets (an
// Engine per kubeconfig context and namespace) and prints the [Result].
package fleet
