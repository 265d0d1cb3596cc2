//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// Deploy reconciles like a controller. The same inputs twice make
// one revision; hand edits of fields the chart sets show in diff and the
// next deploy undoes them.

// reconcileValues run the built-in vllm chart without GPUs and with tiny
// requests, so the pods fit on the shared nodes next to other tests.
var reconcileValues = []string{"--set", "resources.gpu=0,resources.requests.cpu=10m,resources.requests.memory=16Mi," +
	"resources.limits.cpu=10m,resources.limits.memory=16Mi,shm.enabled=false,terminationGracePeriodSeconds=0"}

// chartHFHome is the HF_HOME the chart sets (modelCache.mountPath
// + /huggingface).
const chartHFHome = "/models/huggingface"

func (f *relFixture) deployVLLM(t *testing.T, args ...string) relRun {
	t.Helper()
	return f.run(t, append(append([]string{"deploy", relName, "vllm", "--progress", "plain", "--timeout", "2m"}, reconcileValues...), args...)...)
}

func (f *relFixture) diffVLLM(t *testing.T, args ...string) relRun {
	t.Helper()
	return f.run(t, append(append([]string{"diff", relName, "vllm"}, reconcileValues...), args...)...)
}

// hfHome returns the HF_HOME of the Deployment's server container.
func (f *relFixture) hfHome(t *testing.T) string {
	t.Helper()
	for _, e := range f.deployment(t).Spec.Template.Spec.Containers[0].Env {
		if e.Name == "HF_HOME" {
			return e.Value
		}
	}
	return ""
}

func TestReconcileSameInputsTwice(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	r := f.deployVLLM(t, "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	first := result(t, r)
	gen := f.deployment(t).Generation

	r = f.deployVLLM(t, "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "release chat is up to date (revision 1): nothing to change, no new revision")
	assert.NotContains(t, r.stderr, "lock:", "no lock, nothing applied")
	again := result(t, r)
	assert.Equal(t, 1, again.Revision)
	assert.Equal(t, storage.StatusDeployed, again.Status)
	assert.Equal(t, first.ReplicaSets, again.ReplicaSets)
	assert.Equal(t, "up to date: Install complete", again.Description)

	revs := f.history(t)
	require.Len(t, revs, 1, "one revision, not two")
	assert.Equal(t, storage.StatusDeployed, revs[0].Status)
	assert.Equal(t, gen, f.deployment(t).Generation, "nothing applied")

	d := f.diffVLLM(t)
	assert.Equal(t, 0, d.code, "%s", d)
	assert.Equal(t, "no changes\n", d.stdout)

	// A change of inputs is a new revision again.
	r = f.deployVLLM(t, "--set", "image.tag=v0.11.1")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusDeployed}, statuses(f.history(t)))
}

