package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// diffFixture is what the diff command runs against in unit tests: a
// record store and a fake cluster whose dry run answers with the rendered
// objects as they are.
type diffFixture struct {
	store storage.Store
	live  []*unstructured.Unstructured
	// dryRunErr, when set, is the dry run's error.
	dryRunErr error
	// conflicts are reported by the dry run, by kind/name, as
	// cluster.NewDiffCluster reports a dry run it repeated with force.
	conflicts map[string][]diff.FieldConflict
	// clusterCalls counts the connections to the cluster.
	clusterCalls int
	// applyOpts are the options of the last connection.
	applyOpts cluster.ApplyOptions
}

// renderQwen renders the built-in chart as release qwen in namespace ml.
func renderQwen(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	ch, err := charts.Load("vllm")
	require.NoError(t, err)
	r, err := charts.RenderContext(context.Background(), ch, charts.RenderOptions{ReleaseName: "qwen", Namespace: "ml", Set: set, Revision: 1})
	require.NoError(t, err)
	return r.Objects
}

// engine is the fixture's engine factory: its objects are the fixture
// (a release.ObjectClient), its clientset reports server v1.37.2.
func (f *diffFixture) engine(string) (*release.Engine, error) {
	client := fake.NewClientset()
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &k8sversion.Info{GitVersion: "v1.37.2"}
	return &release.Engine{Store: f.store, Objects: f, Client: client}, nil
}

func liveKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// Apply answers a dry run with the objects as they are (and the fixture's
// conflicts).
func (f *diffFixture) Apply(_ context.Context, objs []*unstructured.Unstructured, opts cluster.ApplyOptions) ([]cluster.ApplyResult, error) {
	f.clusterCalls++
	f.applyOpts = opts
	if !opts.DryRun {
		return nil, errors.New("diff fixture: only dry runs")
	}
	if f.dryRunErr != nil {
		return nil, f.dryRunErr
	}
	out := make([]cluster.ApplyResult, 0, len(objs))
	for _, o := range objs {
		r := cluster.ApplyResult{Object: object.RefOf(o), Live: o.DeepCopy()}
		if cs := f.conflicts[o.GetKind()+"/"+o.GetName()]; len(cs) > 0 {
			r.Conflict = &cluster.FieldConflictError{Object: r.Object}
			for _, c := range cs {
				r.Conflict.Conflicts = append(r.Conflict.Conflicts, cluster.FieldConflict{Field: c.Field, Manager: c.Manager, Subresource: c.Subresource})
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// Get reads the fixture's live objects.
func (f *diffFixture) Get(_ context.Context, obj *unstructured.Unstructured, ns string) (*unstructured.Unstructured, error) {
	f.clusterCalls++
	if obj.GetNamespace() != "" {
		ns = obj.GetNamespace()
	}
	for _, o := range f.live {
		if liveKey(o.GetKind(), o.GetNamespace(), o.GetName()) == liveKey(obj.GetKind(), ns, obj.GetName()) {
			return o.DeepCopy(), nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: obj.GetKind()}, obj.GetName())
}

// Prune is never called by diff.
func (f *diffFixture) Prune(context.Context, []*unstructured.Unstructured, []*unstructured.Unstructured, cluster.PruneOptions) ([]cluster.PruneResult, error) {
	return nil, errors.New("diff fixture: no prune")
}

func (f *diffFixture) Delete(context.Context, *unstructured.Unstructured, cluster.PruneOptions) (cluster.PruneResult, error) {
	return cluster.PruneResult{}, errors.New("diff fixture: no delete")
}

// deployRecord records the render of qwen with set (its objects, hooks
// and notes, as a deploy records them) as the deployed revision 1, and
// returns its objects.
func (f *diffFixture) deployRecord(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	ch, err := charts.Load("vllm")
	require.NoError(t, err)
	r, err := charts.RenderContext(context.Background(), ch, charts.RenderOptions{ReleaseName: "qwen", Namespace: "ml", Set: set, Revision: 1})
	require.NoError(t, err)
	hooks, err := storage.HooksOf(r.Hooks)
	require.NoError(t, err)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, f.store.Create(context.Background(), &storage.Release{
		Name: "qwen", Revision: 1, Status: storage.StatusDeployed, Manifest: r.Manifest, Hooks: hooks, Notes: r.Notes,
		Created: now, Updated: now,
	}))
	return r.Objects
}

func (f *diffFixture) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runRecordCommand(t, engineFactory(f.engine), func(g *GlobalOptions) *cobra.Command {
		no := false
		return diffCommand(&diffOptions{
			g:     g,
			color: &no,
		})
	}, append([]string{"diff"}, args...)...)
}

func TestDiffCommand(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, f *diffFixture)
		args  []string
		code  int
		// stdout is the exact stdout, when set; contains are parts of it.
		stdout   string
		contains []string
		stderr   string
		// noCluster: the cluster must not be contacted.
		noCluster bool
	}{
		{
			name: "not installed: all create",
			args: []string{"qwen"},
			code: 1,
			contains: []string{
				"+ v1 Service ml/qwen\n--- /dev/null\n+++ dry-run\n",
				"+ apps/v1 Deployment ml/qwen\n",
				"0 to change, 2 to create, 0 to prune\n",
			},
		},
		{
			name: "up to date",
			setup: func(t *testing.T, f *diffFixture) {
				f.live = f.deployRecord(t)
			},
			args:   []string{"qwen"},
			stdout: "no changes\n",
		},
		{
			name: "new image rolls out",
			setup: func(t *testing.T, f *diffFixture) {
				f.live = f.deployRecord(t)
			},
			args: []string{"qwen", "--set", "image.tag=v0.12.0"},
			code: 1,
			contains: []string{
				"~ apps/v1 Deployment ml/qwen\n  rolls out a new ReplicaSet: 1 pod, maxSurge 1, maxUnavailable 0, needs up to 1 extra GPU\n",
				"+        image: vllm/vllm-openai:v0.12.0\n",
				"~ v1 Service ml/qwen\n",
				// NOTES.txt names the image.
				"~ notes NOTES.txt\n--- recorded\n+++ rendered\n", "+qwen serves Qwen/Qwen3-0.6B (vllm/vllm-openai:v0.12.0)",
				"2 to change, 0 to create, 0 to prune, 1 recorded change (hooks, notes, CRDs)\n",
			},
		},
		{
			name: "only the test hook changes: shown, exit 1",
			setup: func(t *testing.T, f *diffFixture) {
				f.live = f.deployRecord(t)
			},
			args: []string{"qwen", "--set", "tests.image=curlimages/curl:8.12.0"},
			code: 1,
			contains: []string{
				"~ hook v1 Pod ml/qwen-test-openai\n--- recorded\n+++ rendered\n",
				"-    image: curlimages/curl:8.11.1\n+    image: curlimages/curl:8.12.0\n",
				"0 to change, 0 to create, 0 to prune, 1 recorded change (hooks, notes, CRDs)\n",
			},
		},
		{
			name: "hand-scaled by another field manager: shown with the conflict, exit 1",
			setup: func(t *testing.T, f *diffFixture) {
				f.deployRecord(t)
				f.live = renderQwen(t, "replicaCount=3")
				f.conflicts = map[string][]diff.FieldConflict{"Deployment/qwen": {{Field: ".spec.replicas", Manager: "kubectl-scale", Subresource: "scale"}}}
			},
			args: []string{"qwen"},
			code: 1,
			contains: []string{
				"~ apps/v1 Deployment ml/qwen (conflict: .spec.replicas owned by \"kubectl-scale\"; deploy needs --force-conflicts)\n--- live\n+++ dry-run\n",
				"-  replicas: 3\n+  replicas: 1\n",
				"1 to change, 0 to create, 0 to prune, 1 with field-manager conflicts (deploy needs --force-conflicts)\n",
			},
		},
		{
			name: "PDB dropped: pruned",
			setup: func(t *testing.T, f *diffFixture) {
				f.live = f.deployRecord(t, "podDisruptionBudget.enabled=true")
			},
			args:     []string{"qwen"},
			code:     1,
			contains: []string{"- policy/v1 PodDisruptionBudget ml/qwen\n--- live\n+++ /dev/null\n", "0 to change, 0 to create, 1 to prune\n"},
		},
		{
			name: "JSON",
			setup: func(t *testing.T, f *diffFixture) {
				f.live = f.deployRecord(t, "podDisruptionBudget.enabled=true")
			},
			args:     []string{"qwen", "-o", "json"},
			code:     1,
			contains: []string{`"action": "prune"`, `"summary": {`},
		},
		{
			name:      "invalid values: exit 2 before the cluster",
			args:      []string{"qwen", "--set", "resources.gpu=lots"},
			code:      2,
			noCluster: true,
		},
		{
			name:      "bad output format",
			args:      []string{"qwen", "-o", "wide"},
			code:      2,
			stderr:    "Error: --output \"wide\": want table, json or yaml\n",
			noCluster: true,
		},
		{
			name: "cluster refuses: exit 6",
			setup: func(t *testing.T, f *diffFixture) {
				f.dryRunErr = apierrors.NewForbidden(schema.GroupResource{Resource: "deployments"}, "qwen", nil)
			},
			args:   []string{"qwen"},
			code:   6,
			stderr: "Error: deployments \"qwen\" is forbidden: <nil>\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &diffFixture{store: storage.NewMemory("ml")}
			if tc.setup != nil {
				tc.setup(t, f)
			}
			stdout, stderr, code := f.run(t, tc.args...)
			assert.Equal(t, tc.code, code, "exit code; stderr: %s", stderr)
			if tc.stdout != "" {
				assert.Equal(t, tc.stdout, stdout)
			}
			for _, c := range tc.contains {
				assert.Contains(t, stdout, c)
			}
			if tc.code <= 1 {
				assert.Empty(t, stderr, "changes found prints nothing more")
			}
			if tc.stderr != "" {
				assert.Equal(t, tc.stderr, stderr)
			}
			if tc.noCluster {
				assert.Zero(t, f.clusterCalls)
			}
			if tc.name == "JSON" {
				var doc map[string]any
				require.NoError(t, json.Unmarshal([]byte(stdout), &doc), "one JSON document")
			}
		})
	}
}

