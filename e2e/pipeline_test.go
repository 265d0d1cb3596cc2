//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// ciDeploy is one run of hack/ci-deploy.sh: its exit code, what it wrote
// into its output directory and into the GitHub Actions files.
type ciDeploy struct {
	relRun
	result        string // result.json
	summary       string // summary.md
	outcome       string // outcome
	stepSummary   string // $GITHUB_STEP_SUMMARY
	githubOutputs string // $GITHUB_OUTPUT
}

// runCIDeploy runs hack/ci-deploy.sh RELEASE relChart args... against the
// test namespace, as the pipelines of docs/ci.md run it.
func (f *relFixture) runCIDeploy(t *testing.T, args ...string) ciDeploy {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "vllmctl-deploy")
	stepSummary, outputs := filepath.Join(dir, "step-summary.md"), filepath.Join(dir, "github-output")
	script, err := filepath.Abs(filepath.Join("..", "hack", "ci-deploy.sh"))
	require.NoError(t, err)
	chart, err := filepath.Abs(relChart)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmdArgs := append([]string{script, relName, chart, "--kubeconfig", f.kubeconfig, "-n", f.namespace, "--timeout", "2m"}, args...)
	cmd := exec.CommandContext(ctx, "bash", cmdArgs...)
	cmd.Dir = dir
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VLLMCTL") && !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "GITHUB_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "HOME="+f.home, "XDG_CONFIG_HOME="+f.home, "VLLMCTL="+f.bin,
		"CI_DEPLOY_OUT="+out, "GITHUB_STEP_SUMMARY="+stepSummary, "GITHUB_OUTPUT="+outputs)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := exitCodeOf(t, cmd.Run())

	read := func(path string) string {
		b, err := os.ReadFile(path)
		require.NoError(t, err, "ci-deploy.sh writes %s (exit %d)\nstderr:\n%s", path, code, stderr.String())
		return string(b)
	}
	return ciDeploy{
		relRun:        relRun{stdout: stdout.String(), stderr: stderr.String(), code: code},
		result:        read(filepath.Join(out, "result.json")),
		summary:       read(filepath.Join(out, "summary.md")),
		outcome:       strings.TrimSpace(read(filepath.Join(out, "outcome"))),
		stepSummary:   read(stepSummary),
		githubOutputs: read(outputs),
	}
}

// deployedRevision is the release's deployed revision (0: none).
func (f *relFixture) deployedRevision(t *testing.T) int {
	t.Helper()
	for _, r := range f.history(t) {
		if r.Status == storage.StatusDeployed {
			return r.Revision
		}
	}
	return 0
}

