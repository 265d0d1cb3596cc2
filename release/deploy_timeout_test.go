package release_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/wait"
)

// withStartupProbe gives the Deployment of opts' objects the built-in
// chart's probes: a startup probe of failureThreshold × 10s (180: 30m)
// and a readiness probe with initialDelay seconds of initial delay.
func withStartupProbe(t *testing.T, opts release.DeployOptions, failureThreshold, initialDelay int64) release.DeployOptions {
	t.Helper()
	objs := objectsOf(opts)
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		containers, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		require.NoError(t, err)
		c := containers[0].(map[string]any)
		c["startupProbe"] = map[string]any{
			"httpGet":          map[string]any{"path": "/health", "port": int64(8000)},
			"periodSeconds":    int64(10),
			"failureThreshold": failureThreshold,
		}
		c["readinessProbe"] = map[string]any{
			"httpGet":             map[string]any{"path": "/health", "port": int64(8000)},
			"initialDelaySeconds": initialDelay,
		}
		require.NoError(t, unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"))
	}
	return rebuilt(opts, objs)
}

// waitTimeouts records the timeout of every wait the fake waiter runs.
type waitTimeouts struct {
	mu  sync.Mutex
	got []time.Duration
}

func (w *waitTimeouts) script(_ context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, opts.Timeout)
	return wait.Result{Outcome: wait.OutcomeCurrent, Objects: objs}, nil
}

func (w *waitTimeouts) last(t *testing.T) time.Duration {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NotEmpty(t, w.got, "no wait ran")
	return w.got[len(w.got)-1]
}

// timeoutLines returns the progress lines about the timeout: the ones
// saying it follows the start-up budget, and the warnings that it is
// shorter than that.
func (f *engFixture) timeoutLines() (follows, warnings []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ev := range f.events {
		switch {
		case ev.Status == "timeout":
			follows = append(follows, string(ev.Phase)+": "+ev.Message)
		case ev.Status == "warning" && strings.Contains(ev.Message, "shorter than the startup probe's budget"):
			warnings = append(warnings, ev.Message)
		}
	}
	return follows, warnings
}

// clearEvents forgets the progress events so far.
func (f *engFixture) clearEvents() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = nil
}

// waitingLine is the message of the last "waiting" event of a wait.
func (f *engFixture) waitingLine() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var waiting string
	for _, ev := range f.events {
		if ev.Status == "waiting" {
			waiting = ev.Message
		}
	}
	return waiting
}

// assertWaited checks that the rollout waited for want: the deploy's
// clock moves one second per reading, so the wait gets what is left of it
// a few seconds on.
func assertWaited(t *testing.T, w *waitTimeouts, want time.Duration) {
	t.Helper()
	got := w.last(t)
	assert.LessOrEqual(t, got, want, "the wait's timeout")
	assert.Greater(t, got, want-time.Minute, "the wait's timeout: %s, want about %s", got, want)
}

