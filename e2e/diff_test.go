//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

const (
	diffRelease = "web"
	// diffChart is a small chart with a Deployment (1 replica, 1 GPU), a
	// ConfigMap, a Secret (data and stringData), a PDB and a Service.
	diffChart = "../testdata/charts/diffdemo"
)

// diffFixture is an e2e namespace, the vllmctl binary and a kubeconfig.
type diffFixture struct {
	*env
	bin        string
	kubeconfig string
	home       string
}

func newDiffFixture(t *testing.T) *diffFixture {
	t.Helper()
	e := newEnv(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "vllmctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/vllmctl")
	build.Dir = ".."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build vllmctl: %s", out)
	home := filepath.Join(dir, "home")
	require.NoError(t, os.MkdirAll(home, 0o755))
	return &diffFixture{env: e, bin: bin, kubeconfig: os.Getenv("VLLMCTL_E2E_KUBECONFIG"), home: home}
}

// diffRun is one run of the vllmctl binary.
type diffRun struct {
	stdout, stderr []byte
	code           int
}

// vllmctl runs the binary against the test namespace, without a config
// file or VLLMCTL_* variables.
func (f *diffFixture) vllmctl(t *testing.T, args ...string) diffRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
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
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return diffRun{stdout: stdout.Bytes(), stderr: stderr.Bytes(), code: code}
}

// diff runs `vllmctl diff web <diffChart> args...`.
func (f *diffFixture) diff(t *testing.T, args ...string) diffRun {
	t.Helper()
	return f.vllmctl(t, append([]string{"diff", diffRelease, diffChart}, args...)...)
}

// diffOf runs `vllmctl diff web <chart> args...`.
func (f *diffFixture) diffOf(t *testing.T, chart string, args ...string) diffRun {
	t.Helper()
	return f.vllmctl(t, append([]string{"diff", diffRelease, chart}, args...)...)
}

// diffJSON is the `diff -o json` document.
type diffJSON struct {
	Objects []struct {
		Object    string `json:"object"`
		Action    string `json:"action"`
		Diff      string `json:"diff"`
		Conflicts []struct {
			Field   string `json:"field"`
			Manager string `json:"manager"`
		} `json:"conflicts"`
	} `json:"objects"`
	Summary map[string]int `json:"summary"`
}

func (f *diffFixture) diffJSON(t *testing.T, args ...string) (diffJSON, diffRun) {
	t.Helper()
	return f.diffJSONOf(t, diffChart, args...)
}

func (f *diffFixture) diffJSONOf(t *testing.T, chart string, args ...string) (diffJSON, diffRun) {
	t.Helper()
	run := f.diffOf(t, chart, append(args, "-o", "json")...)
	var doc diffJSON
	require.NoError(t, json.Unmarshal(run.stdout, &doc), "one JSON document: %s\nstderr: %s", run.stdout, run.stderr)
	return doc, run
}

// actions returns "<action> <object>" of every object of doc.
func (d diffJSON) actions() []string {
	var out []string
	for _, o := range d.Objects {
		out = append(out, o.Action+" "+o.Object)
	}
	return out
}

// install deploys the chart with set the way deploy does, without
// waiting: the rendered objects are applied with the Applier and recorded
// as the deployed revision 1, so that diff finds the release and its
// manifest for prune detection. Then it waits until the Deployment
// controller has seen the Deployment (it writes an annotation and status).
func (f *diffFixture) install(t *testing.T, set ...string) {
	t.Helper()
	f.installChart(t, diffChart, set...)
}

func (f *diffFixture) installChart(t *testing.T, chart string, set ...string) {
	t.Helper()
	ctx := context.Background()
	ch, err := charts.Load(chart)
	require.NoError(t, err)
	r, err := charts.RenderContext(context.Background(), ch, charts.RenderOptions{ReleaseName: diffRelease, Namespace: f.namespace, Set: set, Revision: 1})
	require.NoError(t, err)
	a, err := newApplierForConfig(f.cfg)
	require.NoError(t, err)
	_, err = a.Apply(ctx, r.Objects, cluster.ApplyOptions{Namespace: f.namespace, Release: diffRelease})
	require.NoError(t, err)
	now := time.Now()
	// What a deploy records: diff compares the hooks and notes too.
	hooks, err := storage.HooksOf(r.Hooks)
	require.NoError(t, err)
	require.NoError(t, storage.NewSecrets(f.client, f.namespace).Create(ctx, &storage.Release{
		Name: diffRelease, Revision: 1, Status: storage.StatusDeployed, Description: "Install complete",
		Chart:  storage.Chart{Name: r.Chart.Name, Version: r.Chart.Version, AppVersion: r.Chart.AppVersion},
		Values: r.UserValues, Manifest: r.Manifest, Hooks: hooks, Notes: r.Notes, Created: now, Updated: now,
	}))
	eventually(t, 30*time.Second, "the Deployment controller observes the Deployment", func(ctx context.Context) (bool, error) {
		d, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, diffRelease, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ObservedGeneration == d.Generation && d.Annotations["deployment.kubernetes.io/revision"] != "", nil
	})
}

