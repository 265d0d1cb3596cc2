//go:build e2e

package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/release/cluster"
)

// Objects of another release, or made by hand, are
// never taken over silently.
func TestOwnershipIsNeverTakenSilently(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()

	t.Run("made by hand: refused, nothing applied, no record", func(t *testing.T) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: relName},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromString("http")}}}}
		_, err := f.client.CoreV1().Services(f.namespace).Create(ctx, svc, metav1.CreateOptions{FieldManager: "kubectl-create"})
		require.NoError(t, err)
		r := f.deployVLLM(t)
		assert.Equal(t, 6, r.code, "%s", r)
		assert.Contains(t, r.stderr, "v1 Service "+f.namespace+"/"+relName+" (field managers kubectl-create)")
		assert.Contains(t, r.stderr, "--take-ownership")
		_, err = f.client.AppsV1().Deployments(f.namespace).Get(ctx, relName, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "nothing applied: %v", err)
		entries, err := f.store.List(ctx, relName)
		require.NoError(t, err)
		assert.Empty(t, entries, "no record")
		live, err := f.client.CoreV1().Services(f.namespace).Get(ctx, relName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Empty(t, live.Labels[owner.LabelRelease], "not relabelled")

		r = f.deployVLLM(t, "--take-ownership")
		require.Equal(t, 0, r.code, "%s", r)
		revs := f.history(t)
		require.Len(t, revs, 1)
		assert.Contains(t, revs[0].Description, "took ownership of v1 Service "+f.namespace+"/"+relName)
	})

	t.Run("another release's: refused naming it; its uninstall keeps working", func(t *testing.T) {
		r := f.run(t, append(append([]string{"deploy", "thief", "vllm", "--progress", "plain", "--timeout", "2m"}, reconcileValues...),
			"--set", "fullnameOverride="+relName)...)
		assert.Equal(t, 6, r.code, "%s", r)
		assert.Contains(t, r.stderr, "(release "+f.namespace+"/"+relName+")")
		live, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, relName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, relName, live.Labels[owner.LabelRelease], "still the owner's")
		entries, err := f.store.List(ctx, "thief")
		require.NoError(t, err)
		assert.Empty(t, entries, "no record for the refused release")
	})
}

// A release deployed before vllmctl.io/release (its objects marked by
// app.kubernetes.io/instance and managed-by, as vllmctl applied them then)
// is still recognised: the next deploy changes and prunes its objects
// without --take-ownership, and they then carry the new keys.
func TestReleaseMarkedByTheInstanceLabelMovesToTheNewKeys(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()
	r := f.deployVLLM(t, "--set", "podDisruptionBudget.enabled=true")
	require.Equal(t, 0, r.code, "%s", r)
	revs := f.history(t)
	require.Len(t, revs, 1)

	// Put every object of the release in the state an earlier vllmctl left
	// it: applied by field manager vllmctl with the old keys only.
	dyn, err := dynamic.NewForConfig(f.cfg)
	require.NoError(t, err)
	objs, err := cluster.ParseManifest(revs[0].Manifest)
	require.NoError(t, err)
	resources := map[string]schema.GroupVersionResource{
		"Service":             {Version: "v1", Resource: "services"},
		"Deployment":          {Group: "apps", Version: "v1", Resource: "deployments"},
		"PodDisruptionBudget": {Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	}
	for _, o := range objs {
		gvr, ok := resources[o.GetKind()]
		require.True(t, ok, "the test knows the resource of %s", o.GetKind())
		labels := o.GetLabels()
		delete(labels, owner.LabelRelease)
		labels[owner.LegacyLabelInstance] = relName
		o.SetLabels(labels)
		annotations := o.GetAnnotations()
		delete(annotations, owner.AnnotationNamespace)
		o.SetAnnotations(annotations)
		data, err := o.MarshalJSON()
		require.NoError(t, err)
		live, err := dyn.Resource(gvr).Namespace(f.namespace).Patch(ctx, o.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: cluster.FieldManager, Force: ptr.To(true)})
		require.NoError(t, err, "relabel %s", o.GetName())
		assert.NotContains(t, live.GetLabels(), owner.LabelRelease, "server-side apply drops a key its manager no longer applies")
		assert.NotContains(t, live.GetAnnotations(), owner.AnnotationNamespace)
	}

	// The next deploy: no foreign objects, the PDB no longer rendered is
	// pruned, the rest carry the new keys.
	r = f.deployVLLM(t, "--set", "podDisruptionBudget.enabled=false", "--set", "model.maxModelLen=2048")
	require.Equal(t, 0, r.code, "%s", r)
	revs = f.history(t)
	require.Len(t, revs, 2)
	assert.NotContains(t, revs[1].Description, "took ownership")
	f.gone(t, "PodDisruptionBudget", relName)
	d := f.deployment(t)
	assert.Equal(t, relName, d.Labels[owner.LabelRelease])
	assert.Equal(t, f.namespace, d.Annotations[owner.AnnotationNamespace])
	assert.Equal(t, owner.ManagedByVllmctl, d.Labels[owner.LabelManagedBy])
	assert.Equal(t, relName, d.Labels[owner.LegacyLabelInstance], "the chart's own instance label")
	svc, err := f.client.CoreV1().Services(f.namespace).Get(ctx, relName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, relName, svc.Labels[owner.LabelRelease])
	assert.Equal(t, f.namespace, svc.Annotations[owner.AnnotationNamespace])
}

// A chart's own app.kubernetes.io/instance label is applied as the chart
// renders it (KServe's chart names its components there): vllmctl marks
// the release's objects with its own keys, and a second deploy of the
// same inputs changes nothing.
func TestChartsOwnInstanceLabelIsKept(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	ctx := context.Background()
	r := f.deploy(t, "--set", "instanceLabel=kserve-controller-manager")
	require.Equal(t, 0, r.code, "%s", r)
	cm, err := f.client.CoreV1().ConfigMaps(f.namespace).Get(ctx, relName+"-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		owner.LegacyLabelInstance: "kserve-controller-manager",
		owner.LabelManagedBy:      owner.ManagedByVllmctl,
		owner.LabelRelease:        relName,
	}, cm.Labels)
	assert.Equal(t, f.namespace, cm.Annotations[owner.AnnotationNamespace])

	d := f.run(t, "diff", relName, relChart, "--set", "instanceLabel=kserve-controller-manager")
	assert.Equal(t, 0, d.code, "no changes: %s", d)
}
