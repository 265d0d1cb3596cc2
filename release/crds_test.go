package release_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/release/storage"
)

const (
	loraGroup = "demo.vllmctl.io"
	loraCRD   = "loraadapters.demo.vllmctl.io"
)

var loraGK = schema.GroupKind{Group: loraGroup, Kind: "LoraAdapter"}

// crdCluster is the fake cluster with CustomResourceDefinitions: it
// implements release.CRDClient, and refuses objects of a kind a test CRD
// defines (an *UnknownKindError, as the Applier's RESTMapper does) until
// that CRD is Established and discovery was asked again (MissingKinds).
// Every CRD call and every object apply is logged, in order.
type crdCluster struct {
	*releasetest.Cluster

	mu      sync.Mutex
	crds    map[string]*unstructured.Unstructured
	custom  map[schema.GroupKind]bool
	served  map[schema.GroupKind]bool
	log     []string
	crdGets int
	// createErr, when set, refuses the creation (not the dry run) of a CRD.
	createErr error
	// conditions are the status conditions a created CRD starts with
	// (nil: Established at once).
	conditions []any
	// watchEvents are sent on each watch of a CRD (then the watch stays
	// open without events until the deploy's context ends).
	watchEvents []watch.Event
	// onCreate runs when a CRD is created for real.
	onCreate func()
	// onWatch runs when a CRD is watched, before the watch is returned.
	onWatch func()
}

var _ release.CRDClient = (*crdCluster)(nil)

func newCRDCluster() *crdCluster {
	return &crdCluster{
		Cluster: releasetest.NewCluster(),
		crds:    map[string]*unstructured.Unstructured{},
		custom:  map[schema.GroupKind]bool{loraGK: true},
		served:  map[schema.GroupKind]bool{},
	}
}

func (c *crdCluster) note(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, fmt.Sprintf(format, args...))
}

func (c *crdCluster) entries() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// unknown returns the *UnknownKindError of obj when its kind is not served.
func (c *crdCluster) unknown(obj *unstructured.Unstructured) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	gk := obj.GroupVersionKind().GroupKind()
	if c.custom[gk] && !c.served[gk] {
		return &cluster.UnknownKindError{Object: object.RefOf(obj), Err: fmt.Errorf("no matches for kind %q in group %q", gk.Kind, gk.Group)}
	}
	return nil
}

func (c *crdCluster) Apply(ctx context.Context, objs []*unstructured.Unstructured, opts cluster.ApplyOptions) ([]cluster.ApplyResult, error) {
	for _, o := range objs {
		if err := c.unknown(o); err != nil {
			return nil, err
		}
	}
	what := "apply"
	if opts.DryRun {
		what = "dry-run"
	}
	for _, o := range objs {
		c.note("%s %s/%s", what, o.GetKind(), o.GetName())
	}
	return c.Cluster.Apply(ctx, objs, opts)
}

func (c *crdCluster) Get(ctx context.Context, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error) {
	if err := c.unknown(obj); err != nil {
		return nil, err
	}
	return c.Cluster.Get(ctx, obj, namespace)
}

func (c *crdCluster) GetCRD(_ context.Context, name string) (*unstructured.Unstructured, error) {
	c.note("get crd %s", name)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crdGets++
	if crd := c.crds[name]; crd != nil {
		return crd.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, name)
}

