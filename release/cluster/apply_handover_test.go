package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/release/storage"
)

func TestApplyHPARule(t *testing.T) {
	release := map[string]any{owner.LabelRelease: "chat", storage.LabelManagedBy: storage.ManagedByVllmctl}
	cases := []struct {
		name string
		live []runtime.Object
		objs []*unstructured.Unstructured
		opts ApplyOptions
		// wantReplicas is the replicas the main apply of web carries
		// (-1: none).
		wantReplicas int64
		// wantHandover is the replicas the handover apply carries (-1: no
		// handover apply).
		wantHandover int64
	}{
		{name: "no HPA keeps replicas", objs: []*unstructured.Unstructured{deploymentObj("", "web", 3)},
			wantReplicas: 3, wantHandover: -1},
		{name: "HPA in the release drops replicas",
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3), hpaObj("", "web", "web", nil)},
			wantReplicas: -1, wantHandover: -1},
		{name: "live HPA in the namespace drops replicas",
			live:         []runtime.Object{hpaObj(applyNS, "external", "web", nil)},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3)},
			wantReplicas: -1, wantHandover: -1},
		{name: "HPA of another Deployment keeps replicas",
			live:         []runtime.Object{hpaObj(applyNS, "other", "api", nil)},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3), hpaObj("", "x", "api", nil)},
			wantReplicas: 3, wantHandover: -1},
		{name: "live HPA of this release about to be pruned is ignored",
			live:         []runtime.Object{hpaObj(applyNS, "web", "web", release)},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3)},
			opts:         ApplyOptions{Release: "chat"},
			wantReplicas: 3, wantHandover: -1},
		{name: "replicas vllmctl owned are handed over before being dropped",
			live:         []runtime.Object{withReplicasOwner(deploymentObj(applyNS, "web", 5), FieldManager)},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3), hpaObj("", "web", "web", nil)},
			wantReplicas: -1, wantHandover: 5},
		{name: "replicas another manager owns need no handover",
			live:         []runtime.Object{withReplicasOwner(deploymentObj(applyNS, "web", 5), "kube-controller-manager")},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3), hpaObj("", "web", "web", nil)},
			wantReplicas: -1, wantHandover: -1},
		{name: "dry run predicts the handover without writing it",
			live:         []runtime.Object{withReplicasOwner(deploymentObj(applyNS, "web", 5), FieldManager)},
			objs:         []*unstructured.Unstructured{deploymentObj("", "web", 3), hpaObj("", "web", "web", nil)},
			opts:         ApplyOptions{DryRun: true},
			wantReplicas: 5, wantHandover: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newSSACluster(t, tc.live...)
			a := NewApplierFromClients(c, applyMapper())
			tc.opts.Namespace = applyNS
			_, err := a.Apply(context.Background(), tc.objs, tc.opts)
			require.NoError(t, err)

			var main, handover *applyCall
			for i, call := range c.calls() {
				if call.gvr != gvrDeployments {
					continue
				}
				switch call.opts.FieldManager {
				case FieldManager:
					main = &c.calls()[i]
				case FieldManager + HandoverManagerSuffix:
					require.Nil(t, main, "the handover comes before the main apply")
					handover = &c.calls()[i]
				}
			}
			require.NotNil(t, main)
			replicas, found, err := unstructured.NestedInt64(main.obj.Object, "spec", "replicas")
			require.NoError(t, err)
			if tc.wantReplicas < 0 {
				assert.False(t, found, "replicas left out of the apply")
			} else {
				assert.Equal(t, tc.wantReplicas, replicas)
			}
			// The input objects keep their replicas.
			r, _, _ := unstructured.NestedInt64(tc.objs[0].Object, "spec", "replicas")
			assert.Equal(t, int64(3), r)

			if tc.wantHandover < 0 {
				assert.Nil(t, handover, "no handover apply")
				return
			}
			require.NotNil(t, handover)
			got, _, _ := unstructured.NestedInt64(handover.obj.Object, "spec", "replicas")
			assert.Equal(t, tc.wantHandover, got)
			assert.Equal(t, []string{"replicas"}, mapKeys(handover.obj.Object["spec"].(map[string]any)), "the handover applies replicas only")
		})
	}
}

func mapKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestOwnsField(t *testing.T) {
	d := withReplicasOwner(deploymentObj(applyNS, "web", 1), FieldManager)
	assert.True(t, ownsField(d, FieldManager, "spec", "replicas"))
	assert.True(t, ownsField(d, FieldManager, "spec", "template"))
	assert.False(t, ownsField(d, FieldManager, "spec", "selector"))
	assert.False(t, ownsField(d, "other", "spec", "replicas"))
	mf := d.GetManagedFields()
	mf[0].Operation = metav1.ManagedFieldsOperationUpdate
	d.SetManagedFields(mf)
	assert.False(t, ownsField(d, FieldManager, "spec", "replicas"), "an update is not an apply")
}
