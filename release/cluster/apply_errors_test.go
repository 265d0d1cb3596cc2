package cluster

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vllmctl/vllmctl/internal/object"
)

func applyConflict(causes ...metav1.StatusCause) error {
	return apierrors.NewApplyConflict(causes, "Apply failed with conflicts")
}

func conflictCause(msg, field string) metav1.StatusCause {
	return metav1.StatusCause{Type: metav1.CauseTypeFieldManagerConflict, Message: msg, Field: field}
}

func TestConflictError(t *testing.T) {
	ref := object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "llm", Name: "web"}
	cases := []struct {
		name string
		err  error
		want []FieldConflict
	}{
		{name: "update manager", err: applyConflict(conflictCause(`conflict with "kubectl-scale" using apps/v1`, ".spec.replicas")),
			want: []FieldConflict{{Manager: "kubectl-scale", Field: ".spec.replicas"}}},
		{name: "subresource with time", err: applyConflict(
			conflictCause(`conflict with "kube-controller-manager" with subresource "scale" using apps/v1 at 2026-03-01T10:00:00Z`, ".spec.replicas"),
			conflictCause(`conflict with "helm"`, `.spec.template.spec.containers[name="vllm"].image`)),
			want: []FieldConflict{
				{Manager: "kube-controller-manager", Subresource: "scale", Field: ".spec.replicas"},
				{Manager: "helm", Field: `.spec.template.spec.containers[name="vllm"].image`},
			}},
		{name: "quoted manager", err: applyConflict(conflictCause(`conflict with "my \"tool\""`, ".data.x")),
			want: []FieldConflict{{Manager: `my "tool"`, Field: ".data.x"}}},
		{name: "wrapped", err: errors.Join(errors.New("context"), applyConflict(conflictCause(`conflict with "a"`, ".x"))),
			want: []FieldConflict{{Manager: "a", Field: ".x"}}},
		{name: "plain conflict is not a field conflict", err: apierrors.NewConflict(schema.GroupResource{Resource: "deployments"}, "web", errors.New("modified"))},
		{name: "not a conflict", err: apierrors.NewForbidden(schema.GroupResource{Resource: "deployments"}, "web", errors.New("no"))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ce := conflictError(ref, tc.err)
			if tc.want == nil {
				assert.Nil(t, ce)
				return
			}
			require.NotNil(t, ce)
			assert.Equal(t, tc.want, ce.Conflicts)
			assert.Equal(t, 6, ce.ExitCode())
			assert.ErrorIs(t, ce, tc.err)
			msg := ce.Error()
			assert.Contains(t, msg, "apps/v1 Deployment llm/web")
			assert.Contains(t, msg, "--force-conflicts")
			for _, c := range tc.want {
				assert.Contains(t, msg, strconv.Quote(c.Manager))
				assert.Contains(t, msg, c.Field)
			}
		})
	}
}

func TestApplyConflicts(t *testing.T) {
	scale := applyConflict(conflictCause(`conflict with "kubectl-scale" using apps/v1`, ".spec.replicas"))
	handover := applyConflict(conflictCause(`conflict with "vllmctl-hpa-handover"`, ".spec.replicas"))
	cases := []struct {
		name       string
		refuse     error // returned by the server to unforced applies
		force      bool
		wantErr    bool
		wantForced bool
	}{
		{name: "another manager's field is a conflict", refuse: scale, wantErr: true},
		{name: "force takes it over", refuse: scale, force: true, wantForced: true},
		{name: "our handover manager's field is taken back", refuse: handover, wantForced: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newSSACluster(t)
			c.applyErr = func(call applyCall) error {
				if call.gvr == gvrDeployments && !*call.opts.Force {
					return tc.refuse
				}
				return nil
			}
			a := NewApplierFromClients(c, applyMapper())
			objs := []*unstructured.Unstructured{configMap("", "a", nil), deploymentObj("", "web", 2), configMap("", "z", nil)}
			res, err := a.Apply(context.Background(), objs, ApplyOptions{Namespace: applyNS, Force: tc.force})
			if tc.wantErr {
				var ce *FieldConflictError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, []string{"kubectl-scale"}, ce.Managers())
				assert.Equal(t, []string{".spec.replicas"}, ce.Fields())
				assert.Equal(t, "apps/v1 Deployment llm/web", ce.Object.String())
				assert.True(t, apierrors.IsConflict(err), "the API error stays reachable")
				assert.Equal(t, []string{"v1 ConfigMap llm/a created"}, refs(res), "results so far come with the error")
				return
			}
			require.NoError(t, err)
			last := c.calls()[len(c.calls())-2]
			assert.Equal(t, gvrDeployments, last.gvr)
			assert.Equal(t, tc.wantForced, *last.opts.Force)
		})
	}
}

func TestApplyForceOnConflictPreviews(t *testing.T) {
	scale := applyConflict(conflictCause(`conflict with "kubectl-scale" with subresource "scale" using apps/v1`, ".spec.replicas"))
	cases := []struct {
		name         string
		opts         ApplyOptions
		wantErr      bool
		wantConflict bool
	}{
		{name: "dry run: forced again, conflict reported", opts: ApplyOptions{DryRun: true, ForceOnConflict: true}, wantConflict: true},
		{name: "without the option the conflict is an error", opts: ApplyOptions{DryRun: true}, wantErr: true},
		{name: "never outside a dry run", opts: ApplyOptions{ForceOnConflict: true}, wantErr: true},
		{name: "with --force-conflicts there is nothing to report", opts: ApplyOptions{DryRun: true, ForceOnConflict: true, Force: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newSSACluster(t, withReplicasOwner(deploymentObj(applyNS, "web", 3), "kubectl-scale"))
			c.applyErr = func(call applyCall) error {
				if call.gvr == gvrDeployments && !*call.opts.Force {
					return scale
				}
				return nil
			}
			a := NewApplierFromClients(c, applyMapper())
			opts := tc.opts
			opts.Namespace = applyNS
			res, err := a.Apply(context.Background(), []*unstructured.Unstructured{deploymentObj("", "web", 2), configMap("", "z", nil)}, opts)
			if tc.wantErr {
				var ce *FieldConflictError
				require.ErrorAs(t, err, &ce)
				return
			}
			require.NoError(t, err)
			require.Len(t, res, 2)
			assert.Nil(t, res[1].Conflict)
			if !tc.wantConflict {
				assert.Nil(t, res[0].Conflict)
				return
			}
			require.NotNil(t, res[0].Conflict)
			assert.Equal(t, []FieldConflict{{Manager: "kubectl-scale", Subresource: "scale", Field: ".spec.replicas"}}, res[0].Conflict.Conflicts)
			assert.Equal(t, ActionConfigured, res[0].Action)
			replicas, _, _ := unstructured.NestedInt64(res[0].Live.Object, "spec", "replicas")
			assert.Equal(t, int64(2), replicas, "the forced dry run's outcome")
			assert.Equal(t, int64(3), func() int64 {
				r, _, _ := unstructured.NestedInt64(c.get(t, gvrDeployments, applyNS, "web").Object, "spec", "replicas")
				return r
			}(), "nothing written")
			for _, call := range c.calls() {
				assert.NotEmpty(t, call.opts.DryRun, "only dry runs")
			}
		})
	}
}
