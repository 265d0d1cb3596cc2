#!/usr/bin/env bash
# Starts (or reuses) vllmctl's local control plane: real etcd,
# kube-apiserver, kube-controller-manager and kube-scheduler built from Go
# modules, with kwok simulating GPU nodes and pod lifecycles. Writes the
# kubeconfig to .cluster/kubeconfig. Idempotent.
#
# A running cluster is reused when every component is up: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kwok-controller
# and vllm-sim, the simulated vLLM engine that serves the OpenAI API of the
# built-in chart's pods through their port-forward (the process named by
# its pid file runs, and its health endpoint answers).
# A component that is down is started again (kwokctl start cluster) and the
# script says which; when that does not bring the cluster back it is
# recreated, as when nothing runs.
#
# Usage: hack/cluster-up.sh [--repair] [NAME]. NAME is vllmctl (the default,
# state in .cluster/) or vllmctl-<suffix> (a further cluster, state in
# .cluster-<suffix>/, e.g. vllmctl-b in .cluster-b/): same nodes and fault
# simulation, its own ports, lock and kwok state; several can run at once.
# --repair (the e2e tests' check between tests) only restarts components
# that are down: it never creates or recreates the cluster, exits 1 when it
# cannot bring it back and leaves the nodes alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
repair_only=0; [ "${1:-}" = "--repair" ] && { repair_only=1; shift; }
name=${1:-vllmctl}
case $name in
  vllmctl) state=$root/.cluster ;;
  vllmctl-[a-z0-9]*) state=$root/.cluster-${name#vllmctl-} ;;
  *) echo "cluster name must be vllmctl or vllmctl-<suffix>, not $name" >&2; exit 2 ;;
esac
cfg=$root/cmd/devcluster/cluster
kubeconfig=$state/kubeconfig
kdir=$state/kwok/clusters/$name
# The components kwokctl starts, and ours (started by this script, pid file
# next to kwokctl's).
kwok_components="etcd kube-apiserver kube-controller-manager kube-scheduler kwok-controller"
components="$kwok_components vllm-sim"

bindir=$("$root/hack/build-devcluster.sh")
export PATH=$bindir:$PATH
mkdir -p "$state"

ready() {
  [ -f "$kubeconfig" ] && kubectl --kubeconfig "$kubeconfig" --request-timeout=3s get --raw /readyz >/dev/null 2>&1
}

# kwokctl for this cluster's state (HOME and KWOK_WORKDIR inside it, so it
# never edits the user's ~/.kube/config); the locks are not inherited by
# the components it starts.
kwokctl_() {
  HOME=$state/home KWOK_WORKDIR=$state/kwok KWOK_KUBE_VERSION=v1.37.2 KWOK_RUNTIME=binary \
    kwokctl --name "$name" "$@" 8>&- 9>&-
}

# pid_of NAME: the pid in component NAME's pid file.
pid_of() {
  local pid
  pid=$(tr -d ' \n' 2>/dev/null <"$kdir/pids/$1.pid") || return 1
  [[ $pid =~ ^[0-9]+$ ]] && echo "$pid"
}

# alive NAME: component NAME's pid file names a running (not zombie) process
# whose executable is NAME.
alive() {
  local pid state exe
  pid=$(pid_of "$1") || return 1
  state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ $state != Z && $state != X ]] || return 1
  exe=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n1) || return 1
  [[ $(basename -- "$exe") == "$1" ]]
}

# arg NAME FLAG: the value of --FLAG on component NAME's command line.
arg() {
  local pid
  pid=$(pid_of "$1") || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" | sed -n "s/^--$2=//p" | tail -n1
}

# healthy NAME: component NAME's health endpoint answers ok (etcd's
# /health, the kube-apiserver's /readyz, the controller-manager's and the
# scheduler's /healthz on their secure ports, kwok's /healthz on its server
# address).
healthy() {
  local url
  # Without curl only the processes are checked (and the API server).
  command -v curl >/dev/null || [ "$1" = kube-apiserver ] || return 0
  case $1 in
    etcd) url=$(arg etcd listen-client-urls | cut -d, -f1)/health ;;
    kube-apiserver) ready; return ;;
    kube-controller-manager|kube-scheduler) url=https://127.0.0.1:$(arg "$1" secure-port)/healthz ;;
    kwok-controller) url=http://$(arg kwok-controller server-address)/healthz ;;
    vllm-sim) url=http://$(cat "$kdir/vllm-sim.addr" 2>/dev/null)/healthz ;;
  esac
  curl -sk --max-time 5 "$url" 2>/dev/null | grep -Eq '^ok$|"health": *"true"'
}

# down: the components that do not run.
down() {
  local c out=""
  for c in $components; do alive "$c" || out="$out $c"; done
  echo $out
}

