//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The canary gate on the local control plane. The release has 3
// replicas of 1 GPU each (the chart's strategy maxSurge 1, maxUnavailable
// 0); revision 2 changes the image and rolls out through a canary.

const canaryReplicas = 3

// canaryArgs are a deploy of revision args... with 3 replicas.
func canaryArgs(args ...string) []string {
	return rolloutArgs(append([]string{"--set", "replicaCount=3"}, args...)...)
}

// canaryInstall deploys revision 1 (3 replicas) and returns its pods' UIDs.
func (f *relFixture) canaryInstall(t *testing.T) (*release.Result, map[types.UID]bool) {
	t.Helper()
	// The revision and a surge pod hold GPUs: wait for them, as tests
	// before may still be releasing theirs (namespaces being deleted).
	waitForGPUs(t, f.env, canaryReplicas+1, true)
	r := f.run(t, canaryArgs("-o", "json")...)
	require.Equal(t, 0, r.code, "revision 1\n%s", r)
	res := result(t, r)
	require.Len(t, res.ReplicaSets, 1)
	return res, f.podUIDs(t, res.ReplicaSets[0].PodTemplateHash)
}

// podUIDs are the UIDs of the non-terminating pods of one ReplicaSet.
func (f *relFixture) podUIDs(t *testing.T, hash string) map[types.UID]bool {
	t.Helper()
	pods, err := f.client.CoreV1().Pods(f.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: releaseSelector + ",pod-template-hash=" + hash})
	require.NoError(t, err)
	out := map[types.UID]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.UID] = true
		}
	}
	return out
}

// podCounter samples the release's pods by ReplicaSet while started.
type podCounter struct {
	mu      sync.Mutex
	samples []podSample
	stop    chan struct{}
	done    chan struct{}
}

// podSample is one list of the release's pods.
type podSample struct {
	at   time.Time      // when the list's answer arrived
	pods map[string]int // pod-template-hash → non-terminating pods
}

func (f *relFixture) countPods(t *testing.T) *podCounter {
	t.Helper()
	c := &podCounter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			pods, err := f.client.CoreV1().Pods(f.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: releaseSelector})
			if err == nil {
				s := map[string]int{}
				for _, p := range pods.Items {
					if p.DeletionTimestamp == nil {
						s[p.Labels["pod-template-hash"]]++
					}
				}
				c.mu.Lock()
				c.samples = append(c.samples, podSample{at: time.Now(), pods: s})
				c.mu.Unlock()
			}
			select {
			case <-c.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(c.end)
	return c
}

func (c *podCounter) end() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

// assertHeld checks every sample whose answer arrived before the hold
// ended (until: the stamp of the "held" progress event, written before the
// promotion starts): the old ReplicaSet kept want old pods and the new one
// had exactly canary pods. A later sample may already see the promotion.
func (c *podCounter) assertHeld(t *testing.T, oldHash string, old, canary int, until time.Time) {
	t.Helper()
	c.end()
	c.mu.Lock()
	defer c.mu.Unlock()
	var held []podSample
	for _, s := range c.samples {
		if s.at.Before(until) {
			held = append(held, s)
		}
	}
	require.NotEmpty(t, held, "samples before the hold ended at %s (of %d)", until, len(c.samples))
	for i, s := range held {
		newPods := 0
		for h, n := range s.pods {
			if h != oldHash {
				newPods += n
			}
		}
		require.Equal(t, old, s.pods[oldHash], "sample %d of %d: old pods (%v)", i, len(held), s.pods)
		require.Equal(t, canary, newPods, "sample %d of %d: canary pods (%v)", i, len(held), s.pods)
	}
	t.Logf("%d samples during the hold: %d old and %d canary pods throughout", len(held), old, canary)
}

// canaryHolding matches the canary's holding events whose message is
// message ("": any of them).
func canaryHolding(message string) func(release.ProgressEvent) bool {
	return func(ev release.ProgressEvent) bool {
		return ev.Phase == release.PhaseCanary && ev.Status == canary.PhaseHolding && (message == "" || ev.Message == message)
	}
}

