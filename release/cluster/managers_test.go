package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func fieldsEntry(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

// TestMovedFields: Helm's entries (server-side Apply as Helm 4 writes,
// client-side Update as Helm 3 writes) become vllmctl's Apply entry,
// merged with one vllmctl already has; other managers and subresources
// stay.
func TestMovedFields(t *testing.T) {
	const data = `{"f:data":{"f:greeting":{}}}`
	const labels = `{"f:metadata":{"f:labels":{"f:app":{}}}}`
	status := fieldsEntry("helm", metav1.ManagedFieldsOperationUpdate, `{"f:status":{}}`)
	status.Subresource = "status"
	for _, tc := range []struct {
		name      string
		entries   []metav1.ManagedFieldsEntry
		wantMoved []string
		want      map[string]string // manager (operation) -> fields
	}{
		{"helm 4, server-side", []metav1.ManagedFieldsEntry{fieldsEntry("helm", metav1.ManagedFieldsOperationApply, data)},
			[]string{"helm (Apply)"}, map[string]string{"vllmctl (Apply)": data}},
		{"helm 3, client-side", []metav1.ManagedFieldsEntry{fieldsEntry("helm", metav1.ManagedFieldsOperationUpdate, data),
			fieldsEntry("kubectl-edit", metav1.ManagedFieldsOperationUpdate, labels)},
			[]string{"helm (Update)"}, map[string]string{"vllmctl (Apply)": data, "kubectl-edit (Update)": labels}},
		{"merged into vllmctl's entry", []metav1.ManagedFieldsEntry{fieldsEntry("vllmctl", metav1.ManagedFieldsOperationApply, labels),
			fieldsEntry("helm", metav1.ManagedFieldsOperationApply, data)},
			[]string{"helm (Apply)"}, map[string]string{"vllmctl (Apply)": `{"f:data":{"f:greeting":{}},"f:metadata":{"f:labels":{"f:app":{}}}}`}},
		{"a subresource stays", []metav1.ManagedFieldsEntry{status}, nil, map[string]string{"helm (Update)": `{"f:status":{}}`}},
		{"nothing of helm", []metav1.ManagedFieldsEntry{fieldsEntry("kubectl", metav1.ManagedFieldsOperationApply, data)},
			nil, map[string]string{"kubectl (Apply)": data}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}}
			u.SetManagedFields(tc.entries)
			fields, moved, err := movedFields(u, []string{"helm"}, FieldManager)
			require.NoError(t, err)
			assert.Equal(t, tc.wantMoved, moved)
			got := map[string]string{}
			for _, e := range fields {
				got[e.Manager+" ("+string(e.Operation)+")"] = string(e.FieldsV1.Raw)
			}
			for k, v := range tc.want {
				require.Contains(t, got, k)
				assert.JSONEq(t, v, got[k], k)
			}
			assert.Len(t, got, len(tc.want))
		})
	}
}
