#!/usr/bin/env bash
# Vendors the public charts of charts/testdata/corpus (the fidelity test's
# corpus, see charts/corpus_test.go) from bare git mirrors of their source
# repositories, at the commits named in charts/testdata/corpus/README.md.
# Only what rendering needs is copied: Chart.yaml, Chart.lock, values*,
# .helmignore, templates/, crds/, files/ and ci/ (CI value files); not
# READMEs, changelogs, unit tests or docs.
#
# usage: hack/vendor-corpus.sh PROM_GIT_DIR NGINX_GIT_DIR KSERVE_GIT_DIR
set -euo pipefail
prom=$1 nginx=$2 kserve=$3
prom_commit=cf408a290aec489277a94450bb3511432477a53a
nginx_commit=dbb11b92ddb77bee9c35e462479129354c84f939
kserve_commit=aaac4e294dae2c7b1aa1886447793f3aa1c30912
out=$(cd "$(dirname "$0")/.." && pwd)/charts/testdata/corpus

# copy GIT_DIR COMMIT SRC_PATH DEST_DIR
copy() {
  local git=$1 commit=$2 src=$3 dest=$4
  rm -rf "$dest"
  git --git-dir="$git" ls-tree -r --name-only "$commit" -- "$src" |
    while read -r f; do
      rel=${f#"$src"/}
      case $rel in
        Chart.yaml | Chart.lock | values.yaml | values.schema.json | .helmignore | \
          templates/* | crds/* | files/* | ci/*) ;;
        *) continue ;;
      esac
      mkdir -p "$dest/$(dirname "$rel")"
      git --git-dir="$git" cat-file blob "$commit:$f" >"$dest/$rel"
    done
}

for c in prometheus-adapter alertmanager kube-state-metrics prometheus-node-exporter \
  prometheus-pushgateway prometheus-blackbox-exporter prometheus-postgres-exporter \
  prometheus-redis-exporter prom-label-proxy; do
  copy "$prom" $prom_commit charts/$c "$out/$c"
done
# prometheus with its four dependencies (same repository, the versions of
# its Chart.lock) in its charts/ directory.
copy "$prom" $prom_commit charts/prometheus "$out/prometheus"
for d in alertmanager kube-state-metrics prometheus-node-exporter prometheus-pushgateway; do
  copy "$prom" $prom_commit charts/$d "$out/prometheus/charts/$d"
  rm -rf "$out/prometheus/charts/$d/ci"
done

copy "$nginx" $nginx_commit charts/ingress-nginx "$out/ingress-nginx"

for c in kserve-resources kserve-localmodel-resources kserve-llmisvc-resources \
  kserve-runtime-configs kserve-crd-minimal kserve-localmodel-crd; do
  copy "$kserve" $kserve_commit charts/$c "$out/$c"
done

git --git-dir="$prom" cat-file blob $prom_commit:LICENSE >"$out/LICENSE-prometheus-community-helm-charts"
git --git-dir="$nginx" cat-file blob $nginx_commit:LICENSE >"$out/LICENSE-kubernetes-ingress-nginx"
git --git-dir="$kserve" cat-file blob $kserve_commit:LICENSE >"$out/LICENSE-kserve"