// With no --timeout (Timeout 0), a deploy's timeout follows the start-up
// budget of its Deployments (the largest startup probe budget plus the
// readiness initial delay, plus a minute), at least DefaultTimeout, and
// says so; no warning. A --timeout given is kept as it is, and only one
// shorter than the budget warns.
func TestDeployTimeoutFollowsTheStartupBudget(t *testing.T) {
	for _, tc := range []struct {
		name             string
		failureThreshold int64 // × 10s
		readinessDelay   int64
		timeout          time.Duration
		dryRun           bool
		wantTimeout      time.Duration
		wantFollows      string
		wantWarning      string
	}{
		{name: "no --timeout, the built-in chart's 30m budget", failureThreshold: 180,
			wantTimeout: 31 * time.Minute, wantFollows: "preflight: 31m0s, following the startup probe's budget (no --timeout given)"},
		{name: "no --timeout, the readiness delay counts", failureThreshold: 180, readinessDelay: 30,
			wantTimeout: 31*time.Minute + 30*time.Second, wantFollows: "preflight: 31m30s, following the startup probe's budget (no --timeout given)"},
		{name: "no --timeout, a budget within the default", failureThreshold: 30,
			wantTimeout: release.DefaultTimeout},
		{name: "no --timeout, no startup probe", wantTimeout: release.DefaultTimeout},
		{name: "no --timeout, dry run", failureThreshold: 180, dryRun: true,
			wantFollows: "preflight: 31m0s, following the startup probe's budget (no --timeout given)"},
		{name: "a shorter --timeout warns", failureThreshold: 180, timeout: 10 * time.Minute, wantTimeout: 10 * time.Minute,
			wantWarning: "deployment/chat container vllm: --timeout 10m0s is shorter than the startup probe's budget of 30m0s"},
		{name: "a longer --timeout is kept", failureThreshold: 180, timeout: 45 * time.Minute, wantTimeout: 45 * time.Minute},
		{name: "a --timeout shorter than the default is kept", failureThreshold: 30, timeout: 6 * time.Minute, wantTimeout: 6 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEngFixture(t)
			w := &waitTimeouts{}
			f.waiter.Script = w.script
			opts := baseSpec().options()
			if tc.failureThreshold > 0 {
				opts = withStartupProbe(t, opts, tc.failureThreshold, tc.readinessDelay)
			}
			opts.Timeout, opts.DryRun = tc.timeout, tc.dryRun
			res, err := f.engine.Deploy(context.Background(), opts)
			require.NoError(t, err)
			require.NotNil(t, res)

			follows, warnings := f.timeoutLines()
			if tc.wantFollows != "" {
				assert.Equal(t, []string{tc.wantFollows}, follows)
			} else {
				assert.Empty(t, follows)
			}
			if tc.wantWarning != "" {
				require.Len(t, warnings, 1)
				assert.Contains(t, warnings[0], tc.wantWarning)
			} else {
				assert.Empty(t, warnings, "no warning the user cannot avoid")
			}
			if !tc.dryRun {
				assertWaited(t, w, tc.wantTimeout)
			}
		})
	}
}

// `vllmctl rollback` and `vllmctl wait` with no --timeout follow the
// start-up budget of the revision they restore or wait on.
func TestRollbackAndWaitTimeoutFollowTheStartupBudget(t *testing.T) {
	f := newEngFixture(t)
	w := &waitTimeouts{}
	f.waiter.Script = w.script
	s := baseSpec()
	d := f.engine
	_, err := d.Deploy(context.Background(), withStartupProbe(t, s.options(), 180, 0))
	require.NoError(t, err)
	s.image = "vllm/vllm-openai:v0.11.0"
	_, err = d.Deploy(context.Background(), withStartupProbe(t, s.options(), 30, 0))
	require.NoError(t, err)

	f.clearEvents()
	_, err = f.engine.Wait(context.Background(), release.WaitOptions{Name: engRelease})
	require.NoError(t, err)
	assertWaited(t, w, release.DefaultTimeout) // revision 2: a 5m budget
	follows, _ := f.timeoutLines()
	assert.Empty(t, follows)

	res, err := f.engine.Rollback(context.Background(), release.RollbackOptions{Name: engRelease, ToRevision: 1})
	require.NoError(t, err)
	assert.Equal(t, 3, res.Revision)
	assertWaited(t, w, 31*time.Minute)
	follows, _ = f.timeoutLines()
	assert.Equal(t, []string{"rollback: 31m0s, following the startup probe's budget (no --timeout given)"}, follows)

	f.clearEvents()
	_, err = f.engine.Wait(context.Background(), release.WaitOptions{Name: engRelease})
	require.NoError(t, err)
	assertWaited(t, w, 31*time.Minute)
	assert.Contains(t, f.waitingLine(), "timeout 31m0s, following the startup probe's budget (no --timeout given)")

	_, err = f.engine.Wait(context.Background(), release.WaitOptions{Name: engRelease, Timeout: 5 * time.Minute})
	require.NoError(t, err)
	assertWaited(t, w, 5*time.Minute)
}

func TestStartupTimeout(t *testing.T) {
	for _, tc := range []struct {
		failureThreshold, readinessDelay int64
		want                             time.Duration
	}{
		{0, 0, release.DefaultTimeout},
		{30, 0, release.DefaultTimeout},
		{54, 0, release.DefaultTimeout},          // 9m + 1m
		{55, 0, 10*time.Minute + 10*time.Second}, // 9m10s + 1m
		{180, 0, 31 * time.Minute},
		{180, 120, 33 * time.Minute},
	} {
		opts := baseSpec().options()
		if tc.failureThreshold > 0 {
			opts = withStartupProbe(t, opts, tc.failureThreshold, tc.readinessDelay)
		}
		assert.Equal(t, tc.want, release.StartupTimeout(objectsOf(opts)), "failureThreshold %d, readiness delay %ds", tc.failureThreshold, tc.readinessDelay)
	}
}
