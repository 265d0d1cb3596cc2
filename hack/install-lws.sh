#!/usr/bin/env bash
# Installs the LeaderWorkerSet (LWS) controller once, into a cache directory
# outside the repo, with its CRDs next to it, and prints the path of the
# binary. The e2e tests of LeaderWorkerSet releases (e2e/lws_test.go) apply
# the CRDs from the binary's directory (crds/), start the controller against
# the local cluster and read its path from LWS_BIN (the Makefile's e2e target
# sets it). Needs only Go and the Go module proxy.
# Cold: ~2-5 minutes on 2 cores (it builds the controller from its module source).
set -euo pipefail
version=v0.9.0
cache=${VLLMCTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vllmctl}
dir=$cache/lws-$version
if [ ! -x "$dir/lws-controller" ] || [ ! -f "$dir/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml" ]; then
  mkdir -p "$dir/crds"
  echo "installing the LeaderWorkerSet controller $version into $dir (cold: ~2-5 minutes)" >&2
  # `go install sigs.k8s.io/lws/cmd@version` asks the module proxy for the
  # module's version list (its deprecation), which the proxy may refuse: the
  # controller is built instead in a copy of the module's source, with its
  # own go.mod and go.sum (the same dependencies as `go install` would use).
  tmp=$(mktemp -d "$dir/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  src=$(cd "$tmp" && GOFLAGS= go mod download -json "sigs.k8s.io/lws@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src" ] || { echo "install-lws: go mod download sigs.k8s.io/lws@$version gave no source directory" >&2; exit 1; }
  cp -R "$src" "$tmp/src"
  chmod -R u+w "$tmp/src"
  (cd "$tmp/src" && GOFLAGS=-buildvcs=false GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$tmp/lws-controller" ./cmd)
  cp "$src"/config/crd/bases/*.yaml "$dir/crds/"
  chmod u+w "$dir"/crds/*.yaml
  mv "$tmp/lws-controller" "$dir/lws-controller"
fi
echo "$dir/lws-controller"
