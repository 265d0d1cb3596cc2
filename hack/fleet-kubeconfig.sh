#!/usr/bin/env bash
# Writes one kubeconfig holding two local clusters, for the multi-cluster
# (fleet) tests: context local-a is the first cluster, local-b the second,
# current context local-a. Certificates are embedded (kubectl --flatten), so
# the file stands alone; it must be rewritten whenever either cluster is
# recreated (make cluster-b and make e2e do).
#
#   FLEET_A_KUBECONFIG  the first cluster's kubeconfig (default .cluster/kubeconfig)
#   FLEET_B_KUBECONFIG  the second's (default .cluster-b/kubeconfig)
#   FLEET_KUBECONFIG    the output (default .cluster-b/fleet-kubeconfig)
#
# Each input's current context is taken (--minify) and its cluster, user and
# context are all renamed local-a / local-b, so the inputs may use the same
# names. Fails unless both API servers answer through the new file.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
a=${FLEET_A_KUBECONFIG:-$root/.cluster/kubeconfig}
b=${FLEET_B_KUBECONFIG:-$root/.cluster-b/kubeconfig}
out=${FLEET_KUBECONFIG:-$root/.cluster-b/fleet-kubeconfig}
kubectl=$("$root/hack/build-devcluster.sh")/kubectl
command -v jq >/dev/null || { echo "fleet-kubeconfig needs jq" >&2; exit 1; }
for f in "$a" "$b"; do
  [ -f "$f" ] || { echo "no kubeconfig $f (is that cluster up? make cluster / make cluster-b)" >&2; exit 1; }
done

# One context's cluster, user and context, renamed to $2, as JSON.
one() {
  "$kubectl" --kubeconfig "$1" config view --minify --flatten -o json |
    jq --arg n "$2" '{
      clusters: [.clusters[0] | .name = $n],
      users: [.users[0] | .name = $n],
      contexts: [.contexts[0] | .name = $n | .context.cluster = $n | .context.user = $n]
    }'
}
mkdir -p "$(dirname "$out")"
tmp=$(mktemp "$(dirname "$out")/.fleet-kubeconfig.XXXXXX")
trap 'rm -f "$tmp" "$tmp.json"' EXIT
jq -s '{apiVersion: "v1", kind: "Config", preferences: {}, "current-context": "local-a",
        clusters: (.[0].clusters + .[1].clusters), users: (.[0].users + .[1].users),
        contexts: (.[0].contexts + .[1].contexts)}' \
  <(one "$a" local-a) <(one "$b" local-b) >"$tmp.json"
# Back through kubectl: YAML, and a check that kubectl reads it.
"$kubectl" --kubeconfig "$tmp.json" config view --flatten >"$tmp"
chmod 600 "$tmp"
for c in local-a local-b; do
  "$kubectl" --kubeconfig "$tmp" --context "$c" --request-timeout=5s get --raw /readyz >/dev/null ||
    { echo "context $c of the fleet kubeconfig does not answer" >&2; exit 1; }
done
mv "$tmp" "$out"
echo "fleet kubeconfig (contexts local-a, local-b; current local-a): $out"
