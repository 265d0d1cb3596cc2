package release_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/release/storage"
)

const (
	engNS      = "ml"
	engRelease = "chat"
)

// engFixture is a release engine on a fake cluster and an in-memory store,
// with a clock that moves one second per reading and the progress events
// collected.
type engFixture struct {
	cluster *releasetest.Cluster
	store   *storage.Memory
	waiter  *releasetest.Waiter
	engine  *release.Engine

	mu     sync.Mutex
	now    time.Time
	events []release.ProgressEvent
}

func newEngFixture(t *testing.T) *engFixture {
	t.Helper()
	f := &engFixture{
		cluster: releasetest.NewCluster(),
		store:   storage.NewMemory(engNS),
		waiter:  &releasetest.Waiter{},
		now:     time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
	}
	f.engine = f.cluster.Engine(f.store, f.waiter, releasetest.ClockFunc(f.tick))
	f.engine.Progress = func(ev release.ProgressEvent) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.events = append(f.events, ev)
	}
	return f
}

func (f *engFixture) tick() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(time.Second)
	return f.now
}

// advance moves the clock on by d.
func (f *engFixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *engFixture) phases() map[release.Phase]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[release.Phase]int{}
	for _, ev := range f.events {
		out[ev.Phase]++
	}
	return out
}

// spec describes one revision of the test chart.
type spec struct {
	image    string
	args     []string
	greeting string
	port     int64
	extra    bool  // a second ConfigMap, chat-extra
	gpus     int64 // nvidia.com/gpu per pod, when set
}

func baseSpec() spec {
	return spec{image: "vllm/vllm-openai:v0.10.0", args: []string{"--model=a"}, greeting: "hello", port: 8000}
}

func labels() map[string]any {
	return map[string]any{storage.LabelManagedBy: storage.ManagedByVllmctl, owner.LabelRelease: engRelease}
}

// objects renders s as the chart renderer would: labelled and sorted.
func (s spec) objects() []*unstructured.Unstructured {
	args := make([]any, len(s.args))
	for i, a := range s.args {
		args[i] = a
	}
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "chat-config", "namespace": engNS, "labels": labels()},
			"data":     map[string]any{"greeting": s.greeting},
		}},
		{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "chat", "namespace": engNS, "labels": labels()},
			"spec": map[string]any{
				"selector": map[string]any{"app": "chat"},
				"ports":    []any{map[string]any{"name": "http", "port": s.port}},
			},
		}},
		{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "chat", "namespace": engNS, "labels": labels()},
			"spec": map[string]any{
				"replicas": int64(1),
				"selector": map[string]any{"matchLabels": map[string]any{"app": "chat"}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": "chat"}},
					"spec": map[string]any{"containers": []any{map[string]any{
						"name": "vllm", "image": s.image, "args": args,
					}}},
				},
			},
		}},
	}
	if s.gpus > 0 {
		gpu := map[string]any{"nvidia.com/gpu": s.gpus}
		c := objs[2].Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		c["resources"] = map[string]any{"requests": gpu, "limits": gpu}
	}
	if s.extra {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "chat-extra", "namespace": engNS, "labels": labels()},
			"data":     map[string]any{"x": "1"},
		}})
	}
	charts.SortObjects(objs)
	return objs
}

func (s spec) options() release.DeployOptions {
	return withObjects(release.DeployOptions{
		Name:       engRelease,
		Render:     release.RenderInput{Options: charts.RenderOptions{Namespace: engNS, SetString: []string{"image=" + s.image}}},
		Timeout:    time.Minute,
		HistoryMax: 10,
	}, s.objects(), nil, s.image)
}

// withObjects is opts deploying a fixture chart (name test, version
// 0.1.0, appVersion app) whose one template is objs, verbatim, and whose
// crds/ are crds.
func withObjects(opts release.DeployOptions, objs, crds []*unstructured.Unstructured, app string) release.DeployOptions {
	manifest, err := charts.Manifest(objs)
	if err != nil {
		panic(err)
	}
	ch := &chart.Chart{
		Metadata:  &chart.Metadata{APIVersion: "v2", Name: "test", Version: "0.1.0", AppVersion: app},
		Templates: []*common.File{{Name: "templates/objects.yaml", Data: []byte(manifest)}},
	}
	for _, crd := range crds {
		data, err := yaml.Marshal(crd.Object)
		if err != nil {
			panic(err)
		}
		ch.Files = append(ch.Files, &common.File{Name: "crds/" + crd.GetName() + ".yaml", Data: data})
	}
	opts.Render.Chart = ch
	return opts
}

// objectsOf returns (fresh copies of) the objects of opts' fixture chart.
func objectsOf(opts release.DeployOptions) []*unstructured.Unstructured {
	objs, err := cluster.ParseManifest(string(opts.Render.Chart.Templates[0].Data))
	if err != nil {
		panic(err)
	}
	return objs
}

// crdsOf returns the crds/ of opts' fixture chart.
func crdsOf(opts release.DeployOptions) []*unstructured.Unstructured {
	var crds []*unstructured.Unstructured
	for _, f := range opts.Render.Chart.Files {
		var m map[string]any
		if err := yaml.Unmarshal(f.Data, &m); err != nil {
			panic(err)
		}
		crds = append(crds, &unstructured.Unstructured{Object: m})
	}
	return crds
}

// rebuilt is opts deploying objs instead of its fixture chart's objects
// (its crds/ and appVersion kept).
func rebuilt(opts release.DeployOptions, objs []*unstructured.Unstructured) release.DeployOptions {
	return withObjects(opts, objs, crdsOf(opts), opts.Render.Chart.Metadata.AppVersion)
}

// deploy deploys s and requires success.
func (f *engFixture) deploy(t *testing.T, s spec) *release.Result {
	t.Helper()
	res, err := f.engine.Deploy(context.Background(), s.options())
	require.NoError(t, err)
	return res
}

// statuses returns the statuses of the release's records by revision.
func (f *engFixture) statuses(t *testing.T) map[int]storage.Status {
	t.Helper()
	entries, err := f.store.List(context.Background(), engRelease)
	require.NoError(t, err)
	out := map[int]storage.Status{}
	for _, e := range entries {
		out[e.Revision] = e.Status
	}
	return out
}

func (f *engFixture) record(t *testing.T, rev int) *storage.Release {
	t.Helper()
	r, err := f.store.Get(context.Background(), engRelease, rev)
	require.NoError(t, err)
	return r
}

func (f *engFixture) configMap(name string) *unstructured.Unstructured {
	return f.cluster.Object("", "ConfigMap", engNS, name)
}

// exitCode returns the exit code of err (exitcode.Of: the
// command's rule).
func exitCode(err error) int { return exitcode.Of(err) }