// assertNoSecret fails when any run's output holds any of values, raw or
// base64-encoded.
func assertNoSecret(t *testing.T, runs []diffRun, values ...string) {
	t.Helper()
	for i, run := range runs {
		for _, v := range values {
			for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v))} {
				assert.False(t, bytes.Contains(run.stdout, []byte(form)), "run %d: stdout holds a Secret value (%d bytes)", i, len(form))
				assert.False(t, bytes.Contains(run.stderr, []byte(form)), "run %d: stderr holds a Secret value (%d bytes)", i, len(form))
			}
		}
	}
}

// changedLines returns the added and removed lines of a diff.
func changedLines(diff string) []string {
	var out []string
	for _, l := range strings.Split(diff, "\n") {
		if (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) && !strings.HasPrefix(l, "+++") && !strings.HasPrefix(l, "---") {
			out = append(out, l)
		}
	}
	return out
}

func TestDiffNotInstalledIsAllCreate(t *testing.T) {
	shareCluster(t, 4)
	f := newDiffFixture(t)
	doc, run := f.diffJSON(t)
	assert.Equal(t, 1, run.code, "changes found; stderr: %s", run.stderr)
	assert.Equal(t, []string{
		"create policy/v1 PodDisruptionBudget " + f.namespace + "/web",
		"create v1 Secret " + f.namespace + "/web-creds",
		"create v1 ConfigMap " + f.namespace + "/web-config",
		"create v1 Service " + f.namespace + "/web",
		"create apps/v1 Deployment " + f.namespace + "/web",
	}, doc.actions(), "Helm's install order")
	assert.Equal(t, map[string]int{"change": 0, "create": 5, "prune": 0}, doc.Summary)
	assertNoSecret(t, []diffRun{run}, "changeme", "inference")
	_, err := f.client.CoreV1().ConfigMaps(f.namespace).Get(context.Background(), "web-config", metav1.GetOptions{})
	assert.Error(t, err, "a diff creates nothing")
}

