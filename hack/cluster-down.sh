#!/usr/bin/env bash
# Stops a local control plane (SIGKILL: SIGTERM takes ~26 s and the state is
# thrown away anyway) and removes its state.
#
# Usage: hack/cluster-down.sh [--quiet] [NAME]. NAME is vllmctl (the default,
# .cluster/) or vllmctl-<suffix> (.cluster-<suffix>/), as for cluster-up.sh.
# Says nothing when that cluster was not running, or with --quiet.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
quiet=0; [ "${1:-}" = "--quiet" ] && { quiet=1; shift; }
name=${1:-vllmctl}
case $name in
  vllmctl) state=$root/.cluster ;;
  vllmctl-[a-z0-9]*) state=$root/.cluster-${name#vllmctl-} ;;
  *) echo "cluster name must be vllmctl or vllmctl-<suffix>, not $name" >&2; exit 2 ;;
esac
[ -d "$state" ] || exit 0
# kwokctl writes its pid files without a newline: read them one by one.
pids=""
for f in "$state"/kwok/clusters/*/pids/*.pid; do
  [ -f "$f" ] && pids="$pids $(tr -d ' \n' <"$f")"
done
# Also any component still running from this state directory. The trailing
# slash keeps .cluster/ from matching .cluster-b/'s processes.
pids="$pids $(pgrep -f -- "$state/" 2>/dev/null || true)"
was=0; [ -e "$state/kubeconfig" ] && was=1
for p in $pids; do kill -9 "$p" 2>/dev/null && was=1; done
for _ in $(seq 1 50); do
  alive=0
  for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ $alive = 0 ] && break
  sleep 0.1
done
rm -rf "$state/kwok" "$state/home" "$state/kubeconfig" "$state/kwok-config.yaml" "$state/create.log" "$state/start.log" \
  "$state/fleet-kubeconfig"
[ $quiet = 1 ] || [ $was = 0 ] || echo "local cluster $name stopped"
