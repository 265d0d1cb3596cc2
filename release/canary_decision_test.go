package release

import (
	"context"
	"encoding/base64"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// canaryDeployment is a Deployment "ml/chat" of image with replicas.
func canaryDeployment(image string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "chat", "namespace": "ml"},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "chat"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "chat"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "vllm", "image": image}}},
			},
		},
	}}
}

func byRef(objs ...*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[refIn(o, "ml").String()] = o
	}
	return out
}

// TestCanaryTargetsAgainstDeployedRevision: whether a canary holds is
// decided against the deployed revision, never the live object. After a
// refused (--no-rollback) or killed canary the live Deployment already
// carries the new template, and the canary must hold again.
func TestCanaryTargetsAgainstDeployedRevision(t *testing.T) {
	deployed := canaryDeployment("vllm:good", 2)
	desired := canaryDeployment("vllm:refuseme", 2)
	one := intstr.FromInt32(1)
	tests := []struct {
		name     string
		desired  *unstructured.Unstructured
		deployed []*unstructured.Unstructured
		live     map[string]*unstructured.Unstructured
		dryRun   map[string]*unstructured.Unstructured
		count    intstr.IntOrString
		want     []int32 // canary pods per target
	}{
		{"live on the deployed template", desired, []*unstructured.Unstructured{deployed}, byRef(deployed), byRef(desired), one, []int32{1}},
		{"live already on the new template (refused or killed canary)", desired, []*unstructured.Unstructured{deployed},
			byRef(canaryDeployment("vllm:refuseme", 2)), byRef(desired), one, []int32{1}},
		{"the deployed template again (a rollback by deploy)", deployed, []*unstructured.Unstructured{deployed},
			byRef(canaryDeployment("vllm:refuseme", 2)), byRef(deployed), one, nil},
		{"first install: nothing deployed", desired, nil, byRef(deployed), byRef(desired), one, nil},
		{"not live: no pods to hold a canary next to", desired, []*unstructured.Unstructured{deployed}, nil, nil, one, nil},
		{"count above the replicas is the replicas", desired, []*unstructured.Unstructured{deployed}, byRef(deployed), byRef(desired),
			intstr.FromInt32(40), []int32{2}},
		{"percentage rounds up", desired, []*unstructured.Unstructured{deployed}, byRef(deployed), byRef(desired),
			intstr.FromString("34%"), []int32{1}},
		{"replicas from the dry run (an HPA's live count)", desired, []*unstructured.Unstructured{deployed}, byRef(deployed),
			byRef(canaryDeployment("vllm:refuseme", 6)), intstr.FromString("50%"), []int32{3}},
		{"no replicas", desired, []*unstructured.Unstructured{deployed}, byRef(deployed), byRef(canaryDeployment("vllm:refuseme", 0)), one, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := canaryTargets([]*unstructured.Unstructured{tt.desired}, tt.deployed, tt.live, tt.dryRun, tt.count, "ml")
			var pods []int32
			for _, g := range got {
				assert.Equal(t, "ml/chat", g.ref.Namespace+"/"+g.ref.Name)
				pods = append(pods, g.pods)
			}
			assert.Equal(t, tt.want, pods)
		})
	}
}

// TestCanaryObjectsNeverPromoteByThemselves: the transient strategy keeps
// canary pods from ever counting as available (the controller never takes
// an old pod down without vllmctl), and marks the Deployment with the
// revision whose canary it holds.
func TestCanaryObjectsNeverPromoteByThemselves(t *testing.T) {
	d := canaryDeployment("vllm:new", 3)
	require.NoError(t, unstructured.SetNestedField(d.Object, int64(math.MaxInt32), "spec", "progressDeadlineSeconds"))
	targets := []canaryTarget{{ref: refIn(d, "ml"), replicas: 3, pods: 1}}
	out, err := canaryObjects([]*unstructured.Unstructured{d}, targets, 7, "ml")
	require.NoError(t, err)
	c := out[0]
	minReady, _, _ := unstructured.NestedInt64(c.Object, "spec", "minReadySeconds")
	progress, _, _ := unstructured.NestedInt64(c.Object, "spec", "progressDeadlineSeconds")
	assert.Equal(t, int64(canaryMinReadySeconds), minReady)
	assert.Greater(t, minReady, int64(100*365*24*3600)/4, "years, not minutes: no canary pod ever becomes available")
	assert.Greater(t, progress, minReady, "the API requires progressDeadlineSeconds > minReadySeconds")
	assert.LessOrEqual(t, progress, int64(math.MaxInt32), "an int32 field")
	assert.Equal(t, "7", c.GetAnnotations()[CanaryAnnotation])
	_, found, _ := unstructured.NestedFieldNoCopy(d.Object, "metadata", "annotations")
	assert.False(t, found, "the rendered object is not changed")

	l, ok := canaryLeftoverOf(c)
	require.True(t, ok)
	assert.Equal(t, CanaryLeftover{Deployment: "ml/chat", Revision: 7, MinReadySeconds: minReady}, l)
	_, ok = canaryLeftoverOf(d)
	assert.False(t, ok)
}

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
	live := canaryDeployment("vllm:refuseme", 2)
	live.SetAnnotations(map[string]string{CanaryAnnotation: "2"})
	require.NoError(t, unstructured.SetNestedField(live.Object, int64(canaryMinReadySeconds), "spec", "minReadySeconds"))
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
	assert.Equal(t, VerdictCanaryNotPromoted, res.Failure.Reason)
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
