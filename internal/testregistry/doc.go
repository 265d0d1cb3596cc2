// Package testregistry runs the real parts the OCI chart tests need: a
// distribution registry (REGISTRY_BIN, built by hack/install-registry.sh)
// with optional basic auth and TLS, and Helm 4 (HELM_BIN, from
// hack/install-helm.sh) to push charts to it. Only tests import it.
package testregistry
