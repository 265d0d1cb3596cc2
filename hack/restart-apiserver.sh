#!/usr/bin/env bash
# restart-apiserver.sh: kill -9 the local cluster's kube-apiserver and start
# it again, as a crash or a control-plane upgrade would, for the e2e tests
# that check a rollout survives it.
#
# The running kube-apiserver is found through its pid file; it is restarted
# with the same command line, working directory and environment (read from
# /proc), detached (setsid nohup), its output appended to the same log, and
# its new pid written back to the pid file. The script returns once /readyz
# answers ok and the other components work again. While the API server is
# down the script holds the cluster lock (.cluster/lock, as
# hack/cluster-up.sh takes it), so a concurrent `make cluster` waits and then
# reuses the cluster instead of recreating it from scratch. Controller-manager,
# scheduler or kwok-controller processes that exit while the API server is
# down (a lost leader lease is fatal to them) are started again the same way.
#
# The other components' informers back off while the API server is away and
# can take a minute to act again; the script waits for that (a probe
# Deployment in a scratch namespace rolls out: ServiceAccount, Deployment and
# ReplicaSet controllers, scheduler and kwok all work) so that what runs next
# on the cluster is not hit by the lag. RESTART_PROBE=0 skips it.
#
# Environment:
#   VLLMCTL_CLUSTER_DIR  the kwok cluster directory (default:
#                        <repo>/.cluster/kwok/clusters/vllmctl)
#   RESTART_PAUSE        seconds the API server stays down (default 2)
#   READY_TIMEOUT        seconds to wait for /readyz (default 60)
#   RESTART_PROBE        1 (default): wait for the controllers, see above
#   PROBE_TIMEOUT        seconds to wait for the probe Deployment (default 180)
#   LOCK_TIMEOUT         seconds to wait for the cluster lock (default 120)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cluster=${VLLMCTL_CLUSTER_DIR:-$root/.cluster/kwok/clusters/vllmctl}
pause=${RESTART_PAUSE:-2}
ready_timeout=${READY_TIMEOUT:-60}
probe=${RESTART_PROBE:-1}
probe_timeout=${PROBE_TIMEOUT:-180}
lock_timeout=${LOCK_TIMEOUT:-120}
pids=$cluster/pids

log() { printf '%s restart-apiserver: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# alive PID NAME: PID is a running (not zombie) process whose executable is
# named NAME.
alive() {
	local pid=$1 name=$2 state exe
	[[ $pid =~ ^[0-9]+$ && -r /proc/$pid/stat ]] || return 1
	state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
	[[ $state != Z && $state != X ]] || return 1
	exe=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n1) || return 1
	[[ $(basename -- "$exe") == "$name" ]]
}

