#!/usr/bin/env bash
# Starts (or reuses) vllmctl's local control plane: real etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler built from Go
# modules, with kwok simulating GPU nodes and pod lifecycles. Writes the
# kubeconfig to .cluster/kubeconfig. Idempotent.
#
# Usage: hack/cluster-up.sh [NAME]. NAME is vllmctl (the default, state in
# .cluster/) or vllmctl-<suffix> (a further cluster, state in
# .cluster-<suffix>/, e.g. vllmctl-b in .cluster-b/): same nodes and fault
# simulation, its own ports, lock and kwok state; several can run at once.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=${1:-vllmctl}
case $name in
  vllmctl) state=$root/.cluster ;;
  vllmctl-[a-z0-9]*) state=$root/.cluster-${name#vllmctl-} ;;
  *) echo "cluster name must be vllmctl or vllmctl-<suffix>, not $name" >&2; exit 2 ;;
esac
cfg=$root/cmd/devcluster/cluster
kubeconfig=$state/kubeconfig

bindir=$("$root/hack/build-devcluster.sh")
export PATH=$bindir:$PATH
mkdir -p "$state"

ready() {
  [ -f "$kubeconfig" ] && kubectl --kubeconfig "$kubeconfig" --request-timeout=3s get --raw /readyz >/dev/null 2>&1
}

# Serialise concurrent `make cluster` runs: kwokctl picks its ports at
# random and two creations at the same moment can pick the same ones. The
# lock's descriptor is closed for kwokctl, so the cluster's long-running
# processes do not inherit (and hold) the lock.
exec 9>"$state/lock"
flock 9

if ready; then
  echo "local cluster already running; kubeconfig: $kubeconfig"
else
  "$root/hack/cluster-down.sh" --quiet "$name"
  mkdir -p "$state/home" "$state/kwok"
  # One configuration stream: our kwokctl options, kwok's own node stages
  # (initialize + heartbeat; kwokctl adds no default stage once any Stage is
  # given), our pod stages (with the path of the fault classes' logs), and
  # the logs kwok serves for every other container.
  kwokdir=$(cd "$root/cmd/devcluster" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  [ -d "$kwokdir" ] || { echo "cannot find the sigs.k8s.io/kwok module sources" >&2; exit 1; }
  {
    cat "$cfg/kwokctl.yaml"
    echo "---"; cat "$kwokdir/kustomize/stage/node/fast/node-initialize.yaml"
    echo "---"; cat "$kwokdir/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml"
    echo "---"; sed "s|@LOGS@|$cfg/logs|g" "$cfg/stages.yaml"
    cat <<LOGS
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: sim-logs
spec:
  selector: {}
  logs:
  - logsFile: $cfg/logs/current.log
    previousLogsFile: $cfg/logs/previous.log
    follow: false
LOGS
  } > "$state/kwok-config.yaml"

  # Creations of different clusters (a second one, another checkout's) are
  # serialised too, by a lock shared through the cache: each would otherwise
  # pick its random ports while the other has not yet bound them.
  cache=${VLLMCTL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vllmctl}
  mkdir -p "$cache"
  exec 8>"$cache/cluster-create.lock"
  flock 8

  # kwokctl keeps its state under HOME/KWOK_WORKDIR: point both into .cluster
  # so it never edits the user's ~/.kube/config.
  HOME=$state/home KWOK_WORKDIR=$state/kwok KWOK_KUBE_VERSION=v1.37.2 KWOK_RUNTIME=binary \
  kwokctl --name "$name" --config "$state/kwok-config.yaml" create cluster \
    --runtime binary \
    --etcd-binary "$bindir/etcd" \
    --kube-apiserver-binary "$bindir/kube-apiserver" \
    --kube-controller-manager-binary "$bindir/kube-controller-manager" \
    --kube-scheduler-binary "$bindir/kube-scheduler" \
    --kwok-controller-binary "$bindir/kwok" \
    --kubeconfig "$kubeconfig" \
    --wait 60s >"$state/create.log" 2>&1 8>&- 9>&- || { cat "$state/create.log" >&2; exit 1; }

  # kwokctl may exit 0 after a failed readiness wait: check ourselves.
  for _ in $(seq 1 60); do ready && break; sleep 1; done
  ready || { echo "kube-apiserver did not become ready; see $state/create.log and $state/kwok/clusters/$name/logs" >&2; exit 1; }
  exec 8>&-
fi

kubectl --kubeconfig "$kubeconfig" apply --server-side --field-manager=devcluster -f "$cfg/nodes.yaml" >/dev/null
kubectl --kubeconfig "$kubeconfig" wait --for=condition=Ready node --all --timeout=60s >/dev/null
kubectl --kubeconfig "$kubeconfig" get nodes -o custom-columns='NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,GPU:.status.allocatable.nvidia\.com/gpu,CPU:.status.allocatable.cpu,MEMORY:.status.allocatable.memory'
down="make cluster-down"; [ "$name" = vllmctl ] || down="hack/cluster-down.sh $name (make cluster-down stops every cluster)"
cat <<MSG
local cluster $name is up. Use it with:
  export KUBECONFIG=$kubeconfig
  kubectl get nodes        # kubectl v1.37.2 from $bindir
Stop it with: $down
MSG