func TestReconcileHandEditsAreShownAndUndone(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()
	r := f.deployVLLM(t)
	require.Equal(t, 0, r.code, "%s", r)
	require.Equal(t, int32(1), f.replicas(t))
	require.Equal(t, chartHFHome, f.hfHome(t))

	// `kubectl scale deployment chat --replicas=3`: a merge patch of the
	// scale subresource by field manager kubectl-scale.
	deps := f.client.AppsV1().Deployments(f.namespace)
	_, err := deps.Patch(ctx, relName, types.MergePatchType, []byte(`{"spec":{"replicas":3}}`),
		metav1.PatchOptions{FieldManager: "kubectl-scale"}, "scale")
	require.NoError(t, err)
	// `kubectl set env deployment/chat HF_HOME=/tmp/hf`: a strategic merge
	// patch by field manager kubectl-set.
	_, err = deps.Patch(ctx, relName, types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"server","env":[{"name":"HF_HOME","value":"/tmp/hf"}]}]}}}}`),
		metav1.PatchOptions{FieldManager: "kubectl-set"})
	require.NoError(t, err)
	require.Equal(t, int32(3), f.replicas(t))
	require.Equal(t, "/tmp/hf", f.hfHome(t))

	// diff shows both edits, as the next deploy would undo them, and that
	// the deploy needs --force-conflicts: the other managers own the
	// fields now.
	d := f.diffVLLM(t)
	assert.Equal(t, 1, d.code, "%s", d)
	header := "~ apps/v1 Deployment " + f.namespace + "/chat (conflict: "
	require.Contains(t, d.stdout, header)
	line := d.stdout[strings.Index(d.stdout, header):]
	line = line[:strings.Index(line, "\n")]
	assert.Contains(t, line, `.spec.replicas owned by "kubectl-scale"`)
	assert.Contains(t, line, `env[name="HF_HOME"].value owned by "kubectl-set"`)
	assert.True(t, strings.HasSuffix(line, "; deploy needs --force-conflicts)"), line)
	assert.Contains(t, d.stdout, "-  replicas: 3\n+  replicas: 1\n")
	assert.Contains(t, d.stdout, "-          value: /tmp/hf\n+          value: "+chartHFHome+"\n")
	assert.Contains(t, d.stdout, "1 with field-manager conflicts (deploy needs --force-conflicts)")
	dj := f.diffVLLM(t, "-o", "json")
	assert.Equal(t, 1, dj.code, "%s", dj)
	var doc struct {
		Objects []struct {
			Object    string              `json:"object"`
			Conflicts []map[string]string `json:"conflicts"`
			Rollout   map[string]any      `json:"rollout"`
		} `json:"objects"`
		Summary map[string]int `json:"summary"`
	}
	require.NoError(t, json.Unmarshal([]byte(dj.stdout), &doc), "%s", dj)
	require.Len(t, doc.Objects, 1)
	assert.Len(t, doc.Objects[0].Conflicts, 2)
	assert.NotNil(t, doc.Objects[0].Rollout, "undoing the env edit rolls out pods")
	assert.Equal(t, map[string]int{"change": 1, "create": 0, "prune": 0, "conflicts": 1}, doc.Summary)

	// The same inputs are not "up to date" any more; without
	// --force-conflicts server-side apply refuses the other managers'
	// fields (exit 6, nothing recorded as deployed) ...
	r = f.deployVLLM(t, "--diff")
	assert.Equal(t, 6, r.code, "%s", r)
	assert.Contains(t, r.stderr, header, "--diff shows the conflict before the apply")
	assert.Contains(t, r.stderr, `"kubectl-scale"`)
	assert.Contains(t, r.stderr, `"kubectl-set"`)
	assert.Contains(t, r.stderr, "re-run with --force-conflicts")
	assert.Equal(t, []storage.Status{storage.StatusDeployed, storage.StatusFailed}, statuses(f.history(t)))
	assert.Equal(t, int32(3), f.replicas(t), "the refused apply changed nothing")
	assert.Equal(t, "/tmp/hf", f.hfHome(t))

	// ... and with it the deploy undoes both edits.
	r = f.deployVLLM(t, "--force-conflicts", "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Equal(t, 3, result(t, r).Revision)
	assert.Equal(t, int32(1), f.replicas(t))
	assert.Equal(t, chartHFHome, f.hfHome(t))
	dep := f.deployment(t)
	assert.True(t, ownsReplicas(t, dep, cluster.FieldManager), "vllmctl owns replicas again")
	assert.False(t, ownsReplicas(t, dep, "kubectl-scale"))
	assert.Equal(t, int32(1), ptr.Deref(dep.Spec.Replicas, -1))
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusFailed, storage.StatusDeployed}, statuses(f.history(t)))

	// Reconciled: no drift, no new revision.
	d = f.diffVLLM(t)
	assert.Equal(t, 0, d.code, "%s", d)
	assert.Equal(t, "no changes\n", d.stdout)
	r = f.deployVLLM(t)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "release chat is up to date (revision 3)")
	assert.Len(t, f.history(t), 3)
}
