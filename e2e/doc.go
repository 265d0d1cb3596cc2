// Package e2e holds end-to-end tests that run against vllmctl's local
// control plane (real etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, with kwok simulating nodes and pods). They are built only
// with the e2e build tag and need VLLMCTL_E2E_KUBECONFIG (make e2e sets it
// after `make cluster`). Multi-cluster (fleet) tests use
// VLLMCTL_E2E_FLEET_KUBECONFIG: one kubeconfig with contexts local-a (that
// cluster) and local-b (a second one, `make cluster-b`); make e2e sets it too.
//
// The tests share the cluster. The top-level tests run one after the
// other (some run their cases as parallel subtests); the faults that
// disturb the whole cluster (stopping etcd, restarting the kube-apiserver)
// run last and alone, as subtests of TestDestructiveFaults, whatever the
// file names (see destructive_test.go). Before the run and at every
// newEnv, a control-plane component that is down is restarted or named
// (controlplane_test.go). order_test.go, built without the
// tag and needing no cluster, checks what that order rests on.
package e2e