func (c *crdCluster) CreateCRD(_ context.Context, crd *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	if dryRun {
		c.note("dry-run create crd %s", crd.GetName())
	} else {
		c.note("create crd %s", crd.GetName())
		if c.onCreate != nil {
			c.onCreate()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	gr := schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	switch {
	case c.crds[crd.GetName()] != nil:
		return nil, apierrors.NewAlreadyExists(gr, crd.GetName())
	case dryRun:
		return crd.DeepCopy(), nil
	case c.createErr != nil:
		return nil, fmt.Errorf("create CustomResourceDefinition %s: %w", crd.GetName(), c.createErr)
	}
	live := crd.DeepCopy()
	live.SetResourceVersion("1")
	conds := c.conditions
	if conds == nil {
		conds = establishedConditions()
	}
	_ = unstructured.SetNestedSlice(live.Object, conds, "status", "conditions")
	c.crds[crd.GetName()] = live
	return live.DeepCopy(), nil
}

func (c *crdCluster) WatchCRD(_ context.Context, name, _ string) (watch.Interface, error) {
	c.note("watch crd %s", name)
	if c.onWatch != nil {
		c.onWatch()
	}
	w := watch.NewFakeWithChanSize(len(c.watchEvents), false)
	for _, ev := range c.watchEvents {
		w.Action(ev.Type, ev.Object)
	}
	return w, nil
}

// MissingKinds serves the kinds of the Established CRDs (discovery asked
// again).
func (c *crdCluster) MissingKinds(_ context.Context, gvks []schema.GroupVersionKind) ([]schema.GroupVersionKind, error) {
	c.note("discovery")
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, crd := range c.crds {
		gk := schema.GroupKind{Group: nested(crd, "spec", "group"), Kind: nested(crd, "spec", "names", "kind")}
		for _, cond := range conditionsOf(crd) {
			if cond["type"] == "Established" && cond["status"] == "True" {
				c.served[gk] = true
			}
		}
	}
	var missing []schema.GroupVersionKind
	for _, gvk := range gvks {
		if !c.served[gvk.GroupKind()] {
			missing = append(missing, gvk)
		}
	}
	return missing, nil
}

// put stores crd as created by someone else, Established and served.
func (c *crdCluster) put(crd *unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := crd.DeepCopy()
	live.SetResourceVersion("42")
	_ = unstructured.SetNestedSlice(live.Object, establishedConditions(), "status", "conditions")
	c.crds[crd.GetName()] = live
	c.served[schema.GroupKind{Group: nested(crd, "spec", "group"), Kind: nested(crd, "spec", "names", "kind")}] = true
}

func (c *crdCluster) crd(name string) *unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	if crd := c.crds[name]; crd != nil {
		return crd.DeepCopy()
	}
	return nil
}

func (c *crdCluster) gets() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crdGets
}

func nested(obj *unstructured.Unstructured, path ...string) string {
	s, _, _ := unstructured.NestedString(obj.Object, path...)
	return s
}

func conditionsOf(obj *unstructured.Unstructured) []map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var out []map[string]any
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func establishedConditions() []any {
	return []any{
		map[string]any{"type": "NamesAccepted", "status": "True", "reason": "NoConflicts"},
		map[string]any{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"},
	}
}

// loraCRDObject is the LoraAdapter CRD; printerColumn adds a printer
// column (a changed CRD file).
func loraCRDObject(printerColumn bool) *unstructured.Unstructured {
	version := map[string]any{
		"name": "v1", "served": true, "storage": true,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
	}
	if printerColumn {
		version["additionalPrinterColumns"] = []any{map[string]any{"name": "Base", "type": "string", "jsonPath": ".spec.baseModel"}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": loraCRD},
		"spec": map[string]any{
			"group": loraGroup, "scope": "Namespaced",
			"names":    map[string]any{"kind": "LoraAdapter", "listKind": "LoraAdapterList", "plural": "loraadapters", "singular": "loraadapter"},
			"versions": []any{version},
		},
	}}
}

// loraAdapter is the custom resource of the test chart.
func loraAdapter(version string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": loraGroup + "/" + version, "kind": "LoraAdapter",
		"metadata": map[string]any{"name": "chat-adapter", "namespace": engNS, "labels": labels()},
		"spec":     map[string]any{"baseModel": "Qwen/Qwen2.5-7B-Instruct", "source": "hf://vllmctl/demo-lora"},
	}}
}

// crdOptions are the deploy options of s plus a LoraAdapter and the CRD.
func crdOptions(s spec, crds ...*unstructured.Unstructured) release.DeployOptions {
	opts := s.options()
	objs := append(objectsOf(opts), loraAdapter("v1"))
	charts.SortObjects(objs)
	return withObjects(opts, objs, crds, s.image)
}

