//go:build e2e

package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

const applyRelease = "chat"

// applyFixture is an e2e env with an Applier.
type applyFixture struct {
	*env
	applier *cluster.Applier
}

func newApplyFixture(t *testing.T) *applyFixture {
	t.Helper()
	e := newEnv(t)
	a, err := newApplierForConfig(e.cfg)
	require.NoError(t, err)
	return &applyFixture{env: e, applier: a}
}

// apply applies objs as release applyRelease in the test namespace.
func (f *applyFixture) apply(t *testing.T, opts cluster.ApplyOptions, objs ...*unstructured.Unstructured) ([]cluster.ApplyResult, error) {
	t.Helper()
	opts.Namespace = f.namespace
	opts.Release = applyRelease
	return f.applier.Apply(context.Background(), objs, opts)
}

// releaseObject converts a typed object to what the chart renderer yields:
// unstructured, without a namespace, labelled as the release's.
func releaseObject(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: m}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[storage.LabelManagedBy] = storage.ManagedByVllmctl
	labels[owner.LabelRelease] = applyRelease
	u.SetLabels(labels)
	return u
}

func releaseConfigMap(t *testing.T, name string, data map[string]string) *unstructured.Unstructured {
	return releaseObject(t, &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data,
	})
}

func releaseService(t *testing.T, name string) *unstructured.Unstructured {
	return releaseObject(t, &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8000}},
		},
	})
}

func releaseDeployment(t *testing.T, name, image string, replicas int32) *unstructured.Unstructured {
	return releaseObject(t, deployment(name, image, replicas))
}

func releaseHPA(t *testing.T, target string, min, max int32) *unstructured.Unstructured {
	return releaseObject(t, &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: target},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target},
			MinReplicas:    ptr.To(min),
			MaxReplicas:    max,
		},
	})
}

func actions(results []cluster.ApplyResult) map[string]cluster.Action {
	out := map[string]cluster.Action{}
	for _, r := range results {
		out[r.Object.Kind+"/"+r.Object.Name] = r.Action
	}
	return out
}

