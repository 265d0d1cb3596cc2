# vllmctl — see README.md. Cached tools (control-plane binary, helm, the
# distribution registry, the LeaderWorkerSet controller, Prometheus) live outside the
# repo in $(CACHE), keyed by version.
SHELL := /bin/bash
CACHE ?= $(or $(VLLMCTL_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/vllmctl)
export VLLMCTL_CACHE := $(CACHE)
KUBECONFIG_E2E := $(CURDIR)/.cluster/kubeconfig
# The second local cluster (vllmctl-b, state in .cluster-b/) and the fleet
# kubeconfig holding both as contexts local-a and local-b; FLEET_A_KUBECONFIG
# picks the local-a side (default: this checkout's first cluster).
FLEET_KUBECONFIG := $(CURDIR)/.cluster-b/fleet-kubeconfig
FLEET_A_KUBECONFIG ?= $(KUBECONFIG_E2E)
export FLEET_A_KUBECONFIG
GO ?= go
GOTESTFLAGS ?=
# RACE runs the unit tests and the e2e package under the race detector
# (cgo: gcc); `make test RACE=` runs them without it.
RACE ?= -race
# E2E_PARALLEL is how many e2e tests that share the cluster run at once
# (e2e/share_test.go): the others run alone, before them.
E2E_PARALLEL ?= 5

.PHONY: all build test unit fuzz e2e lint cluster cluster-b fleet-kubeconfig cluster-down helm registry lws prometheus demo bench bench-peers clean

all: build

# A static binary, as kubectl's releases: without cgo the linker does not
# export every symbol for Go plugins (kustomize, under cli-runtime, imports
# "plugin"), which keeps ~20 MiB of the binary out of every run's memory.
build:
	CGO_ENABLED=0 $(GO) build -ldflags '-s -w' -o bin/vllmctl ./cmd/vllmctl

## test: unit tests (incl. the helm comparison and the OCI registry tests) and the e2e tests on the local cluster
test: lint unit fuzz e2e

unit: helm registry
	HELM_BIN=$$(hack/install-helm.sh) REGISTRY_BIN=$$(hack/install-registry.sh) $(GO) test $(RACE) $(GOTESTFLAGS) ./...
	cd cmd/devcluster && $(GO) vet ./vllmsim/ && $(GO) test $(GOTESTFLAGS) ./vllmsim/

## fuzz: each fuzz target for a short fixed time (seeds also run as unit tests)
FUZZTIME ?= 5s
FUZZ_TARGETS = FuzzSetValues:./charts/ FuzzParseDocument:./charts/ FuzzDecode:./release/storage/ FuzzParseManifest:./release/cluster/
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $${t%%:*} ($(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) -parallel 2 $${t##*:}; \
	done

e2e: cluster cluster-b helm registry lws prometheus
	FLEET_KUBECONFIG=$(FLEET_KUBECONFIG) hack/fleet-kubeconfig.sh
	VLLMCTL_RELEASE_TEST_KUBECONFIG=$(KUBECONFIG_E2E) $(GO) test -count=1 -run TestStoreContract $(GOTESTFLAGS) ./release/storage/
	VLLMCTL_E2E_KUBECONFIG=$(KUBECONFIG_E2E) VLLMCTL_E2E_FLEET_KUBECONFIG=$(FLEET_KUBECONFIG) HELM_BIN=$$(hack/install-helm.sh) REGISTRY_BIN=$$(hack/install-registry.sh) \
	  LWS_BIN=$$(hack/install-lws.sh) PROMETHEUS_BIN=$$(hack/install-prometheus.sh) KUBECTL_BIN=$$(hack/build-devcluster.sh)/kubectl $(GO) test $(RACE) -tags e2e -count=1 -p 1 -parallel $(E2E_PARALLEL) -timeout 40m $(GOTESTFLAGS) ./e2e/...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...

## cluster: start (or reuse) the local control plane; kubeconfig in .cluster/kubeconfig
cluster:
	hack/cluster-up.sh

## cluster-b: start (or reuse) a second local control plane, vllmctl-b (kubeconfig in .cluster-b/kubeconfig),
## and, when the first cluster's kubeconfig exists, write the fleet kubeconfig
cluster-b:
	hack/cluster-up.sh vllmctl-b
	@if [ -f "$(FLEET_A_KUBECONFIG)" ]; then FLEET_KUBECONFIG=$(FLEET_KUBECONFIG) hack/fleet-kubeconfig.sh || \
	  echo "fleet kubeconfig not written: the first cluster ($(FLEET_A_KUBECONFIG)) does not answer; make cluster fleet-kubeconfig"; \
	else echo "no first cluster ($(FLEET_A_KUBECONFIG)): make cluster fleet-kubeconfig writes the fleet kubeconfig"; fi

## fleet-kubeconfig: .cluster-b/fleet-kubeconfig, both local clusters as contexts local-a (current) and local-b
fleet-kubeconfig: cluster-b
	FLEET_KUBECONFIG=$(FLEET_KUBECONFIG) hack/fleet-kubeconfig.sh

## cluster-down: stop both local clusters
cluster-down:
	hack/cluster-down.sh vllmctl
	hack/cluster-down.sh vllmctl-b

helm:
	@hack/install-helm.sh >/dev/null

## registry: the distribution registry the OCI chart tests start (built from its Go module)
registry:
	@hack/install-registry.sh >/dev/null

## lws: the LeaderWorkerSet controller and its CRDs the LWS e2e tests start (built from its Go module)
lws:
	@hack/install-lws.sh >/dev/null

## prometheus: the Prometheus server the analysis e2e tests start against the local cluster (built from its Go module)
prometheus:
	@hack/install-prometheus.sh >/dev/null

## demo: local cluster, a good deploy, a crashing upgrade caught and rolled back (hack/demo.sh)
demo:
	hack/demo.sh

## bench: rollback latency and API requests per deploy on the local cluster (e2e/bench_test.go)
BENCH = VLLMCTL_E2E_KUBECONFIG=$(KUBECONFIG_E2E) $(GO) test -tags e2e -count=1 -run '^$$' -timeout 30m
bench: cluster
	$(BENCH) -bench '^BenchmarkFailureToRollback$$' -benchtime 5x ./e2e/
	$(BENCH) -bench '^BenchmarkDeployRequests$$' -benchtime 1x ./e2e/

## bench-peers: the vllmctl binary next to kubectl and Helm 4 on the local cluster (hack/benchpeers);
## BENCH_OUT=file.json also writes the figures as JSON, BENCH_QUICK=1 is a quick pass
bench-peers: cluster helm build
	$(GO) run ./hack/benchpeers -kubeconfig $(KUBECONFIG_E2E) -vllmctl bin/vllmctl \
		-kubectl "$$(hack/build-devcluster.sh)/kubectl" -helm "$$(hack/install-helm.sh)" $(BENCHFLAGS)

clean:
	rm -rf bin
