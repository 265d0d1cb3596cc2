#!/usr/bin/env bash
# Builds the multi-call control-plane binary of cmd/devcluster once and caches
# it outside the repo, keyed by a hash of that module's sources. Prints the
# directory that holds the binary and its symlinks (etcd, kube-apiserver, ...).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/cmd/devcluster
cache=${VLLMCTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vllmctl}
key=$(cd "$src" && cat go.mod go.sum *.go | sha256sum | cut -c1-16)
out=$cache/devcluster/$key
if [ ! -x "$out/devcluster" ]; then
  mkdir -p "$out.tmp"
  echo "building control-plane components into $out (cold: ~10 minutes on 2 cores)" >&2
  kv=v1.37.2
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $pkg.gitVersion=$kv -X $pkg.gitMajor=1 -X $pkg.gitMinor=37 -X $pkg.gitTreeState=clean"
  done
  (cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$out.tmp/devcluster" .)
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl; do
    ln -sf devcluster "$out.tmp/$c"
  done
  rm -rf "$out" && mv "$out.tmp" "$out"
fi
echo "$out"
