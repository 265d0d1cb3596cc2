#!/usr/bin/env bash
# make demo: the local cluster, a good deploy of the built-in vllm chart, then
# an upgrade to an image that runs out of GPU memory (the local cluster's
# fault-gpumem class), which vllmctl catches, diagnoses (cause gpu-oom, the
# log line, the settings to change) and rolls back on its own, with how long
# detection and rollback took. Idempotent: each run starts from a fresh
# namespace.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

ns=${DEMO_NAMESPACE:-vllmctl-demo}
rel=chat
good=v0.11.0
bad=v0.11.1-fault-gpumem
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then bold=$'\e[1m' reset=$'\e[0m'; else bold='' reset=''; fi
step() { printf '\n%s==> %s%s\n' "$bold" "$*" "$reset"; }
show() { printf '%s$ %s%s\n' "$bold" "$*" "$reset"; }

step "local cluster (make cluster; the first run builds it, ~10 minutes)"
make --no-print-directory cluster
export KUBECONFIG=$root/.cluster/kubeconfig
kubectl=$(hack/build-devcluster.sh)/kubectl

step "build bin/vllmctl"
go build -o bin/vllmctl ./cmd/vllmctl
go build -o "$tmp/demoprogress" ./hack/demoprogress
vllmctl() { "$root/bin/vllmctl" "$@"; }

if "$kubectl" get namespace "$ns" >/dev/null 2>&1; then
  step "delete namespace $ns left by an earlier run"
  "$kubectl" delete namespace "$ns" --wait=true --timeout=180s
fi

flags=(-n "$ns" -f hack/demo-values.yaml)

step "deploy $rel at $good: 2 replicas, 1 GPU each"
show vllmctl deploy $rel "${flags[@]}" --create-namespace --set image.tag=$good
vllmctl deploy $rel "${flags[@]}" --create-namespace --set image.tag=$good
show vllmctl history $rel -n "$ns"
vllmctl history $rel -n "$ns"

step "upgrade to $bad: GPU memory runs out; the crash is caught, diagnosed and rolled back (exit code 3 expected)"
show vllmctl deploy $rel "${flags[@]}" --set image.tag=$bad --progress json "   # JSON progress, shown as plain lines"
# JSON progress is kept for the timings below and shown as plain lines.
set +e
vllmctl deploy $rel "${flags[@]}" --set image.tag=$bad --progress json 2>&1 >"$tmp/result" |
  tee "$tmp/progress.jsonl" | "$tmp/demoprogress" render
codes=("${PIPESTATUS[@]}")
set -e
cat "$tmp/result"
if [ "${codes[0]}" -ne 3 ]; then
  echo "demo: vllmctl deploy exited ${codes[0]}, want 3 (failed and rolled back)" >&2
  exit 1
fi
if [ "${codes[1]}" -ne 0 ] || [ "${codes[2]}" -ne 0 ]; then
  echo "demo: rendering the progress failed" >&2
  exit 1
fi
if ! grep -q '^  cause: *gpu-oom$' "$tmp/result" || ! grep -q -- '--gpu-memory-utilization' "$tmp/result"; then
  echo "demo: the diagnosis does not name the cause gpu-oom and its setting" >&2
  exit 1
fi
echo "vllmctl deploy exited 3: the rollout failed and the previous good revision is serving"

step "history and status after the rollback"
show vllmctl history $rel -n "$ns"
vllmctl history $rel -n "$ns"
show vllmctl status $rel -n "$ns"
vllmctl status $rel -n "$ns"

step "how long it took"
"$tmp/demoprogress" timings <"$tmp/progress.jsonl"
printf '\nThe release stays in namespace %s. Look around with:\n' "$ns"
printf '  export KUBECONFIG=%s\n  bin/vllmctl wait %s -n %s      # exit 0: the rolled-back revision is healthy\n' "$KUBECONFIG" "$rel" "$ns"