// lean keeps the ConfigMaps and LoraAdapters of opts (no Deployment: the
// fake cluster's controller reports its status, which a redeploy never
// finds up to date).
func lean(opts release.DeployOptions) release.DeployOptions {
	return rebuilt(opts, slices.DeleteFunc(objectsOf(opts), func(o *unstructured.Unstructured) bool {
		return o.GetKind() != "ConfigMap" && o.GetKind() != "LoraAdapter"
	}))
}

// newCRDFixture is an engine fixture on a crdCluster.
func newCRDFixture(t *testing.T) (*engFixture, *crdCluster) {
	t.Helper()
	f := newEngFixture(t)
	c := newCRDCluster()
	f.cluster = c.Cluster
	progress := f.engine.Progress
	f.engine = c.Engine(f.store, f.waiter, releasetest.ClockFunc(f.tick))
	f.engine.Objects = c
	f.engine.Progress = progress
	return f, c
}

// crdEvents returns the crds-phase (and delete-phase "kept") progress
// lines.
func (f *engFixture) crdEvents() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ev := range f.events {
		if ev.Phase == release.PhaseCRDs || (ev.Phase == release.PhaseDelete && ev.Status == "kept") {
			out = append(out, strings.Join([]string{string(ev.Phase), ev.Object, ev.Status, ev.Message}, " | "))
		}
	}
	return out
}

// index returns the position of the first log entry equal to want (-1:
// absent).
func index(log []string, want string) int { return slices.Index(log, want) }

// A chart with crds/ deploys in one go. The CRD is dry-run
// created before the lock (validation, nothing persisted), the custom
// resource is not dry-run (its kind does not exist yet) and counts as to
// be created, the CRD is created under the lock before any object, the
// deploy waits for Established and for discovery to map the kind, then
// applies the objects; the record and the result list the CRD.
func TestDeployCreatesCRDsBeforeObjects(t *testing.T) {
	f, c := newCRDFixture(t)
	c.onCreate = func() {
		assert.Equal(t, map[int]storage.Status{1: storage.StatusPendingInstall}, f.statuses(t), "CRDs are created under the lock")
	}
	opts := crdOptions(baseSpec(), loraCRDObject(false))
	opts.Diff = true
	res, err := f.engine.Deploy(context.Background(), opts)
	require.NoError(t, err)

	assert.Equal(t, []string{loraCRD}, res.CRDs)
	assert.Equal(t, []string{loraCRD}, f.record(t, 1).CRDs)
	assert.Equal(t, storage.StatusDeployed, res.Status)
	require.NotNil(t, c.crd(loraCRD))
	assert.NotNil(t, f.cluster.Object(loraGroup, "LoraAdapter", engNS, "chat-adapter"), "the custom resource is applied")

	log := c.entries()
	assert.NotContains(t, log, "dry-run LoraAdapter/chat-adapter", "a kind whose CRD is absent is never dry-run")
	assert.Contains(t, log, "dry-run ConfigMap/chat-config", "the other objects are")
	order := []string{"get crd " + loraCRD, "dry-run create crd " + loraCRD, "dry-run ConfigMap/chat-config",
		"create crd " + loraCRD, "discovery", "apply ConfigMap/chat-config", "apply LoraAdapter/chat-adapter"}
	for i := 1; i < len(order); i++ {
		assert.Less(t, index(log, order[i-1]), index(log, order[i]), "%q before %q in %v", order[i-1], order[i], log)
	}

	var diffs []string
	f.mu.Lock()
	for _, ev := range f.events {
		if ev.Phase == release.PhaseDiff && ev.Diff != nil {
			for _, o := range ev.Diff.Objects {
				diffs = append(diffs, string(o.Action)+" "+o.Object)
			}
		}
	}
	f.mu.Unlock()
	assert.Contains(t, diffs, "create apiextensions.k8s.io/v1 CustomResourceDefinition "+loraCRD, "the diff shows the CRD to create")
	assert.Contains(t, diffs, "create demo.vllmctl.io/v1 LoraAdapter ml/chat-adapter")

	events := f.crdEvents()
	require.Len(t, events, 3, "%v", events)
	assert.Contains(t, events[0], "not dry-run")
	assert.Contains(t, events[0], "demo.vllmctl.io/v1 LoraAdapter ml/chat-adapter")
	assert.Equal(t, "crds | apiextensions.k8s.io/v1 CustomResourceDefinition "+loraCRD+" | created | ", events[1])
	assert.Equal(t, "crds | apiextensions.k8s.io/v1 CustomResourceDefinition "+loraCRD+" | Established | ", events[2])
}