func (f *applyFixture) replicas(t *testing.T, name string) int32 {
	t.Helper()
	d, err := f.client.AppsV1().Deployments(f.namespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return ptr.Deref(d.Spec.Replicas, -1)
}

// fieldOwners returns the managers that own .spec.replicas of a Deployment.
func (f *applyFixture) replicasOwners(t *testing.T, name string) []string {
	t.Helper()
	d, err := f.client.AppsV1().Deployments(f.namespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	var owners []string
	for _, mf := range d.ManagedFields {
		if mf.FieldsV1 != nil && containsReplicas(mf.FieldsV1.Raw) {
			owners = append(owners, mf.Manager)
		}
	}
	return owners
}

func containsReplicas(raw []byte) bool {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(append([]byte(`{"apiVersion":"v1","kind":"X","fields":`), append(raw, '}')...)); err != nil {
		return false
	}
	_, found, _ := unstructured.NestedMap(u.Object, "fields", "f:spec", "f:replicas")
	return found
}

func TestApplyServerSideCreatesThenUnchanged(t *testing.T) {
	shareCluster(t, 4)
	f := newApplyFixture(t)
	ctx := context.Background()
	objs := []*unstructured.Unstructured{
		releaseConfigMap(t, "chat-config", map[string]string{"model": "meta-llama/Llama-3.1-8B-Instruct"}),
		releaseService(t, "chat"),
		releaseDeployment(t, "chat", "vllm/vllm-openai:v0.9.0", 1),
	}

	res, err := f.apply(t, cluster.ApplyOptions{}, objs...)
	require.NoError(t, err)
	assert.Equal(t, map[string]cluster.Action{"ConfigMap/chat-config": "created", "Service/chat": "created", "Deployment/chat": "created"}, actions(res))
	for _, r := range res {
		assert.Equal(t, f.namespace, r.Object.Namespace, "%s gets the release namespace", r.Object)
		var applied bool
		for _, mf := range r.Live.GetManagedFields() {
			if mf.Manager == cluster.FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply {
				applied = true
			}
		}
		assert.True(t, applied, "%s applied by field manager vllmctl: %+v", r.Object, r.Live.GetManagedFields())
	}

	// Let the controllers write status, then re-apply: nothing changes.
	waitRolledOut(t, f.env, "chat")
	res, err = f.apply(t, cluster.ApplyOptions{}, objs...)
	require.NoError(t, err)
	assert.Equal(t, map[string]cluster.Action{"ConfigMap/chat-config": "unchanged", "Service/chat": "unchanged", "Deployment/chat": "unchanged"}, actions(res))

	// A dry run of a change reports it without making it.
	changed := releaseConfigMap(t, "chat-config", map[string]string{"model": "mistralai/Mistral-7B-Instruct-v0.3"})
	res, err = f.apply(t, cluster.ApplyOptions{DryRun: true}, changed, objs[1], objs[2])
	require.NoError(t, err)
	assert.Equal(t, map[string]cluster.Action{"ConfigMap/chat-config": "configured", "Service/chat": "unchanged", "Deployment/chat": "unchanged"}, actions(res))
	cm, err := f.client.CoreV1().ConfigMaps(f.namespace).Get(ctx, "chat-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "meta-llama/Llama-3.1-8B-Instruct", cm.Data["model"], "dry run changed nothing")

	res, err = f.apply(t, cluster.ApplyOptions{}, changed, objs[1], objs[2])
	require.NoError(t, err)
	assert.Equal(t, map[string]cluster.Action{"ConfigMap/chat-config": "configured", "Service/chat": "unchanged", "Deployment/chat": "unchanged"}, actions(res))
}

func TestApplyCreateNamespace(t *testing.T) {
	shareCluster(t, 4)
	f := newApplyFixture(t)
	ctx := context.Background()
	ns := f.namespace + "-new"
	t.Cleanup(func() { _ = f.client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	cm := releaseConfigMap(t, "c", nil)

	_, err := f.applier.Apply(ctx, []*unstructured.Unstructured{cm}, cluster.ApplyOptions{Namespace: ns})
	require.Error(t, err, "no namespace, no --create-namespace")
	assert.True(t, apierrors.IsNotFound(err))
	assert.Contains(t, err.Error(), "--create-namespace")

	res, err := f.applier.Apply(ctx, []*unstructured.Unstructured{cm}, cluster.ApplyOptions{Namespace: ns, CreateNamespace: true, DryRun: true})
	require.NoError(t, err, "a dry run into a namespace that would be created")
	require.Len(t, res, 2)
	assert.True(t, res[1].Unvalidated)
	_, err = f.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "dry run created no namespace")

	res, err = f.applier.Apply(ctx, []*unstructured.Unstructured{cm}, cluster.ApplyOptions{Namespace: ns, CreateNamespace: true})
	require.NoError(t, err)
	assert.Equal(t, map[string]cluster.Action{"Namespace/" + ns: "created", "ConfigMap/c": "created"}, actions(res))
}

func TestApplyConflictWithAnotherManagerAndForce(t *testing.T) {
	shareCluster(t, 4)
	f := newApplyFixture(t)
	ctx := context.Background()
	dep := releaseDeployment(t, "chat", "vllm/vllm-openai:v0.9.0", 1)
	_, err := f.apply(t, cluster.ApplyOptions{}, dep)
	require.NoError(t, err)

	// `kubectl scale --replicas=2` by another field manager.
	deps := f.client.AppsV1().Deployments(f.namespace)
	_, err = deps.UpdateScale(ctx, "chat", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: f.namespace},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 2},
	}, metav1.UpdateOptions{FieldManager: "kubectl-scale"})
	require.NoError(t, err)

	_, err = f.apply(t, cluster.ApplyOptions{}, dep)
	var ce *cluster.FieldConflictError
	require.ErrorAs(t, err, &ce, "got %v", err)
	assert.Equal(t, []string{"kubectl-scale"}, ce.Managers())
	assert.Equal(t, []string{".spec.replicas"}, ce.Fields())
	assert.Equal(t, "apps/v1 Deployment "+f.namespace+"/chat", ce.Object.String())
	assert.Equal(t, 6, ce.ExitCode())
	assert.Contains(t, err.Error(), `"kubectl-scale"`)
	assert.Contains(t, err.Error(), "--force-conflicts")
	assert.Equal(t, int32(2), f.replicas(t, "chat"), "the conflict changed nothing")

	res, err := f.apply(t, cluster.ApplyOptions{Force: true}, dep)
	require.NoError(t, err)
	assert.Equal(t, cluster.ActionConfigured, res[0].Action)
	assert.Equal(t, int32(1), f.replicas(t, "chat"))
	assert.Equal(t, []string{cluster.FieldManager}, f.replicasOwners(t, "chat"), "vllmctl took .spec.replicas over")
}

func TestApplyWithHPANeverFightsOverReplicas(t *testing.T) {
	shareCluster(t, 4)
	f := newApplyFixture(t)
	dep := releaseDeployment(t, "chat", "vllm/vllm-openai:v0.9.0", 1)
	hpa := releaseHPA(t, "chat", 2, 3)

	_, err := f.apply(t, cluster.ApplyOptions{}, dep, hpa)
	require.NoError(t, err)
	// The HPA controller raises replicas to minReplicas (no metrics needed).
	eventually(t, 90*time.Second, "HPA scales chat to 2", func(ctx context.Context) (bool, error) {
		return f.replicas(t, "chat") == 2, nil
	})
	assert.NotContains(t, f.replicasOwners(t, "chat"), cluster.FieldManager, "vllmctl does not own replicas")

	for i := 0; i < 3; i++ {
		res, err := f.apply(t, cluster.ApplyOptions{}, dep, hpa)
		require.NoError(t, err, "apply %d never conflicts", i)
		assert.Equal(t, cluster.ActionUnchanged, actions(res)["Deployment/chat"], "apply %d", i)
		assert.Equal(t, int32(2), f.replicas(t, "chat"), "apply %d never resets replicas", i)
	}
}

// TestApplyHandsReplicasOverToAnHPA enables autoscaling on a Deployment
// vllmctl scaled so far, then disables it again: replicas never drop to the
// default, and no step conflicts.
func TestApplyHandsReplicasOverToAnHPA(t *testing.T) {
	shareCluster(t, 4)
	f := newApplyFixture(t)
	ctx := context.Background()
	dep3 := releaseDeployment(t, "chat", "vllm/vllm-openai:v0.9.0", 3)
	_, err := f.apply(t, cluster.ApplyOptions{}, dep3)
	require.NoError(t, err)
	assert.Equal(t, []string{cluster.FieldManager}, f.replicasOwners(t, "chat"))

	// Autoscaling on; the HPA's range includes 3, so it does not move it.
	hpa := releaseHPA(t, "chat", 1, 5)
	_, err = f.apply(t, cluster.ApplyOptions{}, dep3, hpa)
	require.NoError(t, err)
	assert.Equal(t, int32(3), f.replicas(t, "chat"), "replicas not reset to 1 when vllmctl let go")
	owners := f.replicasOwners(t, "chat")
	assert.NotContains(t, owners, cluster.FieldManager)
	assert.Contains(t, owners, cluster.FieldManager+cluster.HandoverManagerSuffix)
	_, err = f.apply(t, cluster.ApplyOptions{}, dep3, hpa)
	require.NoError(t, err)
	assert.Equal(t, int32(3), f.replicas(t, "chat"))

	// Autoscaling off: the new revision sets replicas again while the old
	// HPA is still live (it is pruned after the apply).
	dep2 := releaseDeployment(t, "chat", "vllm/vllm-openai:v0.9.0", 2)
	_, err = f.apply(t, cluster.ApplyOptions{}, dep2)
	require.NoError(t, err, "taking replicas back from the handover manager is no conflict")
	assert.Equal(t, int32(2), f.replicas(t, "chat"))
	assert.Equal(t, []string{cluster.FieldManager}, f.replicasOwners(t, "chat"))
	pruned, err := f.applier.Prune(ctx, []*unstructured.Unstructured{dep3, hpa}, []*unstructured.Unstructured{dep2},
		cluster.PruneOptions{Release: applyRelease, Namespace: f.namespace})
	require.NoError(t, err)
	require.Len(t, pruned, 1)
	assert.Equal(t, cluster.PruneDeleted, pruned[0].Action)
	assert.Equal(t, "HorizontalPodAutoscaler", pruned[0].Object.Kind)
}

func TestPruneOnlyTouchesTheReleasesObjects(t *testing.T) {
	shareCluster(t, 4)
	f := newApplyFixture(t)
	ctx := context.Background()
	cms := f.client.CoreV1().ConfigMaps(f.namespace)
	keep := releaseConfigMap(t, "keep", map[string]string{"a": "1"})
	removed := releaseConfigMap(t, "removed", nil)
	_, err := f.apply(t, cluster.ApplyOptions{}, keep, removed)
	require.NoError(t, err)
	// An object of the same name without the release's labels (created by
	// someone else), and one of another release.
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: map[string]string{
		storage.LabelManagedBy: storage.ManagedByVllmctl, owner.LabelRelease: "other"}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	previous := []*unstructured.Unstructured{keep, removed, releaseConfigMap(t, "foreign", nil), releaseConfigMap(t, "other", nil), releaseConfigMap(t, "never-created", nil)}
	current := []*unstructured.Unstructured{keep}

	dry, err := f.applier.Prune(ctx, previous, current, cluster.PruneOptions{Release: applyRelease, Namespace: f.namespace, DryRun: true})
	require.NoError(t, err)
	_, err = cms.Get(ctx, "removed", metav1.GetOptions{})
	require.NoError(t, err, "dry run deleted nothing")

	res, err := f.applier.Prune(ctx, previous, current, cluster.PruneOptions{Release: applyRelease, Namespace: f.namespace})
	require.NoError(t, err)
	assert.Equal(t, dry, res, "the dry run predicted the prune")
	got := map[string]cluster.PruneAction{}
	for _, r := range res {
		got[r.Object.Name] = r.Action
	}
	assert.Equal(t, map[string]cluster.PruneAction{
		"removed": cluster.PruneDeleted, "foreign": cluster.PruneKept, "other": cluster.PruneKept, "never-created": cluster.PruneGone,
	}, got)

	eventually(t, 30*time.Second, "removed ConfigMap deleted", func(ctx context.Context) (bool, error) {
		_, err := cms.Get(ctx, "removed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	for _, name := range []string{"keep", "foreign", "other"} {
		_, err := cms.Get(ctx, name, metav1.GetOptions{})
		assert.NoError(t, err, "ConfigMap %s kept", name)
	}

	// The stored manifest round-trips.
	manifest := "---\n" + mustYAML(t, keep) + "---\n" + mustYAML(t, removed)
	parsed, err := cluster.ParseManifest(manifest)
	require.NoError(t, err)
	require.Len(t, parsed, 2)
	assert.Equal(t, "removed", parsed[1].GetName())
}

func mustYAML(t *testing.T, u *unstructured.Unstructured) string {
	t.Helper()
	b, err := u.MarshalJSON() // JSON is YAML
	require.NoError(t, err)
	return string(b) + "\n"
}

func TestCurrentReplicaSetFollowsRevisions(t *testing.T) {
	shareCluster(t, 4)
	f := newApplyFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	dep := releaseDeployment(t, "chat", "vllm/vllm-openai:v0.9.0", 1)
	_, err := f.apply(t, cluster.ApplyOptions{}, dep)
	require.NoError(t, err)
	refs, err := cluster.CurrentReplicaSetsFrom(ctx, f.client, []*unstructured.Unstructured{dep}, f.namespace, nil, cluster.Stall{})
	require.NoError(t, err)
	require.Len(t, refs, 1)
	first := refs[0]
	assert.Equal(t, int64(1), first.Revision)
	assert.Equal(t, "chat", first.Deployment)
	assert.NotEmpty(t, first.PodTemplateHash)
	assert.Equal(t, "chat-"+first.PodTemplateHash, first.Name)

	// Straight after the apply: the controller has not observed the new
	// generation yet, so this exercises the watch.
	next := releaseDeployment(t, "chat", "vllm/vllm-openai:v0.9.1", 1)
	_, err = f.apply(t, cluster.ApplyOptions{}, next)
	require.NoError(t, err)
	second, err := cluster.CurrentReplicaSetsFrom(ctx, f.client, []*unstructured.Unstructured{releaseService(t, "chat"), next}, f.namespace, nil, cluster.Stall{})
	require.NoError(t, err)
	require.Len(t, second, 1)
	assert.Equal(t, int64(2), second[0].Revision)
	assert.NotEqual(t, first.Name, second[0].Name)
	assert.NotEqual(t, first.PodTemplateHash, second[0].PodTemplateHash)

	rs, err := f.client.AppsV1().ReplicaSets(f.namespace).Get(ctx, second[0].Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "vllm/vllm-openai:v0.9.1", rs.Spec.Template.Spec.Containers[0].Image)
}

func TestKstatusWaiterOnTheCluster(t *testing.T) {
	shareCluster(t, 4)
	t.Run("healthy objects become Current", func(t *testing.T) {
		f := newApplyFixture(t)
		res, err := f.apply(t, cluster.ApplyOptions{},
			releaseConfigMap(t, "chat-config", map[string]string{"k": "v"}),
			releaseService(t, "chat"),
			releaseDeployment(t, "chat", "vllm/vllm-openai:v0.9.0", 2))
		require.NoError(t, err)
		objs := make([]*unstructured.Unstructured, len(res))
		for i, r := range res {
			objs[i] = r.Live
		}
		// A cluster-scoped object too: the release namespace.
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(f.namespace)
		objs = append(objs, ns)

		w := wait.NewKstatusWaiter(f.applier.DynamicClient(), f.applier.RESTMapper())
		events := make(chan rollout.Event, 16)
		var seen []rollout.Event
		done := make(chan struct{})
		go func() {
			defer close(done)
			for e := range events {
				seen = append(seen, e)
			}
		}()
		result, err := w.Wait(context.Background(), objs, wait.Options{Timeout: 90 * time.Second, Namespace: f.namespace, Events: events})
		<-done
		require.NoError(t, err)
		assert.Equal(t, wait.OutcomeCurrent, result.Outcome)
		assert.Empty(t, result.NotCurrent())
		require.NotEmpty(t, seen)
		last := map[string]rollout.Status{}
		for _, e := range seen {
			last[e.Object.Kind] = e.Status
		}
		assert.Equal(t, map[string]rollout.Status{"ConfigMap": rollout.StatusCurrent, "Service": rollout.StatusCurrent, "Deployment": rollout.StatusCurrent, "Namespace": rollout.StatusCurrent}, last)
	})

	t.Run("a crashing Deployment times out", func(t *testing.T) {
		f := newApplyFixture(t)
		objs := []*unstructured.Unstructured{releaseService(t, "chat"), releaseDeployment(t, "chat", "vllm/vllm-openai:v0.9.0-crash", 1)}
		_, err := f.apply(t, cluster.ApplyOptions{}, objs...)
		require.NoError(t, err)

		w := wait.NewKstatusWaiter(f.applier.DynamicClient(), f.applier.RESTMapper())
		result, err := w.Wait(context.Background(), objs, wait.Options{Timeout: 15 * time.Second, Namespace: f.namespace})
		require.Error(t, err)
		assert.True(t, errors.Is(err, wait.ErrTimeout), "got %v", err)
		assert.Equal(t, wait.OutcomeTimeout, result.Outcome)
		notCurrent := result.NotCurrent()
		require.Len(t, notCurrent, 1)
		assert.Equal(t, "Deployment", notCurrent[0].Object.Kind)
		assert.Equal(t, rollout.StatusInProgress, notCurrent[0].Status)
		assert.NotEmpty(t, notCurrent[0].Message)
		assert.Contains(t, err.Error(), "timed out after 15s")
		assert.Contains(t, err.Error(), "apps/v1 Deployment "+f.namespace+"/chat")
		t.Logf("wait result: %v", err)
	})
}
