//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The serve check on the local cluster: the built-in chart's pods serve
// through the API server's port-forward (cmd/devcluster/vllmsim), and an
// image tag chooses how (serve-wrongmodel, serve-hang).

// serveDeploy deploys the built-in chart small (servingValues, the served
// model e2e-model) at image tag, with args, and returns the run.
func (f *relFixture) serveDeploy(t *testing.T, tag string, args ...string) relRun {
	t.Helper()
	base := append([]string{"deploy", relName, "vllm", "--timeout", "2m", "--set", "image.tag=" + tag}, servingValues...)
	return f.run(t, append(base, args...)...)
}

// serveResult parses a run's -o json result.
func serveResult(t *testing.T, r relRun) *release.Result {
	t.Helper()
	return result(t, r)
}

// requireNotServing checks a failed rollout's result: verdict NotServing,
// naming a pod of the new ReplicaSet, with message (and evidence) saying
// what it answered.
func requireNotServing(t *testing.T, res *release.Result, message string) {
	t.Helper()
	require.NotNil(t, res.Failure, "failure")
	assert.Equal(t, rollout.VerdictNotServing, res.Failure.Verdict)
	assert.Equal(t, "NotServing", res.Failure.Reason)
	assert.Equal(t, "deployment/"+relName, res.Failure.Object)
	assert.NotEmpty(t, res.Failure.Pod)
	assert.Contains(t, res.Failure.Message, message)
	assert.NotEmpty(t, res.Failure.Evidence)
	require.NotNil(t, res.ServeCheck, "the result keeps the serve check")
	assert.Equal(t, rollout.ServeFailed, res.ServeCheck.Outcome)
}

// TestServeCheckCatchesWrongModel: a healthy deploy passes the serve check
// (result, record, status and the progress lines show it per pod); an
// upgrade whose pods list another model is Ready but NotServing: exit 3,
// rolled back, the old ReplicaSet serves again, history consistent.
func TestServeCheckCatchesWrongModel(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	r := f.serveDeploy(t, "v0.11.0", "-o", "json", "--progress", "plain")
	require.Equal(t, 0, r.code, "revision 1\n%s", r)
	first := serveResult(t, r)
	require.NotNil(t, first.ServeCheck)
	assert.Equal(t, rollout.ServePassed, first.ServeCheck.Outcome)
	assert.Equal(t, "e2e-model", first.ServeCheck.Model)
	require.Len(t, first.ServeCheck.Pods, 1)
	pod := first.ServeCheck.Pods[0]
	assert.Equal(t, 200, pod.Status)
	assert.Equal(t, rollout.ServePassed, pod.Outcome)
	assert.True(t, strings.HasPrefix(pod.Pod, first.ReplicaSets[0].Name+"-"), "the new ReplicaSet's pod: %s", pod.Pod)
	assert.Contains(t, r.stderr, "serve: Pod "+f.namespace+"/"+pod.Pod+": serving: e2e-model listed, completion 200 in ")
	rec := f.history(t)[0]
	require.NotNil(t, rec.ServeCheck, "the record keeps the check")
	assert.Equal(t, rollout.ServePassed, rec.ServeCheck.Outcome)
	st := f.run(t, "status", relName, "-o", "json")
	require.Equal(t, 0, st.code, "%s", st)
	requireSchemaValid(t, "status", st.stdout)
	var status release.StatusReport
	require.NoError(t, json.Unmarshal([]byte(st.stdout), &status))
	require.NotNil(t, status.ServeCheck)
	assert.Equal(t, pod.Pod, status.ServeCheck.Pods[0].Pod)

	r = f.serveDeploy(t, "v0.11.0-serve-wrongmodel", "-o", "json", "--progress", "json")
	require.Equal(t, 3, r.code, "revision 2\n%s", r)
	res := serveResult(t, r)
	requireNotServing(t, res, "GET /v1/models lists facebook/opt-125m, not e2e-model")
	assert.Equal(t, 1, res.RolledBackTo)
	// The progress (JSON lines) reports the check per pod.
	var serveLines []release.ProgressEvent
	sc := bufio.NewScanner(strings.NewReader(r.stderr))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev release.ProgressEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Phase == release.PhaseServe && ev.Revision == 2 {
			serveLines = append(serveLines, ev)
		}
	}
	require.NotEmpty(t, serveLines, "serve progress\n%s", r.stderr)
	var notServing bool
	for _, ev := range serveLines {
		notServing = notServing || (ev.Status == "not serving" && ev.Object == "Pod "+f.namespace+"/"+res.Failure.Pod)
	}
	assert.True(t, notServing, "a not serving line for %s: %+v", res.Failure.Pod, serveLines)

	revs := f.assertConsistent(t, 3)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusFailed, storage.StatusDeployed}, statuses(revs))
	require.NotNil(t, revs[1].ServeCheck)
	assert.Equal(t, rollout.ServeFailed, revs[1].ServeCheck.Outcome)
	assert.Equal(t, 1, revs[2].RollbackOf)
	require.NotNil(t, revs[2].ServeCheck, "the rollback checks the restored pods")
	assert.Equal(t, rollout.ServePassed, revs[2].ServeCheck.Outcome)
	f.assertServingWith(t, first.ReplicaSets[0], 1, releaseSelector)
}

