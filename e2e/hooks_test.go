//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/testregistry"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

const hookChart = "testdata/hookchart"

// hookRuns are "event name phase" of a result's hooks.
func hookRuns(res *release.Result) []string {
	var out []string
	for _, h := range res.Hooks {
		out = append(out, string(h.Event)+" "+h.Name+" "+h.Phase)
	}
	return out
}

// hookObjects are the names of the Jobs, ConfigMaps and bare Pods of ns
// that hooks leave behind.
func (e *env) hookObjects(t *testing.T, ns string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	jobs, err := e.client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, j := range jobs.Items {
		out = append(out, "Job "+j.Name)
	}
	cms, err := e.client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, c := range cms.Items {
		if c.Name != "kube-root-ca.crt" {
			out = append(out, "ConfigMap "+c.Name)
		}
	}
	pods, err := e.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if len(p.OwnerReferences) == 0 && p.DeletionTimestamp == nil {
			out = append(out, "Pod "+p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Hooks on the local cluster: a pre-install/pre-upgrade Job, three
// pre-upgrade hooks ordered by weight, a post-upgrade Pod; each deleted as
// its policy says, exactly as Helm 4 leaves them (the same chart and
// values installed and upgraded by helm in another namespace); the Job
// whose (immutable) pod template changed is replaced; the pre-upgrade
// hooks complete before the Deployment changes; a crash-looping
// pre-upgrade hook fails the deploy at once, naming its pod, and the
// previous revision serves (exit 3), the Deployment unchanged.
func TestDeployHooksOnTheCluster(t *testing.T) {
	shareCluster(t, 4)
	_, helmBin := testregistry.Bins(t)
	f := newRelFixture(t)
	ctx := context.Background()
	deploy := func(args ...string) (relRun, *release.Result) {
		r := f.run(t, append([]string{"deploy", "hk", hookChart, "--progress", "plain", "--timeout", "2m", "-o", "json"}, args...)...)
		res := &release.Result{}
		if r.stdout != "" {
			requireSchemaValid(t, "result", r.stdout)
			require.NoError(t, json.Unmarshal([]byte(r.stdout), res), "%s", r)
		}
		return r, res
	}
	upgrade := []string{"--set", "image=example.com/vllm:v2", "--set", "migrateArgs={--step=2}"}

	r, res := deploy()
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	assert.Equal(t, []string{"pre-install hk-migrate succeeded", "post-install hk-post succeeded"}, hookRuns(res))
	firstMigrate, err := f.client.BatchV1().Jobs(f.namespace).Get(ctx, "hk-migrate", metav1.GetOptions{})
	require.NoError(t, err)

	r, res = deploy(upgrade...)
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	assert.Equal(t, []string{"pre-upgrade hk-first succeeded", "pre-upgrade hk-migrate succeeded", "pre-upgrade hk-last succeeded",
		"post-upgrade hk-post succeeded"}, hookRuns(res), "by weight: -2, 0, 5")
	assert.NotContains(t, r.stderr, "field is immutable")
	migrate, err := f.client.BatchV1().Jobs(f.namespace).Get(ctx, "hk-migrate", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, firstMigrate.UID, migrate.UID, "the changed Job was replaced")
	assert.Equal(t, []string{"--step=2"}, migrate.Spec.Template.Spec.Containers[0].Args)
	require.NotNil(t, migrate.Status.CompletionTime)
	rss, err := f.client.AppsV1().ReplicaSets(f.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=hk"})
	require.NoError(t, err)
	var v2 *metav1.Time
	for _, rs := range rss.Items {
		if rs.Spec.Template.Spec.Containers[0].Image == "example.com/vllm:v2" {
			v2 = &rs.CreationTimestamp
		}
	}
	require.NotNil(t, v2, "the upgrade's ReplicaSet")
	assert.False(t, v2.Before(migrate.Status.CompletionTime), "the pre-upgrade Job completed (%s) before the Deployment changed (%s)",
		migrate.Status.CompletionTime, v2)
	ours := f.hookObjects(t, f.namespace)
	assert.Equal(t, []string{"ConfigMap hk-last", "Job hk-migrate"}, ours)

	t.Run("Helm 4 leaves the same hook objects", func(t *testing.T) {
		other := newEnv(t)
		helm := testregistry.Helm(t, helmBin, []string{"KUBECONFIG=" + f.kubeconfig, "HOME=" + t.TempDir()})
		chartDir, err := filepath.Abs(hookChart)
		require.NoError(t, err)
		helm("", "install", "hk", chartDir, "-n", other.namespace, "--timeout", "2m")
		helm("", append([]string{"upgrade", "hk", chartDir, "-n", other.namespace, "--timeout", "2m"}, upgrade...)...)
		assert.Equal(t, ours, other.hookObjects(t, other.namespace))
	})

	r, res = deploy("--set", "image=example.com/vllm:v3", "--set", "migrateImage=example.com/migrate-crash:v1")
	assert.Equal(t, exitcode.RolledBack, r.code, "%s", r)
	require.NotNil(t, res.Failure, "%s", r)
	assert.Equal(t, "CrashLoopBackOff", res.Failure.Reason)
	assert.True(t, strings.HasPrefix(res.Failure.Pod, "hk-migrate-"), "the hook's pod is named: %+v", res.Failure)
	assert.Equal(t, "migrate", res.Failure.Container)
	assert.Contains(t, r.stderr, "pre-upgrade hook Job/hk-migrate failed")
	d, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, "hk", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "example.com/vllm:v2", d.Spec.Template.Spec.Containers[0].Image, "the Deployment never changed")
	assert.Equal(t, 2, res.RolledBackTo)
}

// A chart made by `helm create` deploys without its test Pod (a hook);
// `vllmctl test` then runs it and reports it passed.
func TestHelmCreateChartTestHook(t *testing.T) {
	shareCluster(t, 4)
	_, helmBin := testregistry.Bins(t)
	f := newRelFixture(t)
	dir := t.TempDir()
	helm := testregistry.Helm(t, helmBin, []string{"HOME=" + t.TempDir()})
	helm("", "create", filepath.Join(dir, "web"))

	r := f.run(t, "deploy", "web", filepath.Join(dir, "web"), "--progress", "plain", "--timeout", "2m")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	pods, err := f.client.CoreV1().Pods(f.namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		assert.NotEqual(t, "web-test-connection", p.Name, "the test hook is not deployed")
	}

	r = f.run(t, "test", "web")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	assert.Regexp(t, `web-test-connection\s+Pod\s+succeeded`, r.stdout)
	pod, err := f.client.CoreV1().Pods(f.namespace).Get(context.Background(), "web-test-connection", metav1.GetOptions{})
	require.NoError(t, err, "before-hook-creation: kept after it ran")
	assert.Equal(t, corev1.PodSucceeded, pod.Status.Phase)

	r = f.run(t, "test", "web", "-o", "json")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	var tr release.TestResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &tr))
	assert.True(t, tr.Passed)
	require.Len(t, tr.Tests, 1)
	assert.NotEqual(t, pod.UID, "", "ran again: a new pod")
}

// A deploy that changes only a hook (the pre-upgrade Job's image) is not
// "up to date": diff reports the hook's change (exit 1), the deploy makes
// revision 2 whose record keeps the new hook, and the pre-upgrade hooks
// run with the new image; the same inputs again are up to date.
func TestHookOnlyChangeMakesARevision(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()
	r := f.run(t, "deploy", "hko", hookChart, "--progress", "plain", "--timeout", "2m")
	require.Equal(t, exitcode.OK, r.code, "%s", r)

	changed := []string{"--set", "migrateImage=example.com/migrate:v2"}
	r = f.run(t, append([]string{"diff", "hko", hookChart}, changed...)...)
	assert.Equal(t, exitcode.Changes, r.code, "%s", r)
	assert.Contains(t, r.stdout, "~ hook batch/v1 Job "+f.namespace+"/hko-migrate\n")
	assert.Contains(t, r.stdout, "+        image: example.com/migrate:v2\n")
	assert.Contains(t, r.stdout, "0 to change, 0 to create, 0 to prune, 1 recorded change (hooks, notes, CRDs)")

	r = f.run(t, append([]string{"deploy", "hko", hookChart, "--progress", "plain", "--timeout", "2m", "-o", "json"}, changed...)...)
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	res := &release.Result{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), res), "%s", r)
	assert.Equal(t, 2, res.Revision, "a new revision")
	assert.NotContains(t, res.Description, "up to date")
	assert.Contains(t, hookRuns(res), "pre-upgrade hko-migrate succeeded")
	job, err := f.client.BatchV1().Jobs(f.namespace).Get(ctx, "hko-migrate", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "example.com/migrate:v2", job.Spec.Template.Spec.Containers[0].Image, "the new hook ran")

	r = f.run(t, "get", "hooks", "hko")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	assert.Contains(t, r.stdout, "example.com/migrate:v2")
	assert.NotContains(t, r.stdout, "example.com/migrate:v1")

	r = f.run(t, append([]string{"deploy", "hko", hookChart, "--progress", "plain", "--timeout", "2m"}, changed...)...)
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	assert.Contains(t, r.stderr, "release hko is up to date (revision 2)")
}