// assertOldKept checks that revision 1's pods are the same pods (UIDs) and
// that never fewer than 3 of them were Ready.
func (f *relFixture) assertOldKept(t *testing.T, hash string, uids map[types.UID]bool, ready *readyWatch) {
	t.Helper()
	assert.Equal(t, uids, f.podUIDs(t, hash), "revision 1's pods are the same pods")
	ready.stop()
	ready.mu.Lock()
	defer ready.mu.Unlock()
	assert.GreaterOrEqual(t, ready.min, canaryReplicas, "never fewer than 3 old pods Ready (%d changes seen)", ready.updates)
}

func TestCanaryPromotes(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	rev1, _ := f.canaryInstall(t)
	oldHash := rev1.ReplicaSets[0].PodTemplateHash
	before := f.deployment(t)

	upgrade := []string{"--set", "image.tag=v0.11.1", "--canary", "1", "--canary-hold", "10s", "--canary-gate",
		`test "$VLLMCTL_RELEASE" = ` + relName + ` && test -n "$VLLMCTL_CANARY_PODS" && echo "smoke ok $VLLMCTL_CANARY_PODS via $VLLMCTL_SERVICE"`}
	p := f.start(t, canaryArgs(append(upgrade, "-o", "json", "--progress", "json")...)...)
	p.waitEvent(t, "canary holding", canaryHolding(""))
	counter := f.countPods(t)
	held := p.waitEvent(t, "held 10s", canaryHolding("held 10s"))
	counter.assertHeld(t, oldHash, canaryReplicas, 1, held.Time)
	r := p.wait(t)
	require.Equal(t, 0, r.code, "%s", r)

	res := result(t, r)
	require.NotNil(t, res.Canary, "the result document has the canary")
	assert.Equal(t, storage.CanaryPromoted, res.Canary.Outcome)
	assert.Len(t, res.Canary.Pods, 1)
	require.NotNil(t, res.Canary.Gate)
	assert.Equal(t, 0, res.Canary.Gate.ExitCode)
	assert.Contains(t, strings.Join(res.Canary.Gate.OutputTail, "\n"), "smoke ok "+res.Canary.Pods[0]+" via "+relName)
	var names []string
	for _, ph := range res.Canary.Phases {
		names = append(names, ph.Name)
	}
	assert.Equal(t, []string{canary.PhaseStarting, canary.PhaseServeCheck, canary.PhaseHolding, canary.PhaseGate, canary.PhasePromoting, canary.PhaseRollout}, names)
	assert.GreaterOrEqual(t, res.Canary.Phases[2].DurationSeconds, 10.0, "held 10s")

	revs := f.history(t)
	require.Len(t, revs, 2)
	require.NotNil(t, revs[1].Canary, "the record keeps the canary")
	assert.Equal(t, storage.CanaryPromoted, revs[1].Canary.Outcome)
	assert.Contains(t, revs[1].Description, "canary 1: promoted")
	assert.Equal(t, revs[0].Manifest, strings.ReplaceAll(revs[1].Manifest, "v0.11.1", "v0.11.0"),
		"the record has the chart's strategy, not the transient one")

	d := f.deployment(t)
	assert.Equal(t, "1/0", strategyOf(d), "the live Deployment carries the chart's strategy again")
	assert.Equal(t, before.Spec.MinReadySeconds, d.Spec.MinReadySeconds)
	assert.Equal(t, ptr.Deref(before.Spec.ProgressDeadlineSeconds, 0), ptr.Deref(d.Spec.ProgressDeadlineSeconds, 0))
	assert.Equal(t, int32(canaryReplicas), d.Status.AvailableReplicas)

	diff := f.run(t, append(append([]string{"diff", relName, "vllm"}, rolloutValues...), "--set", "replicaCount=3", "--set", "image.tag=v0.11.1")...)
	assert.Equal(t, 0, diff.code, "diff with the same values shows no change\n%s", diff)

	hist := f.run(t, "history", relName, "-o", "json")
	assert.Contains(t, hist.stdout, `"outcome": "promoted"`, "history shows the canary")
	status := f.run(t, "status", relName, "-o", "json")
	assert.Contains(t, status.stdout, `"outcome": "promoted"`, "status shows the canary")
}

