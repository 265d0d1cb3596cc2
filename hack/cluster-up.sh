#!/usr/bin/env bash
# Starts (or reuses) vllmctl's local control plane: real etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler built from Go
# modules, with kwok simulating GPU nodes and pod lifecycles. Writes the
# kubeconfig to .cluster/kubeconfig. Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
state=$root/.cluster
name=vllmctl
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
  "$root/hack/cluster-down.sh" --quiet
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
    --wait 60s >"$state/create.log" 2>&1 9>&- || { cat "$state/create.log" >&2; exit 1; }

  # kwokctl may exit 0 after a failed readiness wait: check ourselves.
  for _ in $(seq 1 60); do ready && break; sleep 1; done
  ready || { echo "kube-apiserver did not become ready; see $state/create.log and $state/kwok/clusters/$name/logs" >&2; exit 1; }
fi

kubectl --kubeconfig "$kubeconfig" apply --server-side --field-manager=devcluster -f "$cfg/nodes.yaml" >/dev/null
kubectl --kubeconfig "$kubeconfig" wait --for=condition=Ready node --all --timeout=60s >/dev/null
kubectl --kubeconfig "$kubeconfig" get nodes -o custom-columns='NAME:.metadata.name,READY:.status.conditions[?(@.type=="Ready")].status,GPU:.status.allocatable.nvidia\.com/gpu,CPU:.status.allocatable.cpu,MEMORY:.status.allocatable.memory'
cat <<MSG
local cluster is up. Use it with:
  export KUBECONFIG=$kubeconfig
  kubectl get nodes        # kubectl v1.37.2 from $bindir
Stop it with: make cluster-down
MSG
