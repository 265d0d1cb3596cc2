//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The local clusters' components must all run for the tests to mean
// anything: a kube-controller-manager that exited (as one did when it lost
// its leader lease under load, before leader election was turned off)
// turns every later test into a timeout. TestMain checks them before the
// run (hack/cluster-up.sh --repair: processes and health endpoints,
// restarting what is down); newEnv, which nearly every test starts with,
// checks again that their processes run (a few /proc reads) and has a dead
// one restarted. When that fails the test fails at once naming the
// component, and so does every later one, instead of timing out.
//
// The destructive fault scenarios stop etcd and restart the API server on
// purpose and bring them back themselves: TestDestructiveFaults pauses the
// check for its duration (pauseControlPlaneCheck).

// cpComponents are the local cluster's components, as hack/cluster-up.sh
// checks them. vllm-sim (the simulated vLLM engine, started by
// hack/cluster-up.sh, not kwokctl) is checked only in a cluster whose pid
// file for it exists: a cluster created before it existed is not broken
// for the tests that do not serve (hack/cluster-up.sh starts it there).
var cpComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller", "vllm-sim"}

// localCluster is a local kwok cluster the tests use.
type localCluster struct {
	name string // vllmctl, vllmctl-b, ...
	dir  string // its kwok cluster directory, holding pids/
}

// findKwokDir returns the kwok cluster directory (the one holding pids/)
// under a .cluster state directory, or the directory itself when it is
// one; "" when there is none.
func findKwokDir(dir string) string {
	if st, err := os.Stat(filepath.Join(dir, "pids")); err == nil && st.IsDir() {
		return dir
	}
	m, _ := filepath.Glob(filepath.Join(dir, "kwok", "clusters", "*", "pids"))
	if len(m) != 1 {
		return ""
	}
	return filepath.Dir(m[0])
}

// e2eClusters returns the local kwok clusters behind the e2e kubeconfigs
// (VLLMCTL_E2E_CLUSTER_DIR or VLLMCTL_E2E_KUBECONFIG's directory, and
// VLLMCTL_E2E_FLEET_KUBECONFIG's); none when the tests run on another kind
// of cluster.
func e2eClusters() []localCluster {
	var out []localCluster
	seen := map[string]bool{}
	for _, d := range []string{os.Getenv("VLLMCTL_E2E_CLUSTER_DIR"), dirOf(os.Getenv("VLLMCTL_E2E_KUBECONFIG")), dirOf(os.Getenv("VLLMCTL_E2E_FLEET_KUBECONFIG"))} {
		if d == "" {
			continue
		}
		k := findKwokDir(d)
		if k == "" {
			continue
		}
		if abs, err := filepath.Abs(k); err == nil {
			k = abs
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, localCluster{name: filepath.Base(k), dir: k})
		}
	}
	return out
}

func dirOf(path string) string {
	if path == "" {
		return ""
	}
	return filepath.Dir(path)
}

// deadComponents returns the components of the cluster whose pid file
// names no running process.
func deadComponents(dir string) []string {
	var dead []string
	for _, name := range cpComponents {
		if _, err := os.Stat(filepath.Join(dir, "pids", name+".pid")); name == "vllm-sim" && err != nil {
			continue
		}
		pid, err := cpPid(dir, name)
		if err != nil || !cpAlive(pid, name) {
			dead = append(dead, name)
		}
	}
	return dead
}

// ownCluster reports whether c is this checkout's cluster of its name, the
// one ../hack/cluster-up.sh manages (.cluster/ for vllmctl,
// .cluster-<suffix>/ for vllmctl-<suffix>).
func ownCluster(c localCluster) bool {
	root, err := filepath.Abs("..")
	if err != nil {
		return false
	}
	state := filepath.Join(root, ".cluster")
	if c.name != "vllmctl" {
		suffix, ok := strings.CutPrefix(c.name, "vllmctl-")
		if !ok {
			return false
		}
		state += "-" + suffix
	}
	return filepath.Clean(filepath.Join(c.dir, "..", "..", "..")) == state
}

// repairCluster runs hack/cluster-up.sh --repair for c: every component
// checked, the ones down restarted, never a recreated cluster.
func repairCluster(c localCluster) (string, error) {
	if !ownCluster(c) {
		return "", fmt.Errorf("not this checkout's cluster (%s): bring it back with `kwokctl --name %s start cluster` or make cluster", c.dir, c.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", filepath.Join("..", "hack", "cluster-up.sh"), "--repair", c.name).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// cpGuard is the state of the control-plane check.
var cpGuard struct {
	mu     sync.Mutex
	paused bool
	broken error // the first failure, given to every later test
}

// checkControlPlane has the local clusters' dead components restarted (or,
// with full, every component checked by hack/cluster-up.sh --repair) and
// returns an error naming what could not be brought back. logf reports
// what it restarted.
func checkControlPlane(full bool, logf func(format string, args ...any)) error {
	cpGuard.mu.Lock()
	defer cpGuard.mu.Unlock()
	if cpGuard.paused {
		return nil
	}
	if cpGuard.broken != nil {
		return cpGuard.broken
	}
	for _, c := range e2eClusters() {
		dead := deadComponents(c.dir)
		if len(dead) == 0 && (!full || !ownCluster(c)) {
			continue
		}
		if len(dead) > 0 {
			logf("local cluster %s: %s not running (pid files in %s): restarting", c.name, strings.Join(dead, ", "), filepath.Join(c.dir, "pids"))
		}
		out, err := repairCluster(c)
		if err == nil {
			dead = deadComponents(c.dir)
		}
		if err != nil || len(dead) > 0 {
			what := strings.Join(dead, ", ")
			if what == "" {
				what = "a component"
			}
			cpGuard.broken = fmt.Errorf("local cluster %s: %s down and not brought back (hack/cluster-up.sh --repair %s: %v); logs in %s; make cluster recreates it:\n%s",
				c.name, what, c.name, err, filepath.Join(c.dir, "logs"), out)
			return cpGuard.broken
		}
		if strings.Contains(out, "restart") {
			logf("%s", out)
		}
	}
	return nil
}

// pauseControlPlaneCheck stops checkControlPlane from restarting anything
// (the destructive faults stop and restart components themselves) until
// the returned function is called.
func pauseControlPlaneCheck() func() {
	cpGuard.mu.Lock()
	cpGuard.paused = true
	cpGuard.mu.Unlock()
	return func() {
		cpGuard.mu.Lock()
		cpGuard.paused = false
		cpGuard.mu.Unlock()
	}
}

// stderrf logs to stderr, for TestMain.
func stderrf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
}
