//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

const (
	// relName is the release the release-engine tests deploy.
	relName = "chat"
	// relChart is a small chart without GPUs: a ConfigMap (greeting), an
	// optional second ConfigMap (extraConfig), a Service (servicePort), a
	// Deployment (image, args, replicas, readyDelay) and an optional HPA.
	relChart = "testdata/relchart"
)

// relBinary builds the vllmctl binary once per test process. It lives at a
// fixed path in the temporary directory (replaced atomically), so repeated
// runs leave one file behind, not one per run. The path is keyed by the
// source tree: a concurrent run from another checkout must not replace the
// binary this run tests.
var relBinary = sync.OnceValues(func() (string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), "vllmctl-e2e")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "vllmctl-build-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	build := exec.Command("go", "build", "-o", tmp.Name(), "./cmd/vllmctl")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("build vllmctl: %v: %s", err, out)
	}
	sum := sha256.Sum256([]byte(root))
	bin := filepath.Join(dir, fmt.Sprintf("vllmctl-release-%x", sum[:6]))
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", err
	}
	return bin, nil
})

// relFixture is an e2e namespace and the vllmctl binary.
type relFixture struct {
	*env
	bin        string
	kubeconfig string
	home       string
	store      storage.Store
}

func newRelFixture(t *testing.T) *relFixture {
	t.Helper()
	bin, err := relBinary()
	require.NoError(t, err)
	e := newEnv(t)
	home := t.TempDir()
	return &relFixture{env: e, bin: bin, kubeconfig: os.Getenv("VLLMCTL_E2E_KUBECONFIG"), home: home,
		store: storage.NewSecrets(e.client, e.namespace)}
}

// relRun is one run of the vllmctl binary.
type relRun struct {
	stdout, stderr string
	code           int
}

func (r relRun) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// command returns the vllmctl command for args against the test
// namespace, without a config file or VLLMCTL_* variables.
func (f *relFixture) command(ctx context.Context, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, f.bin, append(args, "--kubeconfig", f.kubeconfig, "-n", f.namespace)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VLLMCTL_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "HOME="+f.home, "XDG_CONFIG_HOME="+f.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

func exitCodeOf(t *testing.T, err error) int {
	t.Helper()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal())
		}
		return exitErr.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// run runs vllmctl args and waits for it.
func (f *relFixture) run(t *testing.T, args ...string) relRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd, stdout, stderr := f.command(ctx, args...)
	code := exitCodeOf(t, cmd.Run())
	return relRun{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// deploy runs `vllmctl deploy chat <relChart> args... --progress plain`.
func (f *relFixture) deploy(t *testing.T, args ...string) relRun {
	t.Helper()
	return f.run(t, append([]string{"deploy", relName, relChart, "--progress", "plain", "--timeout", "2m"}, args...)...)
}

// result parses a -o json result document, after checking it against
// its schema (docs/schema/result.schema.json).
func result(t *testing.T, r relRun) *release.Result {
	t.Helper()
	res := &release.Result{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), res), "result document\n%s", r)
	requireSchemaValid(t, "result", r.stdout)
	return res
}

// history returns the release's records, lowest revision first.
func (f *relFixture) history(t *testing.T) []*storage.Release {
	t.Helper()
	revs, err := storage.History(context.Background(), f.store, relName)
	var nf *storage.NotFoundError
	if errors.As(err, &nf) {
		return nil
	}
	require.NoError(t, err)
	return revs
}

func statuses(revs []*storage.Release) []storage.Status {
	out := make([]storage.Status, len(revs))
	for i, r := range revs {
		out[i] = r.Status
	}
	return out
}