func TestDiffCommandPassesDeployFlags(t *testing.T) {
	f := &diffFixture{store: storage.NewMemory("ml")}
	_, _, code := f.run(t, "qwen", "--force-conflicts", "--create-namespace")
	assert.Equal(t, 1, code)
	assert.Equal(t, cluster.ApplyOptions{Namespace: "ml", Release: "qwen", Force: true, CreateNamespace: true, DryRun: true}, f.applyOpts)
}

func TestPreviousObjects(t *testing.T) {
	ctx := context.Background()
	cm := func(name string) string { return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" }
	cases := []struct {
		name     string
		statuses []storage.Status
		want     []string
	}{
		{"nothing recorded", nil, nil},
		{"deployed and after", []storage.Status{storage.StatusSuperseded, storage.StatusDeployed, storage.StatusFailed}, []string{"r2", "r3"}},
		{"none deployed: after the last uninstall", []storage.Status{storage.StatusFailed, storage.StatusUninstalled, storage.StatusFailed}, []string{"r3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := storage.NewMemory("ml")
			for i, st := range tc.statuses {
				rev := i + 1
				require.NoError(t, s.Create(ctx, &storage.Release{Name: "qwen", Revision: rev, Status: st, Manifest: cm("r" + string(rune('0'+rev)))}))
			}
			entries, err := s.List(ctx, "qwen")
			require.NoError(t, err)
			objs, err := release.PreviousObjects(entries)
			require.NoError(t, err)
			var got []string
			for _, o := range objs {
				got = append(got, o.GetName())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