// TestPipelineScript runs hack/ci-deploy.sh, the shell part of docs/ci.md's
// GitHub Actions and GitLab CI jobs, on the local cluster: a healthy
// install, crash-looping upgrades (a failure naming no known cause, and a
// vLLM out of GPU memory) rolled back with their diagnosis in the summary,
// and bad input.
func TestPipelineScript(t *testing.T) {
	shareCluster(t, 4)
	if _, err := exec.LookPath("jq"); err != nil {
		skipOrFail(t, "hack/ci-deploy.sh needs jq: %v", err)
	}
	f := newRelFixture(t)

	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		outcome string
		// headline and summary lines the summary must contain; the
		// failure's reason, cause and evidence are checked against
		// result.json
		summary []string
		cause   string
		// evidence is a substring of failure.evidence
		evidence string
	}{
		{name: "healthy install", code: 0, outcome: "deployed",
			summary: []string{"### vllmctl deploy chat: deployed (exit 0)", "revision 1: deployed (Install complete)"}},
		{name: "crash-looping upgrade", args: []string{"--set", "image=example.com/vllm:v2-crash"}, code: 3, outcome: "rolled-back",
			summary: []string{"### vllmctl deploy chat: rolled-back (exit 3)", "rolled back", "| reason | CrashLoopBackOff |",
				"<summary>log tail</summary>", "Hints:"},
			cause: "unknown"},
		{name: "upgrade out of GPU memory", args: []string{"--set", "image=example.com/vllm:v3-fault-gpumem"}, code: 3, outcome: "rolled-back",
			summary: []string{"### vllmctl deploy chat: rolled-back (exit 3)", "| cause | gpu-oom |", "--gpu-memory-utilization"},
			cause:   "gpu-oom", evidence: "CUDA out of memory"},
		{name: "bad input", args: []string{"--set", "replicas=1,image"}, code: 2, outcome: "bad-input",
			summary: []string{"### vllmctl deploy chat: bad-input (exit 2)", "nothing applied", `key "image" has no value`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serving := f.deployedRevision(t)
			records, err := f.store.List(context.Background(), relName)
			require.NoError(t, err)

			r := f.runCIDeploy(t, tc.args...)
			t.Logf("summary:\n%s", r.summary)
			require.Equal(t, tc.code, r.code, "exit code of ci-deploy.sh (vllmctl's)\n%s", r.relRun)
			assert.Equal(t, tc.outcome, r.outcome)
			assert.Equal(t, "outcome="+tc.outcome+"\nexit-code="+strconv.Itoa(tc.code)+"\n", r.githubOutputs, "$GITHUB_OUTPUT")
			assert.Equal(t, r.summary, r.stepSummary, "the summary is the job summary")
			assert.Contains(t, r.stderr, r.summary, "the summary ends the job log")
			for _, s := range tc.summary {
				assert.Contains(t, r.summary, s)
			}

			if tc.code == 2 {
				assert.Empty(t, r.result, "no result document for bad input")
				after, err := f.store.List(context.Background(), relName)
				require.NoError(t, err)
				assert.Len(t, after, len(records), "no record written")
				return
			}
			res := &release.Result{}
			require.NoError(t, json.Unmarshal([]byte(r.result), res), "result.json:\n%s", r.result)
			assert.Contains(t, r.summary, "revision "+strconv.Itoa(res.Revision)+": "+string(res.Status))
			if tc.code == 0 {
				assert.Equal(t, storage.StatusDeployed, res.Status)
				assert.Nil(t, res.Failure)
				assert.Equal(t, res.Revision, f.deployedRevision(t))
				return
			}
			assert.Equal(t, storage.StatusFailed, res.Status)
			assert.Equal(t, serving, res.RolledBackTo, "rolled back to the revision deployed before")
			assert.Contains(t, r.summary, "rolled back to revision "+strconv.Itoa(serving))
			require.NotNil(t, res.Failure, "result.json names the failure")
			assert.Equal(t, tc.cause, string(res.Failure.Cause))
			assert.Contains(t, r.summary, "| cause | "+tc.cause+" |", "the summary names the cause")
			assert.Contains(t, r.summary, "| pod | "+res.Failure.Pod+" |")
			if tc.evidence != "" {
				assert.Contains(t, res.Failure.Evidence, tc.evidence)
				assert.Regexp(t, "(?m)^\\| evidence \\| `.*"+regexp.QuoteMeta(tc.evidence), r.summary, "the summary quotes the evidence")
			}
			require.NotEmpty(t, res.Failure.LogTail)
			assert.Contains(t, r.summary, res.Failure.LogTail[len(res.Failure.LogTail)-1], "the summary holds the log tail")

			// The previous revision serves again: the rollback recorded the
			// pod template of the revision rolled back to, and its
			// ReplicaSet holds every replica, all available.
			revs := f.history(t)
			last := revs[len(revs)-1]
			assert.Equal(t, storage.StatusDeployed, last.Status)
			assert.Equal(t, serving, last.RollbackOf)
			require.Len(t, last.ReplicaSets, 1)
			for _, rev := range revs {
				if rev.Revision == serving && assert.Len(t, rev.ReplicaSets, 1) {
					assert.Equal(t, rev.ReplicaSets[0].PodTemplateHash, last.ReplicaSets[0].PodTemplateHash, "the template of revision %d", serving)
				}
			}
			eventually(t, 60*time.Second, "ReplicaSet "+last.ReplicaSets[0].Name+" serves", func(ctx context.Context) (bool, error) {
				d, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, relName, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				rs, err := f.client.AppsV1().ReplicaSets(f.namespace).Get(ctx, last.ReplicaSets[0].Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				want := ptr.Deref(d.Spec.Replicas, 1)
				return d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == want && d.Status.AvailableReplicas == want &&
					rs.Status.AvailableReplicas == want, nil
			})
		})
	}
}