func (e *env) configMapData(t *testing.T, name string) map[string]string {
	t.Helper()
	cm, err := e.client.CoreV1().ConfigMaps(e.namespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return cm.Data
}

// gone waits until the ConfigMap name no longer exists.
func (f *relFixture) gone(t *testing.T, kind, name string) {
	t.Helper()
	eventually(t, 30*time.Second, kind+" "+name+" deleted", func(ctx context.Context) (bool, error) {
		var err error
		switch kind {
		case "ConfigMap":
			_, err = f.client.CoreV1().ConfigMaps(f.namespace).Get(ctx, name, metav1.GetOptions{})
		case "Deployment":
			_, err = f.client.AppsV1().Deployments(f.namespace).Get(ctx, name, metav1.GetOptions{})
		case "PodDisruptionBudget":
			_, err = f.client.PolicyV1().PodDisruptionBudgets(f.namespace).Get(ctx, name, metav1.GetOptions{})
		default:
			return false, fmt.Errorf("unknown kind %s", kind)
		}
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func (f *relFixture) replicas(t *testing.T) int32 {
	t.Helper()
	d, err := f.client.AppsV1().Deployments(f.namespace).Get(context.Background(), relName, metav1.GetOptions{})
	require.NoError(t, err)
	return ptr.Deref(d.Spec.Replicas, -1)
}

// waitPending waits until the release has a pending record and returns it.
func (f *relFixture) waitPending(t *testing.T) *storage.Release {
	t.Helper()
	var pending *storage.Release
	eventually(t, 60*time.Second, "a pending record", func(ctx context.Context) (bool, error) {
		p, err := storage.Pending(ctx, f.store, relName)
		if err != nil || len(p) == 0 {
			return false, err
		}
		pending = p[len(p)-1]
		return true, nil
	})
	return pending
}

func TestReleaseDeployUpgradeRollback(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()

	r1 := f.deploy(t, "-o", "json")
	require.Equal(t, 0, r1.code, "%s", r1)
	res1 := result(t, r1)
	assert.Contains(t, r1.stderr, "chat#1 lock: pending-install", "plain progress on stderr")
	assert.Contains(t, r1.stderr, "chat#1 done: deployed: Install complete")

	r2 := f.deploy(t, "-o", "json", "--set", "image=example.com/vllm:v2")
	require.Equal(t, 0, r2.code, "%s", r2)
	r3 := f.deploy(t, "-o", "json", "--set", "image=example.com/vllm:v2", "--set", "args={--model=b}",
		"--set", "greeting=bonjour", "--set", "servicePort=9000", "--set", "extraConfig=true")
	require.Equal(t, 0, r3.code, "%s", r3)
	res2, res3 := result(t, r2), result(t, r3)

	revs := f.history(t)
	require.Len(t, revs, 3)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusDeployed}, statuses(revs))
	hashes := map[string]bool{}
	for i, res := range []*release.Result{res1, res2, res3} {
		rev := i + 1
		assert.Equal(t, rev, res.Revision)
		assert.Equal(t, storage.StatusDeployed, res.Status)
		assert.Equal(t, "relchart-0.1.0", res.Chart)
		require.Len(t, res.ReplicaSets, 1, "revision %d", rev)
		rs := res.ReplicaSets[0]
		assert.Equal(t, int64(rev), rs.Revision, "Deployment revision of release revision %d", rev)
		assert.Equal(t, relName, rs.Deployment)
		assert.Equal(t, res.ReplicaSets, revs[i].ReplicaSets, "recorded in revision %d", rev)
		hashes[rs.PodTemplateHash] = true
	}
	assert.Len(t, hashes, 3, "three distinct ReplicaSets")
	assert.Equal(t, "bonjour", f.configMapData(t, "chat-config")["greeting"])

	// Roll back to revision 1.
	rb := f.run(t, "rollback", relName, "--to-revision", "1", "-o", "json", "--progress", "plain", "--timeout", "2m")
	require.Equal(t, 0, rb.code, "%s", rb)
	res4 := result(t, rb)
	assert.Equal(t, 4, res4.Revision)
	assert.Equal(t, storage.StatusDeployed, res4.Status)
	assert.Equal(t, 1, res4.RolledBackTo)
	require.Len(t, res4.ReplicaSets, 1)
	assert.Equal(t, res1.ReplicaSets[0].Name, res4.ReplicaSets[0].Name, "revision 1's ReplicaSet is reused")
	assert.Equal(t, res1.ReplicaSets[0].PodTemplateHash, res4.ReplicaSets[0].PodTemplateHash)
	assert.Equal(t, int64(4), res4.ReplicaSets[0].Revision, "with the Deployment's new revision number")
	assert.Contains(t, rb.stderr, "verified")

	revs = f.history(t)
	require.Len(t, revs, 4)
	assert.Equal(t, "Rollback to 1", revs[3].Description)
	assert.Equal(t, 1, revs[3].RollbackOf)
	assert.Equal(t, res4.ReplicaSets, revs[3].ReplicaSets)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusDeployed}, statuses(revs))

	// Revision 1's ConfigMap and Service contents are back, revision 3's
	// extra ConfigMap is gone, revision 1's ReplicaSet serves.
	assert.Equal(t, "hello", f.configMapData(t, "chat-config")["greeting"])
	svc, err := f.client.CoreV1().Services(f.namespace).Get(ctx, relName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(8000), svc.Spec.Ports[0].Port)
	f.gone(t, "ConfigMap", "chat-extra")
	rs1, err := f.client.AppsV1().ReplicaSets(f.namespace).Get(ctx, res1.ReplicaSets[0].Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), ptr.Deref(rs1.Spec.Replicas, -1), "revision 1's ReplicaSet scaled back up")
	assert.Equal(t, "4", rs1.Annotations[cluster.RevisionAnnotation])
	eventually(t, 60*time.Second, "revision 3's ReplicaSet scaled down", func(ctx context.Context) (bool, error) {
		rs3, err := f.client.AppsV1().ReplicaSets(f.namespace).Get(ctx, res3.ReplicaSets[0].Name, metav1.GetOptions{})
		return err == nil && ptr.Deref(rs3.Spec.Replicas, -1) == 0, err
	})

	// An unknown revision: exit 2, the revisions listed, nothing written.
	bad := f.run(t, "rollback", relName, "--to-revision", "9")
	assert.Equal(t, 2, bad.code, "%s", bad)
	assert.Contains(t, bad.stderr, "revision 9 of release chat not found; revisions: 1, 2, 3, 4")
	assert.Empty(t, bad.stdout)
	assert.Len(t, f.history(t), 4)

	// status shows the live objects.
	st := f.run(t, "status", relName, "-o", "json")
	require.Equal(t, 0, st.code, "%s", st)
	var rep release.StatusReport
	require.NoError(t, json.Unmarshal([]byte(st.stdout), &rep))
	assert.Equal(t, 4, rep.Revision)
	for _, o := range rep.Objects {
		assert.Equal(t, "Current", o.Status, "%s", o.Object)
	}
	require.NotEmpty(t, rep.ReplicaSets)
	assert.Equal(t, res1.ReplicaSets[0].Name, rep.ReplicaSets[0].Name)
	assert.True(t, rep.ReplicaSets[0].Current)
}

