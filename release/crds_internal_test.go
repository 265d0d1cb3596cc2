package release

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/release/cluster"
)

const testCRD = "loraadapters.demo.vllmctl.io"

func testCRDObject(conditions ...any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": testCRD},
		"spec": map[string]any{
			"group": "demo.vllmctl.io", "scope": "Namespaced",
			"names":    map[string]any{"kind": "LoraAdapter", "plural": "loraadapters"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true}},
		},
	}}
	if conditions != nil {
		_ = unstructured.SetNestedSlice(o.Object, conditions, "status", "conditions")
	}
	return o
}

func cond(typ, status, reason string) any {
	return map[string]any{"type": typ, "status": status, "reason": reason}
}

// scriptedCRDs is a CRDClient whose watches and reads follow a script.
type scriptedCRDs struct {
	CRDClient
	// watches are the events of each successive watch; a watch beyond
	// them stays open without events.
	watches [][]watch.Event
	// gets are the successive answers of GetCRD.
	gets  []*unstructured.Unstructured
	calls []string
}

func (s *scriptedCRDs) WatchCRD(_ context.Context, name, rv string) (watch.Interface, error) {
	s.calls = append(s.calls, "watch "+rv)
	if len(s.watches) == 0 {
		return watch.NewFake(), nil
	}
	evs := s.watches[0]
	s.watches = s.watches[1:]
	w := watch.NewFakeWithChanSize(len(evs), false)
	for _, ev := range evs {
		w.Action(ev.Type, ev.Object)
	}
	w.Stop() // closed once its events are read
	return w, nil
}

func (s *scriptedCRDs) GetCRD(_ context.Context, name string) (*unstructured.Unstructured, error) {
	s.calls = append(s.calls, "get")
	if len(s.gets) == 0 {
		return nil, errors.New("no more reads scripted")
	}
	g := s.gets[0]
	s.gets = s.gets[1:]
	return g, nil
}

// waitEstablished follows the CRD through its watch: Established ends
// it, NamesAccepted=False and a deletion fail at once naming the CRD, a
// watch that ends is resumed after reading the CRD again, and the
// context's end is a timeout naming the CRD and its condition.
func TestWaitEstablished(t *testing.T) {
	established := testCRDObject(cond("NamesAccepted", "True", "NoConflicts"), cond("Established", "True", "InitialNamesAccepted"))
	installing := testCRDObject(cond("Established", "False", "Installing"))
	installing.SetResourceVersion("5")
	other := testCRDObject(cond("Established", "True", ""))
	other.SetName("others.demo.vllmctl.io")
	cases := []struct {
		name    string
		start   *unstructured.Unstructured
		watches [][]watch.Event
		gets    []*unstructured.Unstructured
		timeout time.Duration
		calls   []string
		reason  string // "" : success
		message string
		code    int
	}{
		{name: "already Established", start: established},
		{name: "Established while watched, other CRDs ignored", start: installing,
			watches: [][]watch.Event{{{Type: watch.Modified, Object: other}, {Type: watch.Modified, Object: installing}, {Type: watch.Modified, Object: established}}},
			calls:   []string{"watch 5"}},
		{name: "watch ended: read again, watch again", start: installing,
			watches: [][]watch.Event{{}, {{Type: watch.Error, Object: &metav1.Status{Code: 410}}}},
			gets:    []*unstructured.Unstructured{installing, established},
			calls:   []string{"watch 5", "get", "watch 5", "get"}},
		{name: "names not accepted", start: testCRDObject(cond("NamesAccepted", "False", "KindConflict")),
			reason: ReasonCRDNamesNotAccepted, message: "NamesAccepted=False: KindConflict", code: exitcode.Cluster},
		{name: "unreadable status", start: testCRDObject("not a condition"),
			reason: ReasonCRDNotEstablished, message: "read its status: ", code: exitcode.Cluster},
		{name: "deleted while watched", start: installing,
			watches: [][]watch.Event{{{Type: watch.Deleted, Object: installing}}},
			reason:  ReasonCRDNotEstablished, message: "deleted while the deploy waited", code: exitcode.Cluster},
		{name: "never Established", start: installing, timeout: 100 * time.Millisecond,
			reason: ReasonCRDNotEstablished, message: "not Established within the deploy's --timeout (Established=False: Installing)", code: exitcode.Cluster},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			client := &scriptedCRDs{watches: tc.watches, gets: tc.gets}
			err := waitEstablished(ctx, client, tc.start)
			if tc.reason == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.calls, client.calls)
				return
			}
			var ce *CRDError
			require.ErrorAs(t, err, &ce)
			ce.Release = "chat"
			assert.Equal(t, tc.reason, ce.Reason)
			assert.Equal(t, testCRD, ce.CRD)
			assert.Contains(t, err.Error(), "release chat: CustomResourceDefinition "+testCRD+" (crds/ of the chart): ")
			assert.Contains(t, err.Error(), tc.message)
			assert.Equal(t, tc.code, exitcode.Of(err))
		})
	}
}