# unhealthy [TRIES]: the running components whose health endpoint does not
# answer ok, asked up to TRIES times 2 s apart (a busy machine answers late).
unhealthy() {
  local tries=${1:-5} c out i
  for i in $(seq 1 "$tries"); do
    out=""
    for c in $components; do healthy "$c" || out="$out $c"; done
    [ -z "$out" ] && return 0
    [ "$i" = "$tries" ] || sleep 2
  done
  echo $out
}

# start_sim: start vllm-sim (the simulated vLLM engine, see
# cmd/devcluster/vllmsim) in the background, its pid file next to
# kwokctl's, its log in the cluster's logs directory, its health address in
# vllm-sim.addr.
start_sim() {
  rm -f "$kdir/vllm-sim.addr"
  mkdir -p "$kdir/pids" "$kdir/logs"
  nohup "$bindir/vllm-sim" --kubeconfig "$kubeconfig" --address-file "$kdir/vllm-sim.addr" \
    </dev/null >>"$kdir/logs/vllm-sim.log" 2>&1 8>&- 9>&- &
  printf '%s' "$!" >"$kdir/pids/vllm-sim.pid"
}

# restart COMPONENT...: start the given components again (their pid files
# removed first: kwokctl takes any live pid, even a reused one, for the
# component), and wait for all to run and answer. 1 when they do not.
restart() {
  local c pid sim=0 kw=""
  for c in "$@"; do
    alive "$c" && kill -9 "$(pid_of "$c")" 2>/dev/null
    rm -f "$kdir/pids/$c.pid"
    if [ "$c" = vllm-sim ]; then sim=1; else kw="$kw $c"; fi
  done
  [ -n "$kw" ] || { restart_sim "$@"; return; }
  # kwokctl compares pid files as they are; the e2e tests' restarts may
  # have written one with a trailing newline: rewrite the others plainly.
  for c in $kwok_components; do
    pid=$(pid_of "$c") && printf '%s' "$pid" >"$kdir/pids/$c.pid"
  done
  kwokctl_ start cluster >>"$state/start.log" 2>&1 || { echo "kwokctl start cluster failed; see $state/start.log" >&2; return 1; }
  sleep 2 # a component that cannot start (a port taken) exits at once
  for _ in $(seq 1 60); do ready && break; sleep 1; done
  [ $sim = 0 ] || start_sim
  local gone; gone=$(down)
  [ -z "$gone" ] || { echo "still down after the restart: $gone (logs: $kdir/logs)" >&2; return 1; }
  local sick; sick=$(unhealthy 15)
  [ -z "$sick" ] || { echo "not healthy after the restart: $sick (logs: $kdir/logs)" >&2; return 1; }
  echo "local cluster $name: restarted $*"
}

# restart_sim: start vllm-sim again (already stopped by restart) and wait
# for it to run and answer.
restart_sim() {
  start_sim
  sleep 1
  alive vllm-sim || { echo "still down after the restart: vllm-sim (log: $kdir/logs/vllm-sim.log)" >&2; return 1; }
  local sick; sick=$(unhealthy 15)
  [ -z "$sick" ] || { echo "not healthy after the restart: $sick (logs: $kdir/logs)" >&2; return 1; }
  echo "local cluster $name: restarted $*"
}

# heal: the cluster's components all run and answer, after restarting
# those that were down (or did not answer). 1 when that failed.
heal() {
  [ -f "$kubeconfig" ] && [ -d "$kdir/pids" ] || return 1
  local gone sick
  gone=$(down)
  if [ -n "$gone" ]; then
    for c in $gone; do echo "local cluster $name: $c is not running (pid file $kdir/pids/$c.pid): restarting it"; done
    restart $gone || return 1
  fi
  sick=$(unhealthy 5)
  if [ -n "$sick" ]; then
    # The API server first: the others' health depends on it.
    for c in $sick; do echo "local cluster $name: $c runs but its health endpoint does not answer: restarting it"; done
    restart $sick || return 1
  fi
}

# Serialise concurrent `make cluster` runs: kwokctl picks its ports at
# random and two creations at the same moment can pick the same ones. The
# lock's descriptor is closed for kwokctl, so the cluster's long-running
# processes do not inherit (and hold) the lock.
exec 9>"$state/lock"
flock 9

if heal; then
  echo "local cluster $name already running; kubeconfig: $kubeconfig"
elif [ $repair_only = 1 ]; then
  echo "local cluster $name: could not bring its components back (hack/cluster-up.sh $name recreates it)" >&2
  exit 1
else
  [ -f "$kubeconfig" ] && echo "local cluster $name cannot be brought back: recreating it"
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
  start_sim
  for _ in $(seq 1 30); do healthy vllm-sim && break; sleep 1; done
  healthy vllm-sim || { echo "vllm-sim did not become healthy; see $kdir/logs/vllm-sim.log" >&2; exit 1; }
fi
[ $repair_only = 0 ] || exit 0

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