func TestReleaseFieldConflictThenForce(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()
	r := f.deploy(t)
	require.Equal(t, 0, r.code, "%s", r)

	// `kubectl scale --replicas=2` by another field manager.
	_, err := f.client.AppsV1().Deployments(f.namespace).UpdateScale(ctx, relName, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: relName, Namespace: f.namespace},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 2},
	}, metav1.UpdateOptions{FieldManager: "kubectl-scale"})
	require.NoError(t, err)

	r = f.deploy(t, "-o", "json")
	assert.Equal(t, 6, r.code, "%s", r)
	assert.Contains(t, r.stderr, `"kubectl-scale"`, "the error names the other manager")
	assert.Contains(t, r.stderr, "--force-conflicts")
	revs := f.history(t)
	require.Len(t, revs, 2)
	assert.Equal(t, []storage.Status{storage.StatusDeployed, storage.StatusFailed}, statuses(revs), "nothing recorded as deployed")
	require.NotNil(t, revs[1].Failure)
	assert.Equal(t, "FieldManagerConflict", revs[1].Failure.Reason)
	assert.Equal(t, int32(2), f.replicas(t), "the refused apply changed nothing")

	r = f.deploy(t, "--force-conflicts")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Equal(t, int32(1), f.replicas(t), "vllmctl took replicas over")
	revs = f.history(t)
	require.Len(t, revs, 3)
	assert.Equal(t, storage.StatusDeployed, revs[2].Status)
}

func TestReleaseWithHPANeverResetsReplicas(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	hpa := []string{"--set", "autoscaling.enabled=true", "--set", "autoscaling.minReplicas=2", "--set", "autoscaling.maxReplicas=2"}
	r := f.deploy(t, hpa...)
	require.Equal(t, 0, r.code, "%s", r)
	// The HPA controller raises replicas to minReplicas.
	eventually(t, 90*time.Second, "the HPA scales chat to 2", func(ctx context.Context) (bool, error) {
		return f.replicas(t) == 2, nil
	})
	for i, greeting := range []string{"hi", "hey", "hey"} {
		r := f.deploy(t, append(hpa, "--set", "greeting="+greeting)...)
		require.Equal(t, 0, r.code, "deploy %d never conflicts: %s", i, r)
		assert.Equal(t, int32(2), f.replicas(t), "deploy %d never resets replicas", i)
		if i == 2 {
			// The same inputs again: nothing to change, no new revision
			// (the HPA's replicas are not a difference).
			assert.Contains(t, r.stderr, "up to date", "deploy %d", i)
		}
	}
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusDeployed},
		statuses(f.history(t)))
}