// An interrupted wait is exit 130, not a cluster refusal.
func TestCRDErrorInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := waitEstablished(ctx, &scriptedCRDs{}, testCRDObject())
	var ce *CRDError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "the deploy was interrupted before it was Established")
	assert.Equal(t, exitcode.Interrupted, exitcode.Of(err))
}

// The dry runs of an engine that knows a plan: the objects of the kinds
// of the CRDs to create are not sent to the server but reported created
// (read as absent), after the Namespace and the CRDs; a real apply goes
// through untouched.
func TestCRDObjectsDryRun(t *testing.T) {
	def, err := parseCRD(testCRDObject())
	require.NoError(t, err)
	plan := &crdPlan{create: []crdCreate{{def: def, dry: testCRDObject()}}, pending: map[schema.GroupKind]crdDef{def.kind: def}}
	var sent [][]string
	inner := &recordingObjects{apply: func(objs []*unstructured.Unstructured, opts cluster.ApplyOptions) []cluster.ApplyResult {
		var names []string
		out := []cluster.ApplyResult{{Object: object.Ref{Version: "v1", Kind: "Namespace", Name: "ml"}, Action: cluster.ActionCreated}}
		for _, o := range objs {
			names = append(names, o.GetKind())
			out = append(out, cluster.ApplyResult{Object: object.RefOf(o), Action: cluster.ActionCreated})
		}
		sent = append(sent, names)
		return out
	}}
	objs := []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cfg"}}},
		{Object: map[string]any{"apiVersion": "demo.vllmctl.io/v1", "kind": "LoraAdapter", "metadata": map[string]any{"name": "a"}}},
	}
	c := &crdObjects{ObjectClient: inner, plan: plan, namespace: "ml"}

	res, err := c.Apply(context.Background(), objs, cluster.ApplyOptions{DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"ConfigMap"}}, sent)
	assert.Equal(t, []string{
		"v1 Namespace ml created",
		"apiextensions.k8s.io/v1 CustomResourceDefinition " + testCRD + " created",
		"v1 ConfigMap cfg created",
		"demo.vllmctl.io/v1 LoraAdapter ml/a created",
	}, applied(res))
	for _, r := range res[1:2] {
		assert.True(t, r.BeforeRead)
		assert.Nil(t, r.Before)
	}
	assert.Equal(t, "ml", res[3].Live.GetNamespace())
	assert.True(t, res[3].BeforeRead, "read as absent: the apply need not read it")

	_, err = c.Get(context.Background(), objs[1], "ml")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)

	_, err = c.Apply(context.Background(), objs, cluster.ApplyOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"ConfigMap", "LoraAdapter"}, sent[1], "a real apply sends everything")
}

// recordingObjects is an ObjectClient whose Apply answers with apply.
type recordingObjects struct {
	ObjectClient
	apply func(objs []*unstructured.Unstructured, opts cluster.ApplyOptions) []cluster.ApplyResult
}

func (r *recordingObjects) Apply(_ context.Context, objs []*unstructured.Unstructured, opts cluster.ApplyOptions) ([]cluster.ApplyResult, error) {
	return r.apply(objs, opts), nil
}

// applied lists results as "REF ACTION".
func applied(results []cluster.ApplyResult) []string {
	out := make([]string, len(results))
	for i, r := range results {
		out[i] = r.Object.String() + " " + string(r.Action)
	}
	return out
}