// The render path: the chart's crds/ (charts.Rendered.CRDs) are created.
func TestDeployRendersChartCRDs(t *testing.T) {
	f, c := newCRDFixture(t)
	ch, err := charts.Load("../testdata/charts/crds-demo")
	require.NoError(t, err)
	res, err := f.engine.Deploy(context.Background(), release.DeployOptions{
		Name:    engRelease,
		Render:  release.RenderInput{Chart: ch, Options: charts.RenderOptions{Namespace: engNS}},
		Timeout: time.Minute,
	})
	require.NoError(t, err)
	assert.Equal(t, []string{loraCRD}, res.CRDs)
	assert.NotNil(t, c.crd(loraCRD))
	assert.NotNil(t, f.cluster.Object(loraGroup, "LoraAdapter", engNS, "chat-adapter"))
}

// An existing CRD is never updated: an upgrade whose CRD file changed
// leaves it as it is (one progress note); one that changes nothing else
// is still a new revision, since its record keeps the new CRD file (what
// a rollback to it would create).
func TestDeployLeavesExistingCRDAlone(t *testing.T) {
	cases := []struct {
		name     string
		greeting string // of the upgrade
	}{
		{name: "other objects change", greeting: "bonjour"},
		{name: "only the CRD file changes", greeting: "hello"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newCRDFixture(t)
			_, err := f.engine.Deploy(context.Background(), lean(crdOptions(baseSpec(), loraCRDObject(false))))
			require.NoError(t, err)
			before := c.crd(loraCRD)
			seen := len(c.entries())

			s := baseSpec()
			s.greeting = tc.greeting
			res, err := f.engine.Deploy(context.Background(), lean(crdOptions(s, loraCRDObject(true))))
			require.NoError(t, err)
			assert.Equal(t, before, c.crd(loraCRD), "the live CRD is unchanged (spec, resourceVersion)")
			for _, l := range c.entries()[seen:] {
				assert.NotContains(t, l, "create crd", "the upgrade creates no CRD, not even in a dry run")
			}
			assert.Empty(t, res.CRDs)
			assert.Equal(t, 2, res.Revision)
			assert.Contains(t, f.record(t, 2).CRDManifest, "additionalPrinterColumns", "the record keeps the new CRD file")
			assert.Empty(t, f.record(t, 2).CRDs)
			assert.Contains(t, strings.Join(f.crdEvents(), "\n"), "crds |  | exists | left as it is (vllmctl never updates or deletes a CustomResourceDefinition): "+loraCRD)
		})
	}
}

// Unlike Helm, an upgrade creates the CRDs a chart added.
func TestDeployUpgradeCreatesAddedCRD(t *testing.T) {
	f, c := newCRDFixture(t)
	f.deploy(t, baseSpec())
	res, err := f.engine.Deploy(context.Background(), crdOptions(baseSpec(), loraCRDObject(false)))
	require.NoError(t, err)
	assert.Equal(t, 2, res.Revision)
	assert.Equal(t, []string{loraCRD}, f.record(t, 2).CRDs)
	assert.NotNil(t, c.crd(loraCRD))
	assert.NotNil(t, f.cluster.Object(loraGroup, "LoraAdapter", engNS, "chat-adapter"))
}

