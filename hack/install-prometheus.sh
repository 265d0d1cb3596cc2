#!/usr/bin/env bash
# Installs Prometheus once, into a cache directory outside the repo, and
# prints the path of the binary. The Prometheus e2e tests (e2e/prometheus_test.go)
# start it against the local cluster and read that path from PROMETHEUS_BIN
# (the Makefile's e2e target sets it). Needs only Go and the Go module proxy.
#
# Built from its Go module (github.com/prometheus/prometheus, whose v0.3xx.y
# module versions are the v3.xx.y releases) with go install: without the web
# UI's assets (the default without the builtinassets tag: the UI pages are
# absent, the HTTP API is whole) and with only the service discoveries the
# tests use (the remove_all_sd tag drops the cloud ones; static, file and
# HTTP SD are always in; Kubernetes SD is added back with enable_kubernetes_sd).
# Cold: ~3.5 minutes of CPU (29 minutes wall measured on 2 busy shared cores).
set -euo pipefail
version=v0.316.0 # = Prometheus v3.16.0
release=3.16.0
cache=${VLLMCTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vllmctl}
dir=$cache/prometheus-$version
if [ ! -x "$dir/prometheus" ]; then
  mkdir -p "$dir"
  echo "installing prometheus $version into $dir (cold: several minutes)" >&2
  # The version ldflag makes `prometheus --version` and the build-info API
  # report the release it is (v3.16.0 for v0.316.0) instead of nothing.
  GOBIN=$dir GOFLAGS=-buildvcs=false go install -tags remove_all_sd,enable_kubernetes_sd \
    -ldflags "-X github.com/prometheus/common/version.Version=$release" \
    "github.com/prometheus/prometheus/cmd/prometheus@$version"
fi
echo "$dir/prometheus"
