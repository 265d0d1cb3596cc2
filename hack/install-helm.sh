#!/usr/bin/env bash
# Installs the Helm v4 CLI once, into a cache directory outside the repo, and
# prints the path of the binary. The charts package's Helm comparison test
# reads that path from HELM_BIN (the Makefile's test target sets it).
# Cold: ~4 minutes on 2 cores (it builds helm from source with go install).
set -euo pipefail
version=v4.3.1
cache=${VLLMCTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vllmctl}
dir=$cache/helm-$version
if [ ! -x "$dir/helm" ]; then
  mkdir -p "$dir"
  echo "installing helm $version into $dir (cold: ~4 minutes)" >&2
  # The version ldflag makes `helm version` (and .Capabilities.HelmVersion)
  # report $version, as release binaries do, instead of the bare "v4.3".
  GOBIN=$dir GOFLAGS=-buildvcs=false go install \
    -ldflags "-X helm.sh/helm/v4/internal/version.version=$version" \
    "helm.sh/helm/v4/cmd/helm@$version"
fi
echo "$dir/helm"