// TestSignalDuringPreUpgradeHook: SIGINT, SIGTERM or SIGHUP while a
// pre-upgrade hook Job runs, before anything of the release was applied,
// is exit 130 (the contract's for all three): no
// rollback revision (revision 1 stays deployed, revision 2 is failed,
// "Upgrade interrupted"), no lock left, the hook Job deleted by its
// hook-failed policy (an interrupted hook failed), nothing of the release
// changed; the next deploy works.
func TestSignalDuringPreUpgradeHook(t *testing.T) {
	shareCluster(t, 4)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) { signalDuringPreUpgradeHook(t, sig) })
	}
}

func signalDuringPreUpgradeHook(t *testing.T, sig syscall.Signal) {
	f := newRelFixture(t)
	const rel = "hks"
	deploy := func(args ...string) []string {
		return append([]string{"deploy", rel, hookChart, "--progress", "plain", "--timeout", "5m", "-o", "json"}, args...)
	}
	r := f.run(t, deploy()...)
	require.Equal(t, 0, r.code, "%s", r)
	before, err := f.client.AppsV1().Deployments(f.namespace).Get(context.Background(), rel, metav1.GetOptions{})
	require.NoError(t, err)

	p := f.start(t, deploy("--set", "image=example.com/vllm:v2", "--set", "readyDelay=1h", "--set", "firstDeletePolicy=hook-failed")...)
	p.waitProgress(t, rel+"#2 hook: batch/v1 Job "+f.namespace+"/"+rel+"-first: running")
	require.NoError(t, p.cmd.Process.Signal(sig))
	r = p.wait(t)
	t.Logf("%s during the pre-upgrade hook: exit %d: %s", sig, r.code, lastLine(r.stderr))

	require.Equal(t, 130, r.code, "%s", r)
	res := result(t, r)
	assert.Zero(t, res.RolledBackTo, "nothing to roll back")
	if assert.NotNil(t, res.Failure) {
		assert.Equal(t, "Interrupted", res.Failure.Reason)
	}
	revs, err := storage.History(context.Background(), f.store, rel)
	require.NoError(t, err)
	assert.Equal(t, []storage.Status{storage.StatusDeployed, storage.StatusFailed}, statuses(revs), "no rollback revision")
	assert.Equal(t, "Upgrade interrupted", revs[1].Description)
	pending, err := f.store.List(context.Background(), rel)
	require.NoError(t, err)
	for _, e := range pending {
		assert.False(t, e.Status.IsPending(), "no lock left: revision %d is %s", e.Revision, e.Status)
	}
	eventually(t, time.Minute, "the interrupted hook Job deleted (hook-failed)", func(ctx context.Context) (bool, error) {
		_, err := f.client.BatchV1().Jobs(f.namespace).Get(ctx, rel+"-first", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	after, err := f.client.AppsV1().Deployments(f.namespace).Get(context.Background(), rel, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.Generation, after.Generation, "nothing of the release applied")

	r = f.run(t, deploy("--set", "image=example.com/vllm:v2")...)
	require.Equal(t, 0, r.code, "the next deploy: %s", r)
}