func TestCanaryCrashRollsBack(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	rev1, uids := f.canaryInstall(t)
	oldHash := rev1.ReplicaSets[0].PodTemplateHash
	before := f.deployment(t)
	ready := f.watchReady(t, hashSelector(rev1.ReplicaSets[0]), canaryReplicas)

	r := f.run(t, canaryArgs("--set", "image.tag=v0.9.1-crash", "--canary", "1", "--canary-hold", "1m", "-o", "json")...)
	require.Equal(t, 3, r.code, "%s", r)
	res := result(t, r)
	assert.Equal(t, 1, res.RolledBackTo)
	require.NotNil(t, res.Canary)
	assert.Equal(t, storage.CanaryFailed, res.Canary.Outcome)
	require.NotNil(t, res.Failure)
	assert.Contains(t, []string{"CanaryRestarted", "CrashLoopBackOff"}, string(res.Failure.Verdict), "caught on the canary: %+v", res.Failure)
	assert.NotEmpty(t, res.Failure.Pod)
	f.assertOldKept(t, oldHash, uids, ready)
	assert.Equal(t, "1/0", strategyOf(f.deployment(t)), "the rollback restored the chart's strategy")
	assert.Equal(t, before.Spec.MinReadySeconds, f.deployment(t).Spec.MinReadySeconds)
	assert.Equal(t, ptr.Deref(before.Spec.ProgressDeadlineSeconds, 0), ptr.Deref(f.deployment(t).Spec.ProgressDeadlineSeconds, 0))
}

func TestCanaryGateFails(t *testing.T) {
	shareCluster(t, 5)
	for _, tc := range []struct {
		name, gate, reason, output string
		extra                      []string
	}{
		{"exit 1", `echo "p99 latency 2300ms > 800ms"; exit 1`, "CanaryGateFailed", "p99 latency 2300ms > 800ms", nil},
		{"hangs", `echo started; sleep 600`, "CanaryGateTimeout", "started", []string{"--canary-gate-timeout", "3s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRelFixture(t)
			rev1, uids := f.canaryInstall(t)
			ready := f.watchReady(t, hashSelector(rev1.ReplicaSets[0]), canaryReplicas)
			args := append([]string{"--set", "image.tag=v0.11.1", "--canary", "1", "--canary-hold", "2s", "--canary-gate", tc.gate, "-o", "json"}, tc.extra...)
			start := time.Now()
			r := f.run(t, canaryArgs(args...)...)
			require.Equal(t, 3, r.code, "%s", r)
			res := result(t, r)
			require.NotNil(t, res.Failure)
			assert.Equal(t, tc.reason, res.Failure.Reason)
			assert.Contains(t, res.Failure.LogTail, tc.output, "the gate's output is in the diagnosis")
			assert.Equal(t, storage.CanaryFailed, res.Canary.Outcome)
			assert.Equal(t, 1, res.RolledBackTo)
			assert.Less(t, time.Since(start), 90*time.Second, "the gate's timeout ended it")
			f.assertOldKept(t, rev1.ReplicaSets[0].PodTemplateHash, uids, ready)
		})
	}
}

func TestCanaryInterrupted(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	rev1, uids := f.canaryInstall(t)
	ready := f.watchReady(t, hashSelector(rev1.ReplicaSets[0]), canaryReplicas)
	p := f.start(t, canaryArgs("--set", "image.tag=v0.11.1", "--canary", "1", "--canary-hold", "5m", "-o", "json")...)
	p.waitProgress(t, relName+"#2 canary: holding")
	time.Sleep(time.Second)
	require.NoError(t, p.cmd.Process.Signal(os.Interrupt))
	r := p.wait(t)
	require.Equal(t, 3, r.code, "%s", r)
	res := result(t, r)
	assert.Equal(t, 1, res.RolledBackTo)
	require.NotNil(t, res.Canary)
	assert.Equal(t, storage.CanaryInterrupted, res.Canary.Outcome)
	f.assertOldKept(t, rev1.ReplicaSets[0].PodTemplateHash, uids, ready)
	assert.Empty(t, pendingRecords(t, f), "no lock left behind")
}

func TestCanaryPercent(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	rev1, _ := f.canaryInstall(t)
	p := f.start(t, canaryArgs("--set", "image.tag=v0.11.1", "--canary", "34%", "--canary-hold", "4s", "-o", "json", "--progress", "json")...)
	p.waitEvent(t, "canary holding", canaryHolding(""))
	counter := f.countPods(t)
	held := p.waitEvent(t, "held 4s", canaryHolding("held 4s"))
	counter.assertHeld(t, rev1.ReplicaSets[0].PodTemplateHash, canaryReplicas, 2, held.Time)
	r := p.wait(t)
	require.Equal(t, 0, r.code, "%s", r)
	res := result(t, r)
	assert.Len(t, res.Canary.Pods, 2, "34%% of 3 rounds up to 2")
	assert.Equal(t, "34%", res.Canary.Count)
}

