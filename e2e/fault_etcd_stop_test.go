//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release/storage"
)

// Stopping etcd stalls every API request on the shared cluster: the
// scenario is not a test of its own but a subtest of TestDestructiveFaults
// (destructive_test.go), which runs it after every other test.

// etcdStop is how long etcd stays stopped.
const etcdStop = 10 * time.Second

// kwokClusterDir returns the local kwok cluster's directory, the one
// holding pids/: VLLMCTL_E2E_CLUSTER_DIR, which may name it or the repo's
// .cluster directory it lives in (.cluster/kwok/clusters/<name>), else
// found next to VLLMCTL_E2E_KUBECONFIG.
func kwokClusterDir() string {
	dir := os.Getenv("VLLMCTL_E2E_CLUSTER_DIR")
	if dir == "" {
		dir = filepath.Dir(os.Getenv("VLLMCTL_E2E_KUBECONFIG"))
	}
	if d := findKwokDir(dir); d != "" {
		return d
	}
	return dir
}

// cpProcess is a running control-plane component as its pid file names
// it, with what it takes to start it again as it was started
// (hack/restart-apiserver.sh does the same).
type cpProcess struct {
	name string
	pid  int
	args []string
	env  []string
	cwd  string
	log  string
}

// cpAlive reports whether pid is a running (not zombie) process whose
// executable is named name.
func cpAlive(pid int, name string) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return filepath.Base(string(bytes.SplitN(cmdline, []byte{0}, 2)[0])) == name
}