func TestReleaseConcurrentDeploys(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first, stdout, stderr := f.command(ctx, "deploy", relName, relChart, "--set", "readyDelay=15s", "--progress", "plain")
	require.NoError(t, first.Start())
	pending := f.waitPending(t)
	assert.Equal(t, storage.StatusPendingInstall, pending.Status)

	second := f.deploy(t)
	assert.Equal(t, 5, second.code, "%s", second)
	assert.Contains(t, second.stderr, "is locked by another operation: revision 1 is pending-install")
	assert.Empty(t, second.stdout)

	code := exitCodeOf(t, first.Wait())
	require.Equal(t, 0, code, "first deploy\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	revs := f.history(t)
	require.Len(t, revs, 1, "the refused deploy wrote nothing")
	assert.Equal(t, storage.StatusDeployed, revs[0].Status)
}

func TestReleaseKilledDeployLeavesItsLock(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	r := f.deploy(t)
	require.Equal(t, 0, r.code, "%s", r)

	// kill -9 a deploy while it waits.
	kill := func() *storage.Release {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd, _, _ := f.command(ctx, "deploy", relName, relChart, "--set", "readyDelay=60s", "--set", "greeting=killed", "--progress", "plain", "--timeout", "5m",
			"--lock-lease", "6s")
		require.NoError(t, cmd.Start())
		p := f.waitPending(t)
		eventually(t, 30*time.Second, "the ReplicaSet recorded", func(ctx context.Context) (bool, error) {
			rec, err := f.store.Get(ctx, relName, p.Revision)
			return err == nil && len(rec.ReplicaSets) > 0, err
		})
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		assert.Equal(t, -int(syscall.SIGKILL), exitCodeOf(t, cmd.Wait()))
		return p
	}
	p := kill()

	r = f.deploy(t)
	assert.Equal(t, 5, r.code, "%s", r)
	assert.Contains(t, r.stderr, fmt.Sprintf("revision %d is pending-upgrade", p.Revision))
	assert.Contains(t, r.stderr, "--force-unlock")
	assert.Contains(t, r.stderr, p.Holder, "names the holder")

	r = f.deploy(t, "--force-unlock", "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	killed, err := f.store.Get(context.Background(), relName, p.Revision)
	require.NoError(t, err)
	assert.Equal(t, storage.StatusFailed, killed.Status)
	assert.Contains(t, killed.Description, "interrupted: lock taken over")
	assert.Equal(t, p.Revision+1, result(t, r).Revision)

	// Once watched going unrenewed for its lease (6s) the lock is stale.
	p = kill()
	time.Sleep(7 * time.Second)
	r = f.deploy(t, "--timeout", "30s")
	require.Equal(t, 0, r.code, "%s", r)
	killed, err = f.store.Get(context.Background(), relName, p.Revision)
	require.NoError(t, err)
	assert.Equal(t, storage.StatusFailed, killed.Status)
	assert.Contains(t, killed.Description, "not renewed for 6s as watched by this operation, lease 6s")
}

// A live lock is never stolen by a short --timeout:
// deploy A (a 25 s rollout, lease 8s renewed every 2.7s) holds the lock;
// deploy B with --timeout 5s, 10 s later, exits 5 and A finishes deployed.
func TestReleaseLiveLockIsNeverStolen(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	r := f.deploy(t)
	require.Equal(t, 0, r.code, "%s", r)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, aout, aerr := f.command(ctx, "deploy", relName, relChart, "--set", "readyDelay=25s", "--set", "greeting=a",
		"--progress", "plain", "--lock-lease", "8s", "-o", "json")
	require.NoError(t, a.Start())
	p := f.waitPending(t)
	time.Sleep(10 * time.Second) // older than A's lease: only renewals keep it

	b := f.deploy(t, "--set", "greeting=b", "--timeout", "5s")
	assert.Equal(t, 5, b.code, "B refused: %s", b)
	assert.Contains(t, b.stderr, "held by "+p.Holder)

	require.Equal(t, 0, exitCodeOf(t, a.Wait()), "A's healthy rollout ends deployed\nstdout:\n%s\nstderr:\n%s", aout, aerr)
	assert.Equal(t, storage.StatusDeployed, result(t, relRun{stdout: aout.String()}).Status)
	rec, err := f.store.Get(context.Background(), relName, p.Revision)
	require.NoError(t, err)
	assert.Equal(t, storage.StatusDeployed, rec.Status, "A's record says deployed too")
	assert.Equal(t, "a", f.configMapData(t, "chat-config")["greeting"])
}

func TestReleasePrunesRemovedObjectsOnly(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()
	r := f.deploy(t, "--set", "extraConfig=true")
	require.Equal(t, 0, r.code, "%s", r)
	require.NotEmpty(t, f.configMapData(t, "chat-extra"))
	bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bystander"}, Data: map[string]string{"k": "v"}}
	_, err := f.client.CoreV1().ConfigMaps(f.namespace).Create(ctx, bystander, metav1.CreateOptions{})
	require.NoError(t, err)

	r = f.deploy(t, "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	res := result(t, r)
	require.Len(t, res.Pruned, 1)
	assert.Equal(t, "v1 ConfigMap "+f.namespace+"/chat-extra", res.Pruned[0].String())
	f.gone(t, "ConfigMap", "chat-extra")
	assert.Equal(t, map[string]string{"k": "v"}, f.configMapData(t, "bystander"), "an object of no release is never touched")
}

func TestReleaseDryRunAndInvalidInput(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()
	noObjects := func(t *testing.T) {
		t.Helper()
		deps, err := f.client.AppsV1().Deployments(f.namespace).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, deps.Items, "nothing applied")
		secrets, err := f.client.CoreV1().Secrets(f.namespace).List(ctx, metav1.ListOptions{LabelSelector: storage.LabelManagedBy + "=" + storage.ManagedByVllmctl})
		require.NoError(t, err)
		assert.Empty(t, secrets.Items, "nothing recorded")
	}

	r := f.deploy(t, "--dry-run", "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	res := result(t, r)
	assert.True(t, res.DryRun)
	assert.Equal(t, 1, res.Revision)
	noObjects(t)

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"invalid release name", []string{"deploy", "Bad_Name", relChart}, `"Bad_Name" is invalid`},
		{"missing values file", []string{"deploy", relName, relChart, "-f", "nope.yaml"}, "nope.yaml"},
		{"bad --set", []string{"deploy", relName, relChart, "--set", "a.b"}, "--set"},
		{"missing chart", []string{"deploy", relName, "testdata/nochart"}, "nochart"},
		{"bad --max-surge", []string{"deploy", relName, relChart, "--max-surge", "-1"}, "--max-surge"},
		{"--max-surge percentage past the controller's 32-bit count", []string{"deploy", relName, relChart, "--max-surge", "1000000000000%"}, "in 32 bits"},
		{"--max-surge count past the controller's 32-bit count", []string{"deploy", relName, relChart, "--max-surge", "2147483647"}, "in 32 bits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.run(t, tc.args...)
			assert.Equal(t, 2, r.code, "%s", r)
			assert.Contains(t, r.stderr, tc.want)
			assert.Empty(t, r.stdout)
			noObjects(t)
		})
	}
}

