//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/storage"
)

// A canary that was refused without a rollback, or whose deploy was
// killed, leaves its Deployment holding the canary: the next deploy holds
// and judges it again (never promotes it unvetted), wait and status name
// it, and the controller never moves the rollout on by itself.

// refusedTag is the image tag of the revision the gate refuses.
const refusedTag = "v0.11.1-refuseme"

// assertCanaryHeld checks that the live Deployment holds revision rev's
// canary: the transient strategy marked with rev, every old pod and at
// most canary pods of the refused image.
func (f *relFixture) assertCanaryHeld(t *testing.T, rev int, oldHash string, canaryPods int) {
	t.Helper()
	d := f.deployment(t)
	assert.Equal(t, strconv.Itoa(rev), d.Annotations[canary.Annotation], "the Deployment says whose canary it holds")
	assert.Greater(t, d.Spec.MinReadySeconds, int32(365*24*3600), "no canary pod ever counts as available by itself")
	assert.Equal(t, canaryReplicas, len(f.podUIDs(t, oldHash)), "every old pod kept")
	assert.LessOrEqual(t, f.refusedPods(t), canaryPods, "no pod of the unvetted revision beyond the canary")
}

// refusedPods counts the release's non-terminating pods of refusedTag.
func (f *relFixture) refusedPods(t *testing.T) int {
	t.Helper()
	pods, err := f.client.CoreV1().Pods(f.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: releaseSelector})
	require.NoError(t, err)
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && strings.Contains(p.Spec.Containers[0].Image, refusedTag) {
			n++
		}
	}
	return n
}

// assertNeverDeployedRefused checks that no revision recorded deployed or
// superseded runs the refused image.
func (f *relFixture) assertNeverDeployedRefused(t *testing.T) {
	t.Helper()
	for _, r := range f.history(t) {
		if r.Status == storage.StatusDeployed || r.Status == storage.StatusSuperseded {
			assert.NotContains(t, r.Manifest, refusedTag, "revision %d (%s) runs the refused image", r.Revision, r.Status)
		}
	}
}

// TestCanaryRefusedRerunHoldsAgain: a canary refused with --no-rollback
// (exit 4), then the identical command again: the canary is held and
// refused again (exit 4), never "skipped" and promoted; wait fails at
// once naming the held canary; a run with the rollback restores revision
// 1 and the chart's strategy.
func TestCanaryRefusedRerunHoldsAgain(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	rev1, _ := f.canaryInstall(t)
	oldHash := rev1.ReplicaSets[0].PodTemplateHash
	before := f.deployment(t)
	refuse := []string{"--set", "image.tag=" + refusedTag, "--canary", "1", "--canary-hold", "2s", "--canary-gate", "exit 1", "-o", "json"}

	for i, rev := range []int{2, 3} {
		r := f.run(t, canaryArgs(append(refuse, "--no-rollback")...)...)
		require.Equal(t, 4, r.code, "run %d: refused, not rolled back\n%s", i+1, r)
		res := result(t, r)
		require.NotNil(t, res.Canary, "run %d", i+1)
		assert.Equal(t, storage.CanaryFailed, res.Canary.Outcome, "run %d: held and judged, not skipped", i+1)
		assert.Len(t, res.Canary.Pods, 1, "run %d", i+1)
		assert.Equal(t, rev, res.Revision)
		f.assertCanaryHeld(t, rev, oldHash, 1)
		f.assertNeverDeployedRefused(t)
	}

	start := time.Now()
	w := f.run(t, "wait", relName, "--timeout", "2m", "-o", "json")
	assert.Equal(t, 4, w.code, "%s", w)
	assert.Less(t, time.Since(start), 60*time.Second, "at once, not at the timeout")
	wres := result(t, w)
	require.NotNil(t, wres.Failure)
	assert.Equal(t, canary.VerdictNotPromoted, wres.Failure.Reason)
	assert.Contains(t, wres.Failure.Message, "minReadySeconds")

	st := f.run(t, "status", relName)
	assert.Equal(t, 0, st.code, "%s", st)
	assert.Contains(t, st.stdout, "CANARY HELD")
	stj := f.run(t, "status", relName, "-o", "json")
	assert.Contains(t, stj.stdout, `"canaryLeftovers"`)

	// Deploying it again with the rollback on: refused again, rolled back.
	r := f.run(t, canaryArgs(refuse...)...)
	require.Equal(t, 3, r.code, "%s", r)
	assert.Contains(t, r.stderr, "still carries the transient canary strategy of revision 3", "the deploy says what it found")
	res := result(t, r)
	assert.Equal(t, storage.CanaryFailed, res.Canary.Outcome)
	assert.Equal(t, 1, res.RolledBackTo)
	d := f.deployment(t)
	assert.NotContains(t, d.Annotations, canary.Annotation, "the rollback restored the chart's strategy")
	assert.Equal(t, "1/0", strategyOf(d))
	assert.Equal(t, before.Spec.MinReadySeconds, d.Spec.MinReadySeconds)
	eventually(t, 60*time.Second, "the canary pod gone", func(context.Context) (bool, error) { return f.refusedPods(t) == 0, nil })
	f.assertNeverDeployedRefused(t)
	assert.Equal(t, 0, f.run(t, "wait", relName, "--timeout", "1m").code, "healthy again")
}

