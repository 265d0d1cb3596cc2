//go:build e2e

package e2e

import "testing"

// TestDestructiveFaults runs the fault scenarios that disturb the whole
// shared cluster, not only the release under test, one after the other
// and after every other test of the package, whatever the file names, the
// order of declarations or -shuffle.
//
// The order rests on t.Parallel and on the cluster share (share_test.go):
// a top-level test that calls t.Parallel waits until every sequential
// top-level test (with its subtests) has returned, and holdClusterAlone
// then waits until every test that shares the cluster (shareCluster) has
// returned, and keeps the others out while the scenarios run. No other
// top-level test calls t.Parallel itself (TestParallelTestsShareTheCluster
// in order_test.go checks it). The scenarios themselves run in the
// order listed, as sequential subtests: the kube-apiserver restart, etcd
// stopped, kube-controller-manager killed mid-deploy (the rollout fails
// ControllerStalled), then killed again and brought back by
// hack/cluster-up.sh.
//
// -run selects them as subtests: -run TestDestructiveFaults runs all,
// -run TestDestructiveFaults/EtcdStopped one of them.
func TestDestructiveFaults(t *testing.T) {
	t.Parallel()
	holdClusterAlone(t)
	// Start from a whole control plane, then leave the components to the
	// scenarios, which stop and restart them on purpose and recover them.
	if err := checkControlPlane(false, t.Logf); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pauseControlPlaneCheck())
	for _, f := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"APIServerRestart", faultAPIServerRestart},               // fault_apiserver_restart_test.go
		{"EtcdStopped", faultEtcdStopped},                         // fault_etcd_stop_test.go
		{"ControllerStalled", faultControllerStalled},             // fault_controller_stall_test.go
		{"ControllerManagerKilled", faultControllerManagerKilled}, // fault_controller_manager_test.go
	} {
		t.Run(f.name, f.run)
	}
}
