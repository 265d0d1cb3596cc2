package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/object"
)

// fakeApplyGetter records the apply options and answers Get with err.
type fakeApplyGetter struct {
	opts   ApplyOptions
	getErr error
	// conflict is reported with every result.
	conflict *FieldConflictError
}

func (f *fakeApplyGetter) Apply(_ context.Context, objs []*unstructured.Unstructured, opts ApplyOptions) ([]ApplyResult, error) {
	f.opts = opts
	var out []ApplyResult
	for _, o := range objs {
		out = append(out, ApplyResult{Object: object.RefOf(o), Action: ActionCreated, Live: o, Unvalidated: true, Conflict: f.conflict})
	}
	return out, nil
}

func (f *fakeApplyGetter) Get(_ context.Context, obj *unstructured.Unstructured, _ string) (*unstructured.Unstructured, error) {
	if f.getErr != nil {
		return nil, f.getErr
	}
	return obj, nil
}

func TestNewDiffCluster(t *testing.T) {
	ctx := context.Background()
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}}

	f := &fakeApplyGetter{}
	c := NewDiffCluster(f, ApplyOptions{Namespace: "ns", Release: "r", Force: true})
	res, err := c.DryRun(ctx, []*unstructured.Unstructured{cm})
	require.NoError(t, err)
	assert.Equal(t, ApplyOptions{Namespace: "ns", Release: "r", Force: true, DryRun: true}, f.opts, "always a dry run, other options as given")
	_, err = NewDiffCluster(f, ApplyOptions{Namespace: "ns"}).DryRun(ctx, []*unstructured.Unstructured{cm})
	require.NoError(t, err)
	assert.Equal(t, ApplyOptions{Namespace: "ns", DryRun: true, ForceOnConflict: true}, f.opts, "without --force-conflicts, conflicts are previewed forced")

	f.conflict = &FieldConflictError{Object: object.RefOf(cm), Conflicts: []FieldConflict{
		{Manager: "kubectl-scale", Subresource: "scale", Field: ".spec.replicas"}, {Manager: "kubectl-set", Field: ".data.x"},
	}}
	res, err = NewDiffCluster(f, ApplyOptions{Namespace: "ns"}).DryRun(ctx, []*unstructured.Unstructured{cm})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, []diff.FieldConflict{
		{Manager: "kubectl-scale", Subresource: "scale", Field: ".spec.replicas"}, {Manager: "kubectl-set", Field: ".data.x"},
	}, res[0].Conflicts)
	f.conflict = nil
	require.Len(t, res, 1)
	assert.Same(t, cm, res[0].Object)
	assert.True(t, res[0].Unvalidated)

	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "c", errors.New("no"))
	cases := []struct {
		name    string
		err     error
		wantNil bool
		wantErr bool
	}{
		{"found", nil, false, false},
		{"not found", apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "c"), true, false},
		{"kind not served", &UnknownKindError{Object: object.RefOf(cm), Err: errors.New("no match")}, true, false},
		{"other errors pass", forbidden, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live, err := NewDiffCluster(&fakeApplyGetter{getErr: tc.err}, ApplyOptions{}).Get(ctx, cm, "ns")
			if tc.wantErr {
				require.Error(t, err)
				assert.True(t, apierrors.IsForbidden(err))
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.wantNil, live == nil)
		})
	}
}
