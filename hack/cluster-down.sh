#!/usr/bin/env bash
# Stops vllmctl's local control plane (SIGKILL: SIGTERM takes ~26 s and the
# state is thrown away anyway) and removes its state.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
state=$root/.cluster
quiet=0; [ "${1:-}" = "--quiet" ] && quiet=1
pids=$(cat "$state"/kwok/clusters/*/pids/*.pid 2>/dev/null || true)
# Also any component still running from this state directory.
pids="$pids $(pgrep -f -- "$state/" 2>/dev/null || true)"
for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
for _ in $(seq 1 50); do
  alive=0
  for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ $alive = 0 ] && break
  sleep 0.1
done
rm -rf "$state/kwok" "$state/home" "$state/kubeconfig" "$state/kwok-config.yaml" "$state/create.log"
[ $quiet = 1 ] || echo "local cluster stopped"