func TestDiffAgainstTheCluster(t *testing.T) {
	shareCluster(t, 4)
	f := newDiffFixture(t)
	const (
		oldToken = "tok-old-9fQ2xLr7Vb"
		newToken = "tok-new-3hW8pKd1Zs"
		oldUser  = "user-old-Mn5Tq2"
		newUser  = "user-new-Rc8Yw4"
	)
	base := []string{"secret.token=" + oldToken, "secret.user=" + oldUser}
	f.install(t, base...)
	setArgs := func(extra ...string) []string {
		var args []string
		for _, s := range append(append([]string(nil), base...), extra...) {
			args = append(args, "--set", s)
		}
		return args
	}

	t.Run("same values: no changes, exit 0", func(t *testing.T) {
		run := f.diff(t, setArgs()...)
		assert.Equal(t, 0, run.code, "stderr: %s", run.stderr)
		assert.Equal(t, "no changes\n", string(run.stdout), "no object, and no API-server default (imagePullPolicy, terminationMessagePath, ...) shows")
		assert.Empty(t, run.stderr)

		doc, jrun := f.diffJSON(t, setArgs()...)
		assert.Equal(t, 0, jrun.code)
		assert.Empty(t, doc.Objects)
		assert.Equal(t, map[string]int{"change": 0, "create": 0, "prune": 0}, doc.Summary)
	})

	t.Run("image, ConfigMap value and PDB removed: exactly those three", func(t *testing.T) {
		args := setArgs("image=vllm/vllm-openai:v0.11.1", "config.model=Qwen/Qwen3-1.7B", "pdb.enabled=false")
		doc, run := f.diffJSON(t, args...)
		assert.Equal(t, 1, run.code, "stderr: %s", run.stderr)
		assert.Empty(t, run.stderr, "changes found prints nothing more")
		ns := f.namespace
		assert.Equal(t, []string{
			"change v1 ConfigMap " + ns + "/web-config",
			"change apps/v1 Deployment " + ns + "/web",
			"prune policy/v1 PodDisruptionBudget " + ns + "/web",
		}, doc.actions())
		assert.Equal(t, map[string]int{"change": 2, "create": 0, "prune": 1}, doc.Summary)
		require.Len(t, doc.Objects, 3)
		assert.Equal(t, []string{`-  model: Qwen/Qwen3-0.6B`, `+  model: Qwen/Qwen3-1.7B`}, changedLines(doc.Objects[0].Diff))
		assert.Equal(t, []string{`-        image: vllm/vllm-openai:v0.11.0`, `+        image: vllm/vllm-openai:v0.11.1`}, changedLines(doc.Objects[1].Diff),
			"only the image: no default, no replicas, no server-set field")
		for _, l := range changedLines(doc.Objects[2].Diff) {
			assert.True(t, strings.HasPrefix(l, "-"), "a prune is all removed: %q", l)
		}

		text := f.diff(t, args...)
		assert.Equal(t, 1, text.code)
		out := string(text.stdout)
		assert.Contains(t, out, "~ v1 ConfigMap "+ns+"/web-config\n")
		assert.Contains(t, out, "~ apps/v1 Deployment "+ns+"/web\n  rolls out a new ReplicaSet: 1 pod, maxSurge 1 (25%), maxUnavailable 0, needs up to 1 extra GPU\n")
		assert.Contains(t, out, "- policy/v1 PodDisruptionBudget "+ns+"/web\n")
		assert.True(t, strings.HasSuffix(out, "\n2 to change, 0 to create, 1 to prune\n"), out)
		assert.NotContains(t, out, "\x1b[", "no colours when stdout is not a terminal")
		for _, field := range []string{"imagePullPolicy", "terminationMessagePath", "dnsPolicy", "schedulerName", "managedFields", "resourceVersion", "uid:", "status:"} {
			for _, l := range changedLines(out) {
				assert.NotContains(t, l, field)
			}
		}
		assertNoSecret(t, []diffRun{run, text}, oldToken, newToken, oldUser)
	})

	t.Run("Secret values: (changed), never the values", func(t *testing.T) {
		args := []string{"--set", "secret.token=" + newToken, "--set", "secret.user=" + newUser}
		doc, run := f.diffJSON(t, args...)
		assert.Equal(t, 1, run.code, "stderr: %s", run.stderr)
		require.Equal(t, []string{"change v1 Secret " + f.namespace + "/web-creds"}, doc.actions())
		assert.Equal(t, []string{"-  token: (changed)", "-  user: (changed)", "+  token: (changed)", "+  user: (changed)"},
			changedLines(doc.Objects[0].Diff))
		text := f.diff(t, args...)
		assert.Equal(t, 1, text.code)
		assert.Contains(t, string(text.stdout), "(changed)")
		yamlRun := f.diff(t, append(args, "-o", "yaml")...)
		assert.Equal(t, 1, yamlRun.code)
		assertNoSecret(t, []diffRun{run, text, yamlRun}, oldToken, newToken, oldUser, newUser)

		unchanged := f.diff(t, "--set", "secret.token="+newToken, "--set", "secret.user="+oldUser)
		assert.Contains(t, string(unchanged.stdout), "   user: (unchanged)\n")
		assertNoSecret(t, []diffRun{unchanged}, oldToken, newToken, oldUser, newUser)
	})

	t.Run("hand edits by other field managers show", func(t *testing.T) {
		ctx := context.Background()
		deps := f.client.AppsV1().Deployments(f.namespace)
		_, err := deps.UpdateScale(ctx, diffRelease, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: diffRelease, Namespace: f.namespace},
			Spec:       autoscalingv1.ScaleSpec{Replicas: 2},
		}, metav1.UpdateOptions{FieldManager: "hand-scale"})
		require.NoError(t, err)
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := deps.Get(ctx, diffRelease, metav1.GetOptions{})
			if err != nil {
				return err
			}
			d.Spec.Template.Spec.Containers[0].Env[0].Value = "debug"
			_, err = deps.Update(ctx, d, metav1.UpdateOptions{FieldManager: "hand-edit"})
			return err
		}))

		// Without --force-conflicts the drift still shows (dry-run again
		// with force), and the header says deploy needs the flag.
		refused := f.diff(t, setArgs()...)
		assert.Equal(t, 1, refused.code, "a conflict is a change; stderr: %s", refused.stderr)
		assert.Contains(t, string(refused.stdout), "~ apps/v1 Deployment "+f.namespace+"/web (conflict: ")
		assert.Contains(t, string(refused.stdout), `.spec.replicas owned by "hand-scale"`)
		assert.Contains(t, string(refused.stdout), `owned by "hand-edit"; deploy needs --force-conflicts)`)
		assert.Contains(t, string(refused.stdout), "-  replicas: 2\n+  replicas: 1\n")
		conflicted, crun := f.diffJSON(t, setArgs()...)
		assert.Equal(t, 1, crun.code, "stderr: %s", crun.stderr)
		require.Equal(t, []string{"change apps/v1 Deployment " + f.namespace + "/web"}, conflicted.actions())
		var managers []string
		for _, c := range conflicted.Objects[0].Conflicts {
			managers = append(managers, c.Manager)
		}
		assert.ElementsMatch(t, []string{"hand-scale", "hand-edit"}, managers)

		doc, run := f.diffJSON(t, append(setArgs(), "--force-conflicts")...)
		assert.Equal(t, 1, run.code, "stderr: %s", run.stderr)
		require.Equal(t, []string{"change apps/v1 Deployment " + f.namespace + "/web"}, doc.actions())
		assert.ElementsMatch(t, []string{
			"-  replicas: 2", "+  replicas: 1",
			"-          value: debug", "+          value: info",
		}, changedLines(doc.Objects[0].Diff))

		text := f.diff(t, append(setArgs(), "--force-conflicts")...)
		assert.Contains(t, string(text.stdout), "rolls out a new ReplicaSet: 1 pod, maxSurge 1 (25%), maxUnavailable 0, needs up to 1 extra GPU")
		assert.Empty(t, doc.Objects[0].Conflicts, "--force-conflicts: nothing refused")
		assert.Equal(t, changedLines(conflicted.Objects[0].Diff), changedLines(doc.Objects[0].Diff), "the same drift either way")
		assertNoSecret(t, []diffRun{refused, crun, run, text}, oldToken, oldUser)
	})
}