// deploy --dry-run and vllmctl diff never create a CRD; both show it as
// to be created, with the custom resource.
func TestDryRunAndDiffCreateNoCRD(t *testing.T) {
	t.Run("deploy --dry-run", func(t *testing.T) {
		f, c := newCRDFixture(t)
		opts := crdOptions(baseSpec(), loraCRDObject(false))
		opts.DryRun = true
		res, err := f.engine.Deploy(context.Background(), opts)
		require.NoError(t, err)
		assert.Nil(t, c.crd(loraCRD), "no CRD created")
		assert.Empty(t, f.statuses(t), "nothing recorded")
		assert.Empty(t, f.cluster.Refs(), "nothing applied")
		var applied []string
		for _, a := range res.Applied {
			applied = append(applied, a.Object.String()+" "+string(a.Action))
		}
		assert.Contains(t, applied, "apiextensions.k8s.io/v1 CustomResourceDefinition "+loraCRD+" created")
		assert.Contains(t, applied, "demo.vllmctl.io/v1 LoraAdapter ml/chat-adapter created")
	})
	t.Run("diff", func(t *testing.T) {
		f, c := newCRDFixture(t)
		ch, err := charts.Load("../testdata/charts/crds-demo")
		require.NoError(t, err)
		rep, err := f.engine.Diff(context.Background(), release.DiffOptions{
			Name: engRelease, Render: release.RenderInput{Chart: ch, Options: charts.RenderOptions{Namespace: engNS}},
		})
		require.NoError(t, err)
		assert.Nil(t, c.crd(loraCRD), "no CRD created")
		assert.Empty(t, f.cluster.Refs(), "nothing applied")
		var objs []string
		for _, o := range rep.Objects {
			objs = append(objs, string(o.Action)+" "+o.Object)
		}
		assert.Equal(t, []string{
			"create v1 ConfigMap ml/chat-config",
			"create apiextensions.k8s.io/v1 CustomResourceDefinition " + loraCRD,
			"create demo.vllmctl.io/v1 LoraAdapter ml/chat-adapter",
		}, objs, "Helm's install order: the CRD before the custom resource")
		assert.Equal(t, 3, rep.Summary.Create)
	})
}

// A CRD the cluster refuses, whose names it does not accept, or that is
// never Established fails the deploy naming it: nothing else is applied
// and the revision is marked failed (exit 6).
func TestDeployCRDFailures(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(c *crdCluster)
		timeout time.Duration // of the deploy's context (0: none)
		reason  string
		message string
	}{
		{
			name: "create refused",
			setup: func(c *crdCluster) {
				c.createErr = apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
					loraCRD, fmt.Errorf("user cannot create resource"))
			},
			reason:  release.ReasonCRDRefused,
			message: `customresourcedefinitions.apiextensions.k8s.io "` + loraCRD + `" is forbidden`,
		},
		{
			name: "names not accepted",
			setup: func(c *crdCluster) {
				c.conditions = []any{map[string]any{"type": "NamesAccepted", "status": "False", "reason": "ListKindConflict", "message": `"LoraAdapterList" is already in use`}}
			},
			reason:  release.ReasonCRDNamesNotAccepted,
			message: `NamesAccepted=False: ListKindConflict: "LoraAdapterList" is already in use`,
		},
		{
			name: "names rejected while watched",
			setup: func(c *crdCluster) {
				c.conditions = []any{}
				bad := loraCRDObject(false)
				_ = unstructured.SetNestedSlice(bad.Object, []any{map[string]any{"type": "NamesAccepted", "status": "False", "reason": "KindConflict"}}, "status", "conditions")
				c.watchEvents = []watch.Event{{Type: watch.Modified, Object: bad}}
			},
			reason:  release.ReasonCRDNamesNotAccepted,
			message: "NamesAccepted=False: KindConflict",
		},
		{
			name: "never Established",
			setup: func(c *crdCluster) {
				c.conditions = []any{map[string]any{"type": "Established", "status": "False", "reason": "Installing", "message": "the initial names have not been accepted"}}
			},
			timeout: 500 * time.Millisecond,
			reason:  release.ReasonCRDNotEstablished,
			message: "not Established within the deploy's --timeout (Established=False: Installing: the initial names have not been accepted)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newCRDFixture(t)
			tc.setup(c)
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			res, err := f.engine.Deploy(ctx, crdOptions(baseSpec(), loraCRDObject(false)))
			require.Error(t, err)
			assert.Equal(t, 6, exitCode(err), "%v", err)
			assert.Contains(t, err.Error(), "CustomResourceDefinition "+loraCRD)
			assert.Contains(t, err.Error(), tc.message)
			assert.Contains(t, err.Error(), "nothing else was applied")
			assert.Zero(t, f.cluster.Applies(), "no other object applied")
			require.NotNil(t, res)
			assert.Equal(t, storage.StatusFailed, res.Status)
			rec := f.record(t, 1)
			assert.Equal(t, storage.StatusFailed, rec.Status)
			require.NotNil(t, rec.Failure)
			assert.Equal(t, tc.reason, rec.Failure.Reason)
			assert.Equal(t, "CustomResourceDefinition/"+loraCRD, rec.Failure.Object)
			assert.Equal(t, "Install failed: "+tc.reason, rec.Description)
		})
	}
}

