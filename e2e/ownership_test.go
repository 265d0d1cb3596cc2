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
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vllmctl/vllmctl/release/cluster"
)

// Objects of another release, or made by hand, are
// never taken over silently.
func TestOwnershipIsNeverTakenSilently(t *testing.T) {
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
		assert.Empty(t, live.Labels[cluster.LabelInstance], "not relabelled")

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
		assert.Contains(t, r.stderr, "(release "+relName+")")
		live, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, relName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, relName, live.Labels[cluster.LabelInstance], "still the owner's")
		entries, err := f.store.List(ctx, "thief")
		require.NoError(t, err)
		assert.Empty(t, entries, "no record for the refused release")
	})
}
