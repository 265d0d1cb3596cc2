package release

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/canary"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// TestWaitFailsAtOnceOnACanaryLeftBehind: a wait on a revision whose
// Deployment still holds a canary never promoted fails at once, naming it
// (not a timeout blaming readiness), without watching.
func TestWaitFailsAtOnceOnACanaryLeftBehind(t *testing.T) {
	ctx := context.Background()
	store := storage.NewMemory("ml")
	manifest := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: chat\n  namespace: ml\nspec:\n  replicas: 2\n" +
		"  selector:\n    matchLabels: {app: chat}\n  template:\n    metadata:\n      labels: {app: chat}\n" +
		"    spec:\n      containers:\n      - {name: vllm, image: 'vllm:refuseme'}\n"
	require.NoError(t, store.Create(ctx, &storage.Release{Name: "chat", Revision: 1, Status: storage.StatusDeployed, Manifest: manifest}))
	require.NoError(t, store.Create(ctx, &storage.Release{Name: "chat", Revision: 2, Status: storage.StatusFailed, Manifest: manifest}))
	objs, err := cluster.ParseManifest(manifest)
	require.NoError(t, err)
	live := objs[0]
	live.SetAnnotations(map[string]string{canary.Annotation: "2"})
	require.NoError(t, unstructured.SetNestedField(live.Object, int64(canary.MinReadySeconds), "spec", "minReadySeconds"))
	watched := false
	waiter := waiterFunc(func(context.Context, []*unstructured.Unstructured, wait.Options) (wait.Result, error) {
		watched = true
		return wait.Result{}, nil
	})
	w := &Engine{Store: store, Waiter: waiter, Objects: liveObjects{live}}
	res, err := w.Wait(ctx, WaitOptions{Name: "chat"})
	require.Error(t, err)
	assert.False(t, watched, "nothing to wait for")
	assert.Equal(t, exitcode.Failed, exitcode.Of(err))
	require.NotNil(t, res.Failure)
	assert.Equal(t, canary.VerdictNotPromoted, res.Failure.Reason)
	assert.Equal(t, "deployment/chat", res.Failure.Object)
	assert.Contains(t, res.Failure.Message, "minReadySeconds")
	assert.Contains(t, res.Failure.Message, "revision 2")
}

// TestRecordsNeverHoldSecretValues: a record is redacted before it is
// written, so every reader prints what it holds; the caller's record is
// left as it is and gets the stored record's concurrency token.
func TestRecordsNeverHoldSecretValues(t *testing.T) {
	ctx := context.Background()
	const secret = "hxSUPERSECRETvalue42"
	red := diff.NewRedactor()
	red.AddObjects(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "chat-creds"}, "stringData": map[string]any{"token": secret}}})
	mem := storage.NewMemory("ml")
	e := &Engine{Store: mem}
	e.UseRedactor(red)
	e.UseRedactor(red) // idempotent: one wrapper (storage's TestRewritingDoesNotStack)

	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	rec := &storage.Release{Name: "chat", Revision: 1, Status: storage.StatusFailed, Description: "Upgrade failed: got " + secret,
		Failure: &rollout.Diagnosis{Reason: "CanaryGateFailed", Message: "gate said " + secret, Evidence: "got " + b64,
			LogTail: []string{"token=" + secret}, Events: []string{secret}, Hints: []string{secret}, LogNote: secret},
		Canary: &storage.CanaryReport{Reason: "exited 1: " + secret, Gate: &storage.GateResult{Command: "curl -H 'Authorization: " + secret + "'",
			OutputTail: []string{"got " + secret, "base64 " + b64}}}}
	require.NoError(t, e.Store.Create(ctx, rec))
	assert.Contains(t, rec.Failure.Message, secret, "the caller's record is not changed")
	rec.Description = "again " + secret
	require.NoError(t, e.Store.Update(ctx, rec), "the caller's record carries the stored token")

	stored, err := mem.Get(ctx, "chat", 1)
	require.NoError(t, err)
	data, err := storage.Encode(stored)
	require.NoError(t, err)
	plain, err := storage.Decode(data)
	require.NoError(t, err)
	text := plain.Description + plain.Failure.Message + plain.Failure.Evidence + plain.Failure.LogNote
	for _, group := range [][]string{plain.Failure.LogTail, plain.Failure.Events, plain.Failure.Hints, plain.Canary.Gate.OutputTail,
		{plain.Canary.Reason, plain.Canary.Gate.Command}} {
		for _, s := range group {
			text += "\n" + s
		}
	}
	assert.NotContains(t, text, secret)
	assert.NotContains(t, text, b64)
	assert.Contains(t, text, "(redacted)")
	assert.Contains(t, text, "gate said", "what is not secret stays")

	res := diff.RedactCopy(red, &Result{Canary: rec.Canary, Failure: rec.Failure})
	assert.NotContains(t, res.Canary.Gate.Command, secret, "the result's gate command too")
	assert.Contains(t, rec.Canary.Gate.Command, secret, "a copy")
}

// waiterFunc is a wait.Waiter.
type waiterFunc func(context.Context, []*unstructured.Unstructured, wait.Options) (wait.Result, error)

func (f waiterFunc) Wait(ctx context.Context, objs []*unstructured.Unstructured, opts wait.Options) (wait.Result, error) {
	return f(ctx, objs, opts)
}

// liveObjects is an ObjectClient whose Get answers the one live object
// it holds (NotFound for any other); it applies and prunes nothing.
type liveObjects struct{ obj *unstructured.Unstructured }

func (l liveObjects) Apply(context.Context, []*unstructured.Unstructured, cluster.ApplyOptions) ([]cluster.ApplyResult, error) {
	return nil, nil
}

func (l liveObjects) Prune(context.Context, []*unstructured.Unstructured, []*unstructured.Unstructured, cluster.PruneOptions) ([]cluster.PruneResult, error) {
	return nil, nil
}

func (l liveObjects) Delete(context.Context, *unstructured.Unstructured, cluster.PruneOptions) (cluster.PruneResult, error) {
	return cluster.PruneResult{}, nil
}

func (l liveObjects) Get(_ context.Context, obj *unstructured.Unstructured, _ string) (*unstructured.Unstructured, error) {
	if obj.GetKind() == l.obj.GetKind() && obj.GetName() == l.obj.GetName() {
		return l.obj.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "deployments"}, obj.GetName())
}

// The heartbeat interval is never zero or negative (a ticker would panic):
// an unset or negative Heartbeat is a third of the lease.
func TestHeartbeatInterval(t *testing.T) {
	for _, tc := range []struct {
		heartbeat, lease, want time.Duration
	}{
		{0, 0, storage.DefaultLease / 3},
		{-time.Second, 9 * time.Second, 3 * time.Second},
		{2 * time.Second, 9 * time.Second, 2 * time.Second},
	} {
		e := &Engine{Heartbeat: tc.heartbeat, Lease: tc.lease}
		assert.Equal(t, tc.want, e.heartbeat(), "Heartbeat %s, Lease %s", tc.heartbeat, tc.lease)
	}
}