// A CRD that is not Established when created becomes so while watched.
func TestDeployWaitsForCRDEstablished(t *testing.T) {
	f, c := newCRDFixture(t)
	c.conditions = []any{}
	ok := loraCRDObject(false)
	_ = unstructured.SetNestedSlice(ok.Object, establishedConditions(), "status", "conditions")
	c.watchEvents = []watch.Event{{Type: watch.Modified, Object: ok}}
	// Established in the watch, not in the store it was created in:
	// discovery serves the kind once the store says so too, from when the
	// deploy watches it.
	c.onWatch = func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		_ = unstructured.SetNestedSlice(c.crds[loraCRD].Object, establishedConditions(), "status", "conditions")
	}
	res, err := f.engine.Deploy(context.Background(), crdOptions(baseSpec(), loraCRDObject(false)))
	require.NoError(t, err)
	assert.Equal(t, storage.StatusDeployed, res.Status)
	assert.Contains(t, c.entries(), "watch crd "+loraCRD)
	assert.NotNil(t, f.cluster.Object(loraGroup, "LoraAdapter", engNS, "chat-adapter"))
}

// --skip-crds: no CRD is read or created; the deploy works when the CRD
// exists, and fails clearly before the lock (exit 6, nothing recorded)
// when it does not.
func TestDeploySkipCRDs(t *testing.T) {
	t.Run("CRD absent", func(t *testing.T) {
		f, c := newCRDFixture(t)
		opts := crdOptions(baseSpec(), loraCRDObject(false))
		opts.SkipCRDs = true
		_, err := f.engine.Deploy(context.Background(), opts)
		require.Error(t, err)
		assert.Equal(t, 6, exitCode(err))
		assert.Contains(t, err.Error(), "is its CRD installed?")
		assert.Contains(t, err.Error(), "LoraAdapter")
		assert.Zero(t, c.gets(), "no CRD read")
		assert.Nil(t, c.crd(loraCRD))
		assert.Empty(t, f.statuses(t), "nothing recorded")
	})
	t.Run("CRD present", func(t *testing.T) {
		f, c := newCRDFixture(t)
		c.put(loraCRDObject(false))
		opts := crdOptions(baseSpec(), loraCRDObject(true))
		opts.SkipCRDs = true
		res, err := f.engine.Deploy(context.Background(), opts)
		require.NoError(t, err)
		assert.Equal(t, storage.StatusDeployed, res.Status)
		assert.Zero(t, c.gets(), "no CRD read")
		assert.Empty(t, res.CRDs)
		assert.NotNil(t, f.cluster.Object(loraGroup, "LoraAdapter", engNS, "chat-adapter"))
	})
}