// TestCanaryKilledDuringHold: SIGKILL during the hold leaves the lock and
// the canary behind. The controller does not move the rollout on by
// itself; wait names the held canary (exit 5: the lock); the next deploy
// takes the lock over once its lease has run out, holds the canary again
// and, refused by its gate, rolls back.
func TestCanaryKilledDuringHold(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	rev1, _ := f.canaryInstall(t)
	oldHash := rev1.ReplicaSets[0].PodTemplateHash

	p := f.start(t, canaryArgs("--set", "image.tag="+refusedTag, "--canary", "1", "--canary-hold", "10m", "--lock-lease", "4s")...)
	p.waitProgress(t, relName+"#2 canary: holding")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	r := p.wait(t)
	require.Equal(t, -int(syscall.SIGKILL), r.code, "%s", r)
	require.Len(t, pendingRecords(t, f), 1, "the killed deploy's lock stays")

	// A few seconds with nobody watching: nothing moves on.
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		f.assertCanaryHeld(t, 2, oldHash, 1)
		time.Sleep(time.Second)
	}

	w := f.run(t, "wait", relName, "--timeout", "30s")
	assert.Equal(t, 5, w.code, "%s", w)
	assert.Contains(t, w.stderr, "still carries the transient canary strategy of revision 2")

	dr := f.run(t, canaryArgs("--set", "image.tag="+refusedTag, "--canary", "1", "--canary-hold", "2s", "--canary-gate", "exit 1", "-o", "json")...)
	require.Equal(t, 3, dr.code, "%s", dr)
	res := result(t, dr)
	assert.Equal(t, storage.CanaryFailed, res.Canary.Outcome, "held and judged again")
	assert.Equal(t, 1, res.RolledBackTo)
	assert.Empty(t, pendingRecords(t, f), "no lock left behind")
	d := f.deployment(t)
	assert.NotContains(t, d.Annotations, canary.Annotation)
	eventually(t, 60*time.Second, "the canary pod gone", func(context.Context) (bool, error) { return f.refusedPods(t) == 0, nil })
	f.assertNeverDeployedRefused(t)
	assert.Equal(t, 0, f.run(t, "wait", relName, "--timeout", "1m").code, "healthy again")
}

// TestCanarySecretNeverStored: a gate that prints a Secret's value (and
// its base64) and names it in its command: deploy's result, status and
// history in every output mode, and the record itself, hold neither.
func TestCanarySecretNeverStored(t *testing.T) {
	shareCluster(t, 5)
	const secret = "hxSUPERSECRETvalue42"
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	chart := copyChart(t, filepath.Join("..", "charts", "vllm"), func(s string) string { return s })
	require.NoError(t, os.WriteFile(filepath.Join(chart, "templates", "creds.yaml"), []byte(
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-creds\nstringData:\n  token: "+secret+"\n"), 0o644))
	args := func(extra ...string) []string {
		a := canaryArgs(extra...)
		for i := range a {
			if a[i] == "vllm" && i == 2 {
				a[i] = chart
			}
		}
		return a
	}
	f := newRelFixture(t)
	r := f.run(t, args("-o", "json")...)
	require.Equal(t, 0, r.code, "%s", r)
	gate := `echo "got ` + secret + `"; echo "b64 ` + b64 + `"; exit 1`
	r = f.run(t, args("--set", "image.tag=v0.11.1", "--canary", "1", "--canary-hold", "1s", "--canary-gate", gate, "-o", "json")...)
	require.Equal(t, 3, r.code, "%s", r)
	outputs := map[string]string{"deploy stdout": r.stdout, "deploy stderr": r.stderr}
	for _, o := range []string{"table", "json", "yaml"} {
		for _, cmd := range []string{"status", "history"} {
			out := f.run(t, cmd, relName, "-o", o)
			require.Equal(t, 0, out.code, "%s -o %s: %s", cmd, o, out)
			outputs[cmd+" -o "+o] = out.stdout + out.stderr
		}
	}
	for name, out := range outputs {
		assert.NotContains(t, out, secret, name)
		assert.NotContains(t, out, b64, name)
	}
	assert.Contains(t, outputs["history -o json"], "(redacted)", "the gate's lines are kept, the value replaced")
	for _, rec := range f.history(t) {
		text := rec.Description
		if rec.Failure != nil {
			text += strings.Join(rec.Failure.LogTail, "\n") + rec.Failure.Message + rec.Failure.Evidence
		}
		if rec.Canary != nil && rec.Canary.Gate != nil {
			text += rec.Canary.Gate.Command + strings.Join(rec.Canary.Gate.OutputTail, "\n") + rec.Canary.Reason
		}
		assert.NotContains(t, text, secret, "revision %d's record", rec.Revision)
		assert.NotContains(t, text, b64, "revision %d's record", rec.Revision)
	}
}

// TestCanaryCountClamped: --canary above the replicas holds every replica
// (the preflight, the plan and the progress say 3, not 40), and a canary
// with no pod template change to hold says so without a preflight note.
func TestCanaryCountClamped(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	f.canaryInstall(t)
	r := f.run(t, canaryArgs("--set", "image.tag=v0.11.1", "--canary", "40", "--canary-hold", "1s", "-o", "json")...)
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "waiting for 3 canary pod(s)")
	assert.Contains(t, r.stderr, "3 canary pod(s) of 3 first")
	assert.NotContains(t, r.stderr, "40 canary")
	assert.NotContains(t, r.stderr, "→40", "the preflight's surge is the clamped count")
	assert.Len(t, result(t, r).Canary.Pods, 3)

	r = f.run(t, canaryArgs("--set", "image.tag=v0.11.1", "--canary", "1", "--set", "service.annotations.note=x", "-o", "json")...)
	require.Equal(t, 0, r.code, "%s", r)
	res := result(t, r)
	require.NotNil(t, res.Canary)
	assert.Equal(t, storage.CanarySkipped, res.Canary.Outcome, "only the Service changes")
	assert.NotContains(t, r.stderr, "NOTE: strategy override", "no canary runs: no canary surge in the preflight")
}