// TestServeCheckTimeout: pods that accept and never answer hit
// --serve-check-timeout: NotServing, exit 3.
func TestServeCheckTimeout(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	r := f.serveDeploy(t, "v0.11.0", "--progress", "plain")
	require.Equal(t, 0, r.code, "revision 1\n%s", r)
	start := time.Now()
	r = f.serveDeploy(t, "v0.11.0-serve-hang", "-o", "json", "--progress", "plain", "--serve-check-timeout", "5s")
	require.Equal(t, 3, r.code, "revision 2\n%s", r)
	res := serveResult(t, r)
	requireNotServing(t, res, "GET /v1/models: no answer within 5s")
	assert.Equal(t, "5s", res.ServeCheck.Timeout)
	assert.Equal(t, 0, res.ServeCheck.Pods[0].Status)
	assert.GreaterOrEqual(t, res.ServeCheck.Pods[0].LatencyMs, int64(4000))
	assert.Less(t, time.Since(start), 100*time.Second, "bounded by the check's timeout, not the chart's 60s")
	assert.Equal(t, 1, res.RolledBackTo)
	f.assertConsistent(t, 3)
}

// TestServeCheckCanary: a canary whose pod lists another model fails at
// its serve check, before the hold and the gate: the gate never runs,
// exit 3, the stable pods were kept.
func TestServeCheckCanary(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	r := f.serveDeploy(t, "v0.11.0", "--progress", "plain", "--set", "replicaCount=2")
	require.Equal(t, 0, r.code, "revision 1\n%s", r)
	marker := filepath.Join(t.TempDir(), "gate-ran")
	r = f.serveDeploy(t, "v0.11.0-serve-wrongmodel", "-o", "json", "--progress", "plain", "--set", "replicaCount=2",
		"--canary", "1", "--canary-hold", "5s", "--canary-gate", "touch "+marker)
	require.Equal(t, 3, r.code, "revision 2\n%s", r)
	res := serveResult(t, r)
	requireNotServing(t, res, "lists facebook/opt-125m, not e2e-model")
	require.NotNil(t, res.Canary)
	assert.Equal(t, storage.CanaryFailed, res.Canary.Outcome)
	var phases []string
	for _, p := range res.Canary.Phases {
		phases = append(phases, p.Name)
	}
	assert.Equal(t, []string{canary.PhaseStarting, canary.PhaseServeCheck}, phases, "no hold, no gate")
	assert.Nil(t, res.Canary.Gate)
	_, err := os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "the gate never ran")
	assert.Equal(t, res.Canary.Pods, []string{res.Failure.Pod}, "the canary pod was checked")
	f.assertConsistent(t, 3)
}

// TestServeCheckTestCommand: `vllmctl test` runs the serve check on the
// pods that serve (no test Pod needed for it): it passes on a healthy
// release and fails, exit 4, once pods listing another model serve (a
// deploy with --no-rollback left them).
func TestServeCheckTestCommand(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	r := f.serveDeploy(t, "v0.11.0", "--progress", "plain")
	require.Equal(t, 0, r.code, "revision 1\n%s", r)
	tr := f.run(t, "test", relName, "-o", "json", "--progress", "plain")
	require.Equal(t, 0, tr.code, "test\n%s", tr)
	var passed release.TestResult
	require.NoError(t, json.Unmarshal([]byte(tr.stdout), &passed), "%s", tr)
	assert.True(t, passed.Passed)
	require.NotNil(t, passed.ServeCheck)
	assert.Equal(t, rollout.ServePassed, passed.ServeCheck.Outcome)
	assert.Len(t, passed.ServeCheck.Pods, 1)

	r = f.serveDeploy(t, "v0.11.0-serve-wrongmodel", "--progress", "plain", "--no-rollback")
	require.Equal(t, 4, r.code, "revision 2\n%s", r)
	assert.Contains(t, r.stderr, "NotServing")
	tr = f.run(t, "test", relName, "--progress", "plain")
	require.Equal(t, 4, tr.code, "test\n%s", tr)
	assert.Contains(t, tr.stdout, "SERVE CHECK: failed")
	assert.Contains(t, tr.stderr, "serve check: pod ")
	assert.Contains(t, tr.stderr, "lists facebook/opt-125m, not e2e-model")
}

// TestServeCheckGroupLeaders: of a multi-node release, only each group's
// leader (rank 0, the pod the Service selects) serves the API and is
// checked, not its workers nor the pods the headless Service names.
func TestServeCheckGroupLeaders(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	r := f.deployGroups(t)
	require.Equal(t, 0, r.code, "%s", r)
	res := serveResult(t, r)
	require.NotNil(t, res.ServeCheck)
	assert.Equal(t, rollout.ServePassed, res.ServeCheck.Outcome)
	var pods []string
	for _, p := range res.ServeCheck.Pods {
		pods = append(pods, p.Pod)
	}
	assert.ElementsMatch(t, []string{groupNames[0] + "-0", groupNames[1] + "-0"}, pods)
}
