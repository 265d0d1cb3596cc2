// Package e2e holds end-to-end tests that run against vllmctl's local
// control plane (real etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, with kwok simulating nodes and pods). They are built only
// with the e2e build tag and need VLLMCTL_E2E_KUBECONFIG (make e2e sets it
// after `make cluster`).
package e2e
