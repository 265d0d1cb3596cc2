//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vllmctl/vllmctl/fleet"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The fleet tests run one release on three targets: a on the first local
// cluster (context local-a), b on the second (local-b), c on the first in
// another namespace; waves [a], [b, c]. The kubeconfig holding both
// contexts is VLLMCTL_E2E_FLEET_KUBECONFIG (make e2e writes it, see
// docs/local-cluster.md).

// fleetFixture is the three targets' namespaces and clients.
type fleetFixture struct {
	*relFixture
	kubeconfig string
	dir        string
	ns         map[string]string // target -> namespace
	clients    map[string]kubernetes.Interface
	stores     map[string]storage.Store
}

func newFleetFixture(t *testing.T) *fleetFixture {
	t.Helper()
	path := os.Getenv("VLLMCTL_E2E_FLEET_KUBECONFIG")
	if path == "" {
		skipOrFail(t, "VLLMCTL_E2E_FLEET_KUBECONFIG is not set: run make e2e (it starts the second local cluster)")
	}
	f := &fleetFixture{relFixture: newRelFixture(t), kubeconfig: path, dir: t.TempDir(),
		ns: map[string]string{}, clients: map[string]kubernetes.Interface{}, stores: map[string]storage.Store{}}
	ctxOf := map[string]string{"a": "local-a", "b": "local-b", "c": "local-a"}
	for _, name := range []string{"a", "b", "c"} {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
			&clientcmd.ConfigOverrides{CurrentContext: ctxOf[name]}).ClientConfig()
		require.NoError(t, err, "context %s of %s", ctxOf[name], path)
		client, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		ns := fmt.Sprintf("e2e-fleet-%s-%s", name, rand.String(5))
		_, err = client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err, "namespace %s on %s", ns, ctxOf[name])
		t.Cleanup(func() { _ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
		eventually(t, 30*time.Second, "default service account in "+ns, func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		f.ns[name], f.clients[name], f.stores[name] = ns, client, storage.NewSecrets(client, ns)
	}
	chart, err := filepath.Abs(relChart)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(chart, filepath.Join(f.dir, "chart")))
	return f
}