func TestReleaseFailedRolloutAndUninstall(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	r := f.deploy(t)
	require.Equal(t, 0, r.code, "%s", r)

	r = f.deploy(t, "--set", "image=example.com/vllm:crash", "--no-rollback", "-o", "json")
	assert.Equal(t, 4, r.code, "%s", r)
	res := result(t, r)
	assert.Equal(t, storage.StatusFailed, res.Status)
	require.NotNil(t, res.Failure)
	assert.Equal(t, "CrashLoopBackOff", res.Failure.Reason)
	assert.NotEmpty(t, res.Failure.Pod)
	revs := f.history(t)
	assert.Equal(t, []storage.Status{storage.StatusDeployed, storage.StatusFailed}, statuses(revs))
	assert.Equal(t, "CrashLoopBackOff", revs[1].Failure.Reason)

	r = f.run(t, "uninstall", relName, "--keep-history", "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	f.gone(t, "Deployment", relName)
	f.gone(t, "ConfigMap", "chat-config")
	revs = f.history(t)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusFailed, storage.StatusUninstalled}, statuses(revs))

	r = f.run(t, "uninstall", relName)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Empty(t, f.history(t), "records deleted")
	r = f.run(t, "status", relName)
	assert.Equal(t, 2, r.code, "%s", r)
}
