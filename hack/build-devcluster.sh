#!/usr/bin/env bash
# Builds the multi-call control-plane binary of cmd/devcluster once and caches
# it outside the repo, keyed by a hash of that module's top-level sources
# (go.mod, go.sum, *.go), and the simulated vLLM engine vllm-sim
# (cmd/devcluster/vllmsim, a separate binary of the same module) keyed by a
# hash of go.mod, go.sum and vllmsim/*.go, so that a change to the simulator
# rebuilds only it. Prints a directory holding symlinks to both (etcd,
# kube-apiserver, ..., kubectl, kwok, kwokctl, vllm-sim).
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
simkey=$(cd "$src" && cat go.mod go.sum $(ls vllmsim/*.go | grep -v '_test\.go$') | sha256sum | cut -c1-16)
simout=$cache/vllm-sim/$simkey
if [ ! -x "$simout/vllm-sim" ]; then
  mkdir -p "$simout.tmp"
  echo "building vllm-sim into $simout" >&2
  (cd "$src" && go build -trimpath -ldflags "-s -w" -o "$simout.tmp/vllm-sim" ./vllmsim)
  rm -rf "$simout" && mv "$simout.tmp" "$simout"
fi
bin=$cache/bin/$key-$simkey
if [ ! -e "$bin/vllm-sim" ]; then
  mkdir -p "$bin.tmp.$$"
  for c in devcluster etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl; do
    ln -sf "$out/$c" "$bin.tmp.$$/$c"
  done
  ln -sf "$simout/vllm-sim" "$bin.tmp.$$/vllm-sim"
  rm -rf "$bin" && mv "$bin.tmp.$$" "$bin"
fi
echo "$bin"