// TestDiffFollowsTheHPARule: the dry run takes the deploy's path, so a
// Deployment an HPA takes over never shows .spec.replicas as a difference.
func TestDiffFollowsTheHPARule(t *testing.T) {
	shareCluster(t, 4)
	f := newDiffFixture(t)
	small := "resources.requests.cpu=10m,resources.requests.memory=16Mi,resources.limits.cpu=10m," +
		"resources.limits.memory=16Mi,shm.enabled=false,replicaCount=2"
	f.installChart(t, "vllm", small)

	// Turning the autoscaler on: the Deployment no longer sets replicas,
	// the HPA is created; replicas stay as they are (handover), no diff.
	doc, run := f.diffJSONOf(t, "vllm", "--set", small, "--set", "autoscaling.enabled=true,autoscaling.minReplicas=1,autoscaling.maxReplicas=2")
	assert.Equal(t, 1, run.code, "stderr: %s", run.stderr)
	assert.Equal(t, []string{"create autoscaling/v2 HorizontalPodAutoscaler " + f.namespace + "/web"}, doc.actions())

	// The autoscaler (here: another manager through the scale subresource)
	// changes replicas; a Deployment without replicas does not fight it.
	ctx := context.Background()
	ch, err := charts.Load("vllm")
	require.NoError(t, err)
	r, err := charts.RenderContext(context.Background(), ch, charts.RenderOptions{ReleaseName: diffRelease, Namespace: f.namespace, Revision: 2,
		Set: []string{small, "autoscaling.enabled=true,autoscaling.minReplicas=1,autoscaling.maxReplicas=2"}})
	require.NoError(t, err)
	a, err := newApplierForConfig(f.cfg)
	require.NoError(t, err)
	_, err = a.Apply(ctx, r.Objects, cluster.ApplyOptions{Namespace: f.namespace, Release: diffRelease})
	require.NoError(t, err)
	_, err = f.client.AppsV1().Deployments(f.namespace).UpdateScale(ctx, diffRelease, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: diffRelease, Namespace: f.namespace},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 1},
	}, metav1.UpdateOptions{FieldManager: "hpa-stand-in"})
	require.NoError(t, err)
	run = f.diffOf(t, "vllm", "--set", small, "--set", "autoscaling.enabled=true,autoscaling.minReplicas=1,autoscaling.maxReplicas=2")
	assert.Equal(t, 0, run.code, "stdout: %s\nstderr: %s", run.stdout, run.stderr)
	assert.Equal(t, "no changes\n", string(run.stdout))
}

func TestDiffInvalidInputExits2(t *testing.T) {
	shareCluster(t, 4)
	f := newDiffFixture(t)
	run := f.diff(t, "-f", "does-not-exist.yaml")
	assert.Equal(t, 2, run.code, "stderr: %s", run.stderr)
	assert.Empty(t, run.stdout)
	run = f.vllmctl(t, "diff", "Not_A_Name", diffChart)
	assert.Equal(t, 2, run.code, "stderr: %s", run.stderr)
}