// A chart without crds/ never reads a CRD (the least-privilege account
// needs no right on them), and needs no CRDClient.
func TestDeployWithoutCRDsReadsNone(t *testing.T) {
	f, c := newCRDFixture(t)
	f.deploy(t, baseSpec())
	assert.Zero(t, c.gets())
	assert.Empty(t, f.crdEvents())

	plain := newEngFixture(t)
	plain.deploy(t, baseSpec())
	_, err := plain.engine.Deploy(context.Background(), crdOptions(baseSpec(), loraCRDObject(false)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot create CustomResourceDefinitions")
}

// crds/ is input: checked before the cluster is asked anything about it
// (exit 2, nothing recorded).
func TestDeployInvalidCRDs(t *testing.T) {
	edit := func(fn func(o *unstructured.Unstructured)) *unstructured.Unstructured {
		o := loraCRDObject(false)
		fn(o)
		return o
	}
	cases := []struct {
		name    string
		crd     *unstructured.Unstructured
		version string // of the LoraAdapter
		want    string
	}{
		{name: "v1beta1", crd: edit(func(o *unstructured.Unstructured) { o.SetAPIVersion("apiextensions.k8s.io/v1beta1") }),
			version: "v1", want: "apiextensions.k8s.io/v1beta1 CustomResourceDefinition " + loraCRD + " is not a CustomResourceDefinition of apiextensions.k8s.io/v1"},
		{name: "not a CRD", crd: edit(func(o *unstructured.Unstructured) { o.SetAPIVersion("v1"); o.SetKind("ConfigMap") }),
			version: "v1", want: "v1 ConfigMap " + loraCRD + " is not a CustomResourceDefinition of apiextensions.k8s.io/v1 (crds/ holds only CRDs"},
		{name: "name not plural.group", crd: edit(func(o *unstructured.Unstructured) { o.SetName("adapters.demo.vllmctl.io") }),
			version: "v1", want: `its name must be <spec.names.plural>.<spec.group>, "loraadapters.demo.vllmctl.io"`},
		{name: "no group", crd: edit(func(o *unstructured.Unstructured) { unstructured.RemoveNestedField(o.Object, "spec", "group") }),
			version: "v1", want: "spec.group required"},
		{name: "bad scope", crd: edit(func(o *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(o.Object, "Global", "spec", "scope")
		}),
			version: "v1", want: `spec.scope "Global"`},
		{name: "object of a version the CRD does not serve", crd: loraCRDObject(false),
			version: "v2", want: "demo.vllmctl.io/v2 LoraAdapter ml/chat-adapter: CustomResourceDefinition " + loraCRD + " (crds/) serves no version v2 (it serves v1)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newCRDFixture(t)
			opts := crdOptions(baseSpec(), tc.crd)
			objs := objectsOf(opts)
			for i, o := range objs {
				if o.GetKind() == "LoraAdapter" {
					objs[i] = loraAdapter(tc.version)
				}
			}
			opts = rebuilt(opts, objs)
			_, err := f.engine.Deploy(context.Background(), opts)
			require.Error(t, err)
			assert.Equal(t, 2, exitCode(err), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Empty(t, c.entries(), "nothing asked of the cluster about CRDs or objects")
			assert.Empty(t, f.statuses(t), "nothing recorded")
		})
	}
}

// uninstall leaves the CRDs the release created, and says so in one line
// naming them; a release that created none says nothing about CRDs.
func TestUninstallKeepsCRDs(t *testing.T) {
	cases := []struct {
		name string
		crds []*unstructured.Unstructured
		want []string
	}{
		{name: "created by the release", crds: []*unstructured.Unstructured{loraCRDObject(false)}, want: []string{loraCRD}},
		{name: "no crds/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newCRDFixture(t)
			opts := crdOptions(baseSpec(), tc.crds...)
			if tc.crds == nil {
				c.put(loraCRDObject(false))
			}
			_, err := f.engine.Deploy(context.Background(), opts)
			require.NoError(t, err)
			s := baseSpec()
			s.greeting = "again"
			_, err = f.engine.Deploy(context.Background(), crdOptions(s, tc.crds...))
			require.NoError(t, err)

			res, err := f.engine.Uninstall(context.Background(), release.UninstallOptions{Name: engRelease})
			require.NoError(t, err)
			assert.Equal(t, tc.want, res.KeptCRDs)
			assert.NotNil(t, c.crd(loraCRD), "the CRD is left in place")
			assert.Nil(t, f.cluster.Object(loraGroup, "LoraAdapter", engNS, "chat-adapter"), "the custom resource is deleted")
			var kept []string
			for _, e := range f.crdEvents() {
				if strings.HasPrefix(e, "delete") {
					kept = append(kept, e)
				}
			}
			if tc.want == nil {
				assert.Empty(t, kept)
				return
			}
			require.Len(t, kept, 1)
			assert.Contains(t, kept[0], "left in place, vllmctl never deletes one")
			assert.Contains(t, kept[0], loraCRD)
		})
	}
}