// TestCanaryNoRoomStrict: the isolated pool is full with 2 pods of 8 GPUs
// and the chart replaces pods in place (maxSurge 0): without a canary the
// rollout fits, but a canary pod does not: strict refuses, nothing applied.
func TestCanaryNoRoomStrict(t *testing.T) {
	f := newIsolatedFixture(t)
	base := []string{"--set", "replicaCount=2", "--set", "strategy.maxSurge=0", "--set", "strategy.maxUnavailable=1"}
	r := f.vllm(t, base...)
	require.Equal(t, 0, r.code, "the first deploy fits: %s", r)
	f.waitRolledOut(t, 2)
	before := f.deployment(t)

	r = f.vllm(t, append(base, "--set", "image.tag=v0.11.1", "--canary", "1", "--surge-policy", "strict", "-o", "json")...)
	assert.Equal(t, 2, r.code, "%s", r)
	assert.Empty(t, r.stdout, "no result document: nothing happened")
	assert.Contains(t, r.stderr, "nothing was applied")
	assert.Contains(t, r.stderr, "nvidia.com/gpu: need 8, free 0")
	assert.Equal(t, []storage.Status{storage.StatusDeployed}, statuses(f.history(t)), "nothing recorded")
	after := f.deployment(t)
	assert.Equal(t, before.Generation, after.Generation, "the live Deployment unchanged")
	assert.Equal(t, imageOf(before), imageOf(after))
}

// TestCanaryFlags: bad canary flags are input errors (exit 2), nothing
// applied.
func TestCanaryFlags(t *testing.T) {
	shareCluster(t, 5)
	f := newRelFixture(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--canary", "0"}, "--canary"},
		{[]string{"--canary", "150%"}, "between 1% and 100%"},
		{[]string{"--canary", "many"}, "--canary"},
		{[]string{"--canary-hold", "1m"}, "--canary-hold needs --canary"},
		{[]string{"--canary", "1", "--max-surge", "2"}, "cannot be combined"},
		{[]string{"--canary", "1", "--canary-gate-timeout", "0s"}, "--canary-gate-timeout"},
		{[]string{"--canary", "1", "--canary-max-restarts", "-1"}, "--canary-max-restarts"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := f.run(t, canaryArgs(tc.args...)...)
			assert.Equal(t, 2, r.code, "%s", r)
			assert.Contains(t, r.stderr, tc.msg)
			assert.Empty(t, f.history(t), "no record")
		})
	}
}

// TestCanaryHPA: replicas left to an HPA (minReplicas 3; the chart then
// renders none): the canary count comes from the live replicas, and the
// HPA keeps the replicas afterwards.
func TestCanaryHPA(t *testing.T) {
	shareCluster(t, 7)
	f := newRelFixture(t)
	hpa := []string{"--set", "autoscaling.enabled=true", "--set", "autoscaling.minReplicas=3", "--set", "autoscaling.maxReplicas=5"}
	r := f.run(t, canaryArgs(append(hpa, "-o", "json")...)...)
	require.Equal(t, 0, r.code, "revision 1\n%s", r)
	rev1 := result(t, r)
	eventually(t, 60*time.Second, "the HPA's 3 replicas", func(ctx context.Context) (bool, error) {
		d := f.deployment(t)
		return ptr.Deref(d.Spec.Replicas, 0) == 3 && d.Status.AvailableReplicas == 3, nil
	})
	p := f.start(t, canaryArgs(append(hpa, "--set", "image.tag=v0.11.1", "--canary", "34%", "--canary-hold", "3s", "-o", "json", "--progress", "json")...)...)
	p.waitEvent(t, "canary holding", canaryHolding(""))
	counter := f.countPods(t)
	held := p.waitEvent(t, "held 3s", canaryHolding("held 3s"))
	counter.assertHeld(t, rev1.ReplicaSets[0].PodTemplateHash, 3, 2, held.Time)
	r = p.wait(t)
	require.Equal(t, 0, r.code, "%s", r)
	res := result(t, r)
	assert.Len(t, res.Canary.Pods, 2, "34%% of the 3 live replicas")
	assert.Equal(t, int32(3), ptr.Deref(f.deployment(t).Spec.Replicas, 0), "replicas stay the HPA's")
}