# snapshot NAME: save the command line, environment, working directory and
# log of component NAME (from its pid file) under $snap/NAME.*.
snap=$(mktemp -d)
trap 'rm -rf "$snap"' EXIT
snapshot() {
	local name=$1 pid
	pid=$(<"$pids/$name.pid") || return 1
	alive "$pid" "$name" || return 1
	cp "/proc/$pid/cmdline" "$snap/$name.cmdline"
	cp "/proc/$pid/environ" "$snap/$name.environ"
	readlink "/proc/$pid/cwd" >"$snap/$name.cwd"
	local out
	out=$(readlink "/proc/$pid/fd/2" 2>/dev/null || true)
	[[ $out == /* && -f $out ]] || out=$cluster/logs/$name.log
	printf '%s\n' "$out" >"$snap/$name.log"
	printf '%s\n' "$pid" >"$snap/$name.pid"
}

# start NAME: start component NAME from its snapshot, detached, and write its
# pid to its pid file.
start() {
	local name=$1 cwd out pid
	local -a args envs
	mapfile -d '' -t args <"$snap/$name.cmdline"
	mapfile -d '' -t envs <"$snap/$name.environ"
	cwd=$(<"$snap/$name.cwd")
	out=$(<"$snap/$name.log")
	# In a non-interactive shell the background child is no process group
	# leader, so setsid, nohup and env all exec: $! is the component's pid.
	# 9>&-: the component must not inherit (and hold) the cluster lock.
	(cd "$cwd" && exec setsid nohup env -i "${envs[@]}" "${args[@]}" >>"$out" 2>&1 </dev/null 9>&-) &
	pid=$!
	disown "$pid" 2>/dev/null || true
	for _ in $(seq 50); do
		alive "$pid" "$name" && break
		sleep 0.1
	done
	alive "$pid" "$name" || die "$name did not start (see $out)"
	# No newline: kwokctl (start cluster) reads the file as it is.
	printf '%s' "$pid" >"$pids/$name.pid"
	log "$name started, pid $pid"
}

[[ -d $pids ]] || die "no pid directory $pids: is the local cluster running (make cluster)?"

# The cluster lock of hack/cluster-up.sh (<state>/lock, <state> being three
# levels above the kwok cluster directory): held until the API server is
# back, so that nobody recreates the cluster meanwhile.
lockfile=$(cd "$cluster/../../.." && pwd)/lock
if [[ -e $lockfile ]]; then
	exec 9>>"$lockfile"
	flock -w "$lock_timeout" 9 || die "cluster lock $lockfile still taken after ${lock_timeout}s"
else
	log "warning: no cluster lock $lockfile: a concurrent make cluster may recreate the cluster"
fi

snapshot kube-apiserver || die "no running kube-apiserver in $pids/kube-apiserver.pid"
others=()
for c in kube-controller-manager kube-scheduler kwok-controller; do
	[[ -f $pids/$c.pid ]] && snapshot "$c" && others+=("$c")
done

old=$(<"$snap/kube-apiserver.pid")
port=$(tr '\0' '\n' <"$snap/kube-apiserver.cmdline" | sed -n 's/^--secure-port=//p' | tail -n1)
port=${port:-6443}

log "killing kube-apiserver pid $old (SIGKILL)"
kill -KILL "$old"
for _ in $(seq 100); do
	alive "$old" kube-apiserver || break
	sleep 0.1
done
alive "$old" kube-apiserver && die "kube-apiserver pid $old survived SIGKILL"
sleep "$pause"

start kube-apiserver

deadline=$((SECONDS + ready_timeout))
until [[ $(curl -sk --max-time 2 "https://127.0.0.1:$port/readyz" 2>/dev/null) == ok ]]; do
	((SECONDS < deadline)) || die "kube-apiserver not ready on port $port after ${ready_timeout}s"
	sleep 0.2
done
log "kube-apiserver ready on port $port"

# A component whose leader lease expired while the API server was down
# exits; give it a moment to do so, then start what is gone.
sleep 3
for c in "${others[@]}"; do
	was=$(<"$snap/$c.pid")
	# Only a component nobody else has restarted (its pid file unchanged).
	if ! alive "$was" "$c" && [[ $(<"$pids/$c.pid") == "$was" ]]; then
		log "$c exited while the API server was down"
		start "$c"
	fi
done
exec 9>&-

[[ $probe == 1 ]] || exit 0
if ! command -v kubectl >/dev/null; then
	log "warning: no kubectl: not waiting for the controllers to catch up"
	exit 0
fi
kc=(kubectl --kubeconfig "$cluster/kubeconfig.yaml" --request-timeout 10s)
ns=restart-probe-$(date +%s)-$$
probe_start=$SECONDS
cleanup_probe() { "${kc[@]}" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true; }
trap 'cleanup_probe; rm -rf "$snap"' EXIT
"${kc[@]}" create namespace "$ns" >/dev/null
deadline=$((SECONDS + probe_timeout))
until "${kc[@]}" -n "$ns" get serviceaccount default >/dev/null 2>&1; do
	((SECONDS < deadline)) || die "no default ServiceAccount in $ns after ${probe_timeout}s: the controller-manager did not recover"
	sleep 0.5
done
"${kc[@]}" -n "$ns" create deployment probe --image=registry.k8s.io/pause:3.10 >/dev/null
left=$((deadline - SECONDS))
((left > 0)) || left=1
"${kc[@]}" -n "$ns" rollout status deployment/probe --timeout "${left}s" >/dev/null ||
	die "probe Deployment in $ns not ready after ${probe_timeout}s: the controllers did not recover"
log "controllers caught up after $((SECONDS - probe_start))s"