// cpPid reads the pid file of component name.
func cpPid(dir, name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "pids", name+".pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// cpSnapshot reads component name's pid file and its process.
func cpSnapshot(dir, name string) (*cpProcess, error) {
	pid, err := cpPid(dir, name)
	if err != nil {
		return nil, err
	}
	if !cpAlive(pid, name) {
		return nil, errors.New(name + " pid " + strconv.Itoa(pid) + " is not running")
	}
	proc := "/proc/" + strconv.Itoa(pid)
	split := func(b []byte) []string { return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00") }
	c := &cpProcess{name: name, pid: pid}
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return nil, err
	}
	c.args = split(cmdline)
	environ, err := os.ReadFile(proc + "/environ")
	if err != nil {
		return nil, err
	}
	c.env = split(environ)
	if c.cwd, err = os.Readlink(proc + "/cwd"); err != nil {
		return nil, err
	}
	if out, err := os.Readlink(proc + "/fd/2"); err == nil && filepath.IsAbs(out) {
		if st, err := os.Stat(out); err == nil && st.Mode().IsRegular() {
			c.log = out
		}
	}
	if c.log == "" {
		c.log = filepath.Join(dir, "logs", name+".log")
	}
	return c, nil
}

// start starts the component again as it was started, detached (its own
// session, output appended to its log), and writes its new pid file.
func (c *cpProcess) start(dir string) (int, error) {
	out, err := os.OpenFile(c.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	cmd := exec.Command(c.args[0], c.args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = c.cwd, c.env, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	for range 50 {
		if cpAlive(pid, c.name) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !cpAlive(pid, c.name) {
		return 0, errors.New(c.name + " did not start, see " + c.log)
	}
	// No newline: kwokctl (start cluster, which hack/cluster-up.sh runs)
	// reads the file as it is.
	return pid, os.WriteFile(filepath.Join(dir, "pids", c.name+".pid"), []byte(strconv.Itoa(pid)), 0o644)
}

// lockCluster takes the lock hack/cluster-up.sh takes (.cluster/lock,
// three levels above the kwok cluster directory), so that a concurrent
// `make cluster` waits while the cluster is not ready instead of
// recreating it. It returns the unlock.
func lockCluster(t *testing.T, dir string) func() {
	t.Helper()
	path := filepath.Join(dir, "..", "..", "..", "lock")
	fd, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Logf("warning: no cluster lock %s (%v): a concurrent make cluster may recreate the cluster", path, err)
		return func() {}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := syscall.Flock(int(fd.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			fd.Close()
			require.NoError(t, err, "take the cluster lock %s", path)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var once sync.Once
	unlock := func() { once.Do(func() { fd.Close() }) }
	t.Cleanup(unlock)
	return unlock
}

// stopEtcd stops etcd (SIGSTOP) for d and continues it (SIGCONT), also
// when the test fails meanwhile.
func stopEtcd(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	var once sync.Once
	cont := func() {
		once.Do(func() {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT etcd pid %d: %v", pid, err)
			}
		})
	}
	t.Cleanup(cont)
	defer cont()
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	t.Logf("etcd pid %d stopped (SIGSTOP) at %s", pid, time.Now().Format("15:04:05.000"))
	// The stop is delivered asynchronously: a thread running on another
	// core shows state R until it next enters the kernel.
	var stat []byte
	for deadline := time.Now().Add(2 * time.Second); ; {
		var err error
		stat, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		require.NoError(t, err)
		if strings.Contains(string(stat), ") T ") || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	assert.Contains(t, string(stat), ") T ", "etcd is stopped")
	time.Sleep(d)
	cont()
	t.Logf("etcd pid %d continued (SIGCONT) at %s", pid, time.Now().Format("15:04:05.000"))
}

// recoverControlPlane waits until the API server is ready after etcd
// continued, then starts again the components (snapshots taken before the
// fault) that exited meanwhile: a controller-manager or scheduler whose
// leader lease could not be renewed for 10 s exits.
func (f *relFixture) recoverControlPlane(t *testing.T, dir string, comps []*cpProcess) {
	t.Helper()
	eventually(t, 90*time.Second, "kube-apiserver ready after etcd continued", func(ctx context.Context) (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		body, err := f.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		return err == nil && string(body) == "ok", nil
	})
	t.Logf("kube-apiserver ready at %s", time.Now().Format("15:04:05.000"))
	// A component that lost its leader lease exits shortly after the
	// renewal deadline; give it the time to.
	time.Sleep(5 * time.Second)
	for _, c := range comps {
		pid, err := cpPid(dir, c.name)
		if err == nil && cpAlive(pid, c.name) {
			continue
		}
		if err == nil && pid != c.pid {
			continue // somebody else started it again
		}
		t.Logf("%s (pid %d) exited while etcd was stopped: starting it again", c.name, c.pid)
		newPid, err := c.start(dir)
		require.NoError(t, err, "start %s again", c.name)
		t.Logf("%s started again, pid %d", c.name, newPid)
	}
}

// faultEtcdStopped: etcd stopped (SIGSTOP) for 10 s while a deploy waits
// on a slow rollout. The deploy either finishes deployed or fails with a
// documented code and a consistent record; no record is lost; the next
// deploy works. Run by TestDestructiveFaults.
func faultEtcdStopped(t *testing.T) {
	dir := kwokClusterDir()
	etcdPid, err := cpPid(dir, "etcd")
	if err != nil {
		skipOrFail(t, "needs the local kwok cluster's etcd pid file (set VLLMCTL_E2E_CLUSTER_DIR): %v", err)
	}
	require.True(t, cpAlive(etcdPid, "etcd"), "etcd pid %d (%s) is running", etcdPid, filepath.Join(dir, "pids", "etcd.pid"))

	f := newRelFixture(t)
	rev1 := f.faultInstall(t)

	// The rollout takes 20 s (the new pod's ready delay): etcd is stopped
	// while the deploy waits, and continued before the pod is Ready.
	p := f.start(t, faultDeployArgs("--set", "greeting=etcd", "--set", "readyDelay=20s", "--timeout", "4m", "-o", "json")...)
	p.waitProgress(t, relName+"#2 replicaset:", "deployment/"+relName+": ")
	require.NotContains(t, p.stderr.String(), relName+"#2 done", "the deploy still waits when etcd is stopped")

	var comps []*cpProcess
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"} {
		c, err := cpSnapshot(dir, name)
		require.NoError(t, err, "the control plane runs before the fault")
		comps = append(comps, c)
	}
	unlock := lockCluster(t, dir)
	stopEtcd(t, etcdPid, etcdStop)
	f.recoverControlPlane(t, dir, comps)
	unlock()

	r := p.wait(t)
	t.Logf("FAULT etcd stopped %s mid-rollout: exit %d\n%s", etcdStop, r.code, r.stderr)
	require.Contains(t, []int{0, 3, 4, 6}, r.code, "deployed, or failed with a documented code: %s", r)
	res := result(t, r)
	assert.Equal(t, 2, res.Revision)
	switch r.code {
	case 0:
		assert.Equal(t, storage.StatusDeployed, res.Status)
		assert.Nil(t, res.Failure, "no false verdict")
		require.Len(t, res.ReplicaSets, 1)
		f.assertServes(t, res.ReplicaSets[0])
		f.assertConsistent(t, 2)
		assert.Equal(t, "etcd", f.configMapData(t, relName+"-config")["greeting"])
	case 3:
		assert.Equal(t, storage.StatusFailed, res.Status)
		assert.Equal(t, 1, res.RolledBackTo)
		require.NotNil(t, res.Failure, "the failure is recorded")
		f.assertRolledBack(t, rev1, res.Failure.Reason)
		f.assertServes(t, rev1.ReplicaSets[0])
		f.assertConsistent(t, 3)
	default:
		assert.Equal(t, storage.StatusFailed, res.Status)
		assert.NotNil(t, res.Failure, "the failure is recorded")
		rec, err := f.store.Get(context.Background(), relName, 2)
		require.NoError(t, err)
		assert.Equal(t, storage.StatusFailed, rec.Status)
		f.assertConsistent(t, 1)
	}
	f.assertNextDeploy(t)
}
