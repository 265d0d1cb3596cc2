#!/usr/bin/env bash
# Installs the CNCF distribution registry once, into a cache directory outside
# the repo, and prints the path of the binary. The OCI chart tests start it on
# 127.0.0.1 and read that path from REGISTRY_BIN (the Makefile's unit target
# sets it). Needs only Go and the Go module proxy.
# Cold: ~5 minutes on 2 cores (it builds the registry from source with go install).
set -euo pipefail
version=v3.1.2
cache=${VLLMCTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vllmctl}
dir=$cache/registry-$version
if [ ! -x "$dir/registry" ]; then
  mkdir -p "$dir"
  echo "installing the distribution registry $version into $dir (cold: ~5 minutes)" >&2
  GOBIN=$dir GOFLAGS=-buildvcs=false go install \
    "github.com/distribution/distribution/v3/cmd/registry@$version"
fi
echo "$dir/registry"