// file writes a fleet file: the shared set, b's overlay, the policy and
// b's context.
func (f *fleetFixture) file(t *testing.T, set []string, bSet []string, policy, bContext string, extra ...string) string {
	t.Helper()
	quote := func(ss []string) string {
		q := make([]string, len(ss))
		for i, s := range ss {
			q[i] = fmt.Sprintf("%q", s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	body := fmt.Sprintf(`release: %s
chart: ./chart
set: %s
targets:
  - {name: a, context: local-a, namespace: %s}
  - {name: b, context: %s, namespace: %s, set: %s}
  - {name: c, context: local-a, namespace: %s}
waves:
  - [a]
  - [b, c]
policy:
  onFailure: %s
%s`, relName, quote(set), f.ns["a"], bContext, f.ns["b"], quote(bSet), f.ns["c"], policy, strings.Join(extra, ""))
	path := filepath.Join(f.dir, "fleet.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	return path
}

// fleetCmd returns the `vllmctl fleet ...` command, without a config
// file or VLLMCTL_* variables.
func (f *fleetFixture) fleetCmd(ctx context.Context, kubeconfig string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, f.bin, append(append([]string{"fleet"}, args...), "--kubeconfig", kubeconfig)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VLLMCTL_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "HOME="+f.home, "XDG_CONFIG_HOME="+f.home)
	return cmd
}

// deploy runs `vllmctl fleet deploy FILE -o json` and parses its result.
func (f *fleetFixture) deploy(t *testing.T, file string, kubeconfig string, args ...string) (relRun, *fleet.Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := f.fleetCmd(ctx, kubeconfig, append([]string{"deploy", file, "-o", "json", "--timeout", "90s"}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r := relRun{code: exitCodeOf(t, cmd.Run())}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	return r, f.parse(t, r)
}

func (f *fleetFixture) parse(t *testing.T, r relRun) *fleet.Result {
	t.Helper()
	if r.code == 2 && !strings.HasPrefix(strings.TrimSpace(r.stdout), "{") {
		return nil
	}
	res := &fleet.Result{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), res), "fleet result\n%s", r)
	requireSchemaValid(t, "fleet", r.stdout)
	return res
}

// row returns the result's row of target name.
func row(t *testing.T, res *fleet.Result, name string) *fleet.TargetResult {
	t.Helper()
	for _, r := range res.Targets {
		if r.Name == name {
			return r
		}
	}
	require.Failf(t, "no row", "target %s not in the result", name)
	return nil
}

// serving returns target name's deployed revision and the greeting its
// ConfigMap serves.
func (f *fleetFixture) serving(t *testing.T, name string) (int, string) {
	t.Helper()
	revs, err := storage.History(context.Background(), f.stores[name], relName)
	require.NoError(t, err)
	deployed := 0
	for _, r := range revs {
		if r.Status == storage.StatusDeployed {
			deployed = r.Revision
		}
	}
	cm, err := f.clients[name].CoreV1().ConfigMaps(f.ns[name]).Get(context.Background(), relName+"-config", metav1.GetOptions{})
	require.NoError(t, err)
	return deployed, cm.Data["greeting"]
}

// requireServing asserts every target serves greeting, with no pending
// record left.
func (f *fleetFixture) requireServing(t *testing.T, greeting string) {
	t.Helper()
	for _, name := range []string{"a", "b", "c"} {
		rev, got := f.serving(t, name)
		assert.Positive(t, rev, "target %s has a deployed revision", name)
		assert.Equal(t, greeting, got, "target %s serves", name)
		p, err := storage.Pending(context.Background(), f.stores[name], relName)
		require.NoError(t, err)
		assert.Empty(t, p, "target %s: no lock left", name)
	}
}

func outcomeOf(t *testing.T, res *fleet.Result) map[string]fleet.Outcome {
	t.Helper()
	out := map[string]fleet.Outcome{}
	for _, r := range res.Targets {
		out[r.Name] = r.Outcome
	}
	return out
}

// TestFleetDeploy: a healthy fleet deploy, a rerun that changes nothing,
// then a crashing image on b through its overlay under each onFailure
// policy, an unreachable cluster in wave 2, and a rerun that resumes.
func TestFleetDeploy(t *testing.T) {
	shareCluster(t, 4)
	f := newFleetFixture(t)

	// Invalid files: exit 2 naming the line, nothing applied anywhere.
	for _, tc := range []struct{ name, body, says string }{
		{"unknown key", "release: chat\nchart: ./chart\ntargets:\n  - {name: a, context: local-a, namespace: x, replicas: 3}\nwaves: [[a]]\n", "fleet.yaml:4"},
		{"target in no wave", "release: chat\nchart: ./chart\ntargets:\n  - {name: a, context: local-a}\n  - {name: b, context: local-b}\nwaves: [[a]]\n", "fleet.yaml:5"},
		{"unknown context", "release: chat\nchart: ./chart\ntargets:\n  - {name: a, context: nowhere}\nwaves: [[a]]\n", "nowhere"},
		{"huge maxParallel", "release: chat\nchart: ./chart\ntargets:\n  - {name: a, context: local-a}\nwaves: [[a]]\npolicy: {maxParallel: 99999999999999999999}\n", "maxParallel"},
		{"bad policy", "release: chat\nchart: ./chart\ntargets:\n  - {name: a, context: local-a}\nwaves: [[a]]\npolicy: {onFailure: pray}\n", "onFailure"},
	} {
		path := filepath.Join(f.dir, "fleet.yaml")
		require.NoError(t, os.WriteFile(path, []byte(tc.body), 0o644))
		r, _ := f.deploy(t, path, f.kubeconfig)
		assert.Equal(t, 2, r.code, "%s\n%s", tc.name, r)
		assert.Contains(t, r.stderr, tc.says, tc.name)
	}
	for _, name := range []string{"a", "b", "c"} {
		revs, err := storage.History(context.Background(), f.stores[name], relName)
		var nf *storage.NotFoundError
		require.True(t, err != nil && errors.As(err, &nf), "target %s: no record after invalid files (%v, %d records)", name, err, len(revs))
	}

	// Healthy: three revisions, one result; wave 1 soaks 2s, then the
	// gate sees it in its environment.
	file := f.file(t, []string{"greeting=v1"}, nil, "rollback-fleet", "local-b",
		"  soak: 2s\n", `  gate: 'test "$VLLMCTL_FLEET_WAVE $VLLMCTL_FLEET_TARGETS" = "1 a"'`+"\n")
	r, res := f.deploy(t, file, f.kubeconfig)
	require.Equal(t, 0, r.code, "healthy fleet\n%s", r)
	require.Len(t, res.Gates, 1, "one gate, between the two waves")
	assert.Equal(t, 0, res.Gates[0].ExitCode)
	assert.Contains(t, r.stderr, "soak of wave 1")
	assert.Equal(t, fleet.Succeeded, res.Outcome)
	assert.Equal(t, map[string]fleet.Outcome{"a": fleet.Deployed, "b": fleet.Deployed, "c": fleet.Deployed}, outcomeOf(t, res))
	for _, name := range []string{"a", "b", "c"} {
		assert.Equal(t, 1, row(t, res, name).RevisionAfter)
	}
	assert.Equal(t, "local-b", row(t, res, "b").Context)
	assert.Contains(t, r.stderr, "[a] ")
	assert.Contains(t, r.stderr, "[b] ")
	f.requireServing(t, "v1")

	// The same fleet again: every target up to date, no new revision.
	r, res = f.deploy(t, file, f.kubeconfig)
	require.Equal(t, 0, r.code, "rerun\n%s", r)
	assert.Equal(t, map[string]fleet.Outcome{"a": fleet.UpToDate, "b": fleet.UpToDate, "c": fleet.UpToDate}, outcomeOf(t, res))

	// b crashes through its overlay: caught, and per policy.
	crash := []string{"image=example.com/vllm:v1-crash"}
	for _, tc := range []struct {
		policy string
		code   int
		want   map[string]fleet.Outcome
		aGreet string
	}{
		{"rollback-target", 3, map[string]fleet.Outcome{"a": fleet.Deployed, "b": fleet.RolledBack}, "v2"},
		{"stop", 3, map[string]fleet.Outcome{"a": fleet.Deployed, "b": fleet.RolledBack}, "v2"},
		{"rollback-fleet", 3, map[string]fleet.Outcome{"a": fleet.RolledBack, "b": fleet.RolledBack}, "v1"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			// Back to v1 everywhere first.
			r, _ := f.deploy(t, f.file(t, []string{"greeting=v1"}, nil, "rollback-fleet", "local-b"), f.kubeconfig)
			require.Equal(t, 0, r.code, "reset\n%s", r)
			_, cBefore := f.serving(t, "c")

			r, res := f.deploy(t, f.file(t, []string{"greeting=v2"}, crash, tc.policy, "local-b"), f.kubeconfig)
			require.Equal(t, tc.code, r.code, "crash on b, %s\n%s", tc.policy, r)
			got := outcomeOf(t, res)
			assert.Equal(t, tc.want["a"], got["a"])
			assert.Equal(t, tc.want["b"], got["b"])
			assert.Contains(t, []fleet.Outcome{fleet.Skipped, fleet.RolledBack, fleet.Deployed}, got["c"], "c stopped, rolled back or (in flight) deployed")
			b := row(t, res, "b")
			assert.Equal(t, "CrashLoopBackOff", b.Reason, "%+v", b)
			_, bGreet := f.serving(t, "b")
			assert.Equal(t, "v1", bGreet, "b serves its previous revision")
			_, aGreet := f.serving(t, "a")
			assert.Equal(t, tc.aGreet, aGreet, "a under %s", tc.policy)
			if got["c"] != fleet.Deployed || tc.policy == "rollback-fleet" {
				_, cGreet := f.serving(t, "c")
				assert.Equal(t, cBefore, cGreet, "c serves its previous revision")
			}
			assert.Equal(t, tc.policy == "rollback-fleet", res.Policy.Applied && len(res.Policy.RolledBack) > 0, "%+v", res.Policy)
		})
	}

	// An unreachable cluster in wave 2: refused in its preflight before
	// anything of wave 2 is applied; wave 1 stays; exit 6. Then the same
	// fleet with b reachable again resumes.
	dead := f.deadKubeconfig(t)
	r, res = f.deploy(t, f.file(t, []string{"greeting=v3"}, nil, "rollback-fleet", "local-dead"), dead)
	require.Equal(t, 6, r.code, "unreachable b\n%s", r)
	assert.Equal(t, map[string]fleet.Outcome{"a": fleet.Deployed, "b": fleet.Refused, "c": fleet.Skipped}, outcomeOf(t, res))
	assert.Equal(t, "preflight", row(t, res, "b").Phase)
	_, aGreet := f.serving(t, "a")
	assert.Equal(t, "v3", aGreet, "wave 1 stays")
	_, cGreet := f.serving(t, "c")
	assert.Equal(t, "v1", cGreet, "c never applied")

	resumed := f.file(t, []string{"greeting=v3"}, nil, "rollback-fleet", "local-b")
	r, res = f.deploy(t, resumed, f.kubeconfig)
	require.Equal(t, 0, r.code, "resume\n%s", r)
	assert.Equal(t, map[string]fleet.Outcome{"a": fleet.UpToDate, "b": fleet.Deployed, "c": fleet.Deployed}, outcomeOf(t, res))
	f.requireServing(t, "v3")

	// fleet status: every target deployed and ready; fleet diff: nothing
	// to change (exit 0), then a change on every target (exit 1).
	out, err := f.fleetCmd(context.Background(), f.kubeconfig, "status", resumed, "-o", "json").Output()
	require.NoError(t, err, "fleet status")
	requireSchemaValid(t, "fleet-status", string(out))
	var st fleet.StatusResult
	require.NoError(t, json.Unmarshal(out, &st))
	require.Len(t, st.Targets, 3)
	for _, ts := range st.Targets {
		assert.Equal(t, "deployed", ts.Status, ts.Name)
		assert.True(t, ts.Ready, ts.Name)
	}
	out, err = f.fleetCmd(context.Background(), f.kubeconfig, "diff", resumed, "-o", "json").Output()
	require.NoError(t, err, "fleet diff with nothing to change")
	requireSchemaValid(t, "fleet-diff", string(out))
	cmd := f.fleetCmd(context.Background(), f.kubeconfig, "diff", f.file(t, []string{"greeting=v4"}, nil, "rollback-fleet", "local-b"), "-o", "json")
	out, err = cmd.Output()
	assert.Equal(t, 1, exitCodeOf(t, err), "fleet diff with changes")
	assert.Contains(t, string(out), `"changes": true`)
	_, greet := f.serving(t, "a")
	assert.Equal(t, "v3", greet, "diff changes nothing")
}

// deadKubeconfig returns a copy of the fleet kubeconfig with one more
// context, local-dead, whose API server does not answer.
func (f *fleetFixture) deadKubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(f.kubeconfig)
	require.NoError(t, err)
	dead := cfg.Clusters["local-b"].DeepCopy()
	dead.Server = "https://127.0.0.1:1"
	cfg.Clusters["local-dead"] = dead
	ctx := cfg.Contexts["local-b"].DeepCopy()
	ctx.Cluster = "local-dead"
	cfg.Contexts["local-dead"] = ctx
	path := filepath.Join(f.dir, "dead-kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// TestFleetInterrupted: SIGINT while wave 2 rolls out: no new target is
// started, the targets in flight roll back, then rollback-fleet restores
// wave 1; every target serves its previous revision, no lock is left.
func TestFleetInterrupted(t *testing.T) {
	shareCluster(t, 4)
	f := newFleetFixture(t)
	r, _ := f.deploy(t, f.file(t, []string{"greeting=v1"}, nil, "rollback-fleet", "local-b"), f.kubeconfig)
	require.Equal(t, 0, r.code, "install\n%s", r)

	file := f.file(t, []string{"greeting=v2", "readyDelay=30s"}, nil, "rollback-fleet", "local-b")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := f.fleetCmd(ctx, f.kubeconfig, "deploy", file, "-o", "json", "--timeout", "2m")
	var stdout strings.Builder
	stderr := &progressLog{}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(stderr.String(), "[b] ") || !strings.Contains(stderr.String(), "deployment/"+relName) ||
		!strings.Contains(stderr.String()[strings.Index(stderr.String(), "[b] "):], "deployment/"+relName) {
		require.True(t, time.Now().Before(deadline), "wave 2 never rolled out:\n%s", stderr.String())
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	r = relRun{code: exitCodeOf(t, cmd.Wait()), stdout: stdout.String(), stderr: stderr.String()}
	res := f.parse(t, r)
	t.Logf("fleet deploy interrupted mid-wave: exit %d", r.code)
	require.Equal(t, 3, r.code, "%s", r)
	assert.True(t, res.Interrupted)
	assert.Equal(t, fleet.RolledBack, row(t, res, "a").Outcome, "wave 1 restored by the policy")
	f.requireServing(t, "v1")

	// kill -9 while a rolls out: a's lock is left. The next run is
	// refused there (5); with --force-unlock it takes that lock over and
	// completes.
	file = f.file(t, []string{"greeting=v3", "readyDelay=20s"}, nil, "rollback-fleet", "local-b")
	cmd = f.fleetCmd(context.Background(), f.kubeconfig, "deploy", file, "-o", "json", "--progress", "plain")
	stderr = &progressLog{}
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	deadline = time.Now().Add(2 * time.Minute)
	for !strings.Contains(stderr.String(), "[a] ") || !strings.Contains(stderr.String(), "deployment/"+relName) {
		require.True(t, time.Now().Before(deadline), "a never rolled out:\n%s", stderr.String())
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	r, res = f.deploy(t, file, f.kubeconfig)
	require.Equal(t, 5, r.code, "after kill -9\n%s", r)
	assert.Equal(t, fleet.Refused, row(t, res, "a").Outcome)
	r, res = f.deploy(t, file, f.kubeconfig, "--force-unlock")
	require.Equal(t, 0, r.code, "--force-unlock\n%s", r)
	f.requireServing(t, "v3")
	r, res = f.deploy(t, file, f.kubeconfig, "--force-unlock")
	require.Equal(t, 0, r.code, "again\n%s", r)
	assert.Equal(t, map[string]fleet.Outcome{"a": fleet.UpToDate, "b": fleet.UpToDate, "c": fleet.UpToDate}, outcomeOf(t, res),
		"--force-unlock takes over only a lock that is there")
}

// TestFleetGateIsRedacted: a fleet whose chart renders a Secret, with a
// gate that echoes the Secret's value and its base64 form: neither is in
// the progress lines (the "[fleet] gate after wave 1: …" line included)
// nor in the -o json result (gates[].command, gates[].outputTail).
func TestFleetGateIsRedacted(t *testing.T) {
	shareCluster(t, 4)
	const value = "FLEETSECRETVALUE123"
	b64 := base64.StdEncoding.EncodeToString([]byte(value))
	f := newFleetFixture(t)
	chart := filepath.Join(f.dir, "secretchart")
	require.NoError(t, os.MkdirAll(filepath.Join(chart, "templates"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: secretchart\nversion: 0.1.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(chart, "templates", "secret.yaml"), []byte(
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-api\nstringData:\n  key: "+value+"\n"), 0o644))
	body := fmt.Sprintf(`release: %s
chart: ./secretchart
targets:
  - {name: a, context: local-a, namespace: %s}
  - {name: b, context: local-b, namespace: %s}
waves:
  - [a]
  - [b]
policy:
  onFailure: stop
  gate: "echo leak %s; echo %s; exit 1"
`, relName, f.ns["a"], f.ns["b"], value, b64)
	file := filepath.Join(f.dir, "fleet.yaml")
	require.NoError(t, os.WriteFile(file, []byte(body), 0o644))

	r, res := f.deploy(t, file, f.kubeconfig, "--progress", "plain")
	require.NotEqual(t, 0, r.code, "the gate fails\n%s", r)
	require.NotNil(t, res, "%s", r)
	for what, out := range map[string]string{"stderr": r.stderr, "stdout": r.stdout} {
		assert.NotContains(t, out, value, what)
		assert.NotContains(t, out, b64, what)
	}
	assert.Contains(t, r.stderr, "[fleet] gate after wave 1: echo leak (redacted)")
	require.Len(t, res.Gates, 1)
	assert.Equal(t, 1, res.Gates[0].ExitCode)
	assert.Contains(t, res.Gates[0].Command, "(redacted)")
	assert.Equal(t, []string{"leak (redacted)", "(redacted)"}, res.Gates[0].OutputTail)
}
