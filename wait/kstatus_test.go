// Tests of KstatusWaiter, with a scripted status watcher.

package wait

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/polling/event"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/cli-utils/pkg/kstatus/watcher"
	clobject "sigs.k8s.io/cli-utils/pkg/object"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
)

const ns = "llm"

// scriptedWatcher plays events, then waits for the context to end, then
// closes its channel, as the status watcher does.
type scriptedWatcher struct {
	events []event.Event
	// watching, when not nil, is closed once Watch is called.
	watching chan struct{}
	mu       sync.Mutex
	ids      clobject.ObjMetadataSet
	opts     watcher.Options
}

func (w *scriptedWatcher) Watch(ctx context.Context, ids clobject.ObjMetadataSet, opts watcher.Options) <-chan event.Event {
	w.mu.Lock()
	w.ids, w.opts = ids, opts
	w.mu.Unlock()
	if w.watching != nil {
		close(w.watching)
	}
	ch := make(chan event.Event)
	go func() {
		defer close(ch)
		for _, e := range w.events {
			select {
			case ch <- e:
			case <-ctx.Done():
				return
			}
		}
		<-ctx.Done()
	}()
	return ch
}

func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	return m
}

func obj(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion(apiVersion)
	o.SetKind(kind)
	o.SetNamespace(namespace)
	o.SetName(name)
	return o
}

func id(group, kind, namespace, name string) clobject.ObjMetadata {
	return clobject.ObjMetadata{GroupKind: schema.GroupKind{Group: group, Kind: kind}, Namespace: namespace, Name: name}
}

func update(i clobject.ObjMetadata, s status.Status, msg string) event.Event {
	return event.Event{Type: event.ResourceUpdateEvent, Resource: &event.ResourceStatus{Identifier: i, Status: s, Message: msg}}
}

var (
	web = id("apps", "Deployment", ns, "web")
	cfg = id("", "ConfigMap", ns, "cfg")
)

func objects() []*unstructured.Unstructured {
	return []*unstructured.Unstructured{obj("apps/v1", "Deployment", "", "web"), obj("v1", "ConfigMap", ns, "cfg")}
}

func TestKstatusWaiter(t *testing.T) {
	cases := []struct {
		name        string
		events      []event.Event
		timeout     time.Duration
		wantOutcome Outcome
		wantErrIs   error
		wantNot     []rollout.ObjectStatus
		wantEvents  []string
	}{
		{
			name: "all current",
			events: []event.Event{
				update(web, status.InProgressStatus, "Replicas: 0/1"),
				update(cfg, status.CurrentStatus, "Resource is always ready"),
				update(web, status.InProgressStatus, "Replicas: 0/1"), // no change: no event
				{Type: event.SyncEvent},
				update(web, status.CurrentStatus, "Deployment is available. Replicas: 1"),
			},
			wantOutcome: OutcomeCurrent,
			wantEvents: []string{
				"apps/v1 Deployment llm/web: InProgress: Replicas: 0/1",
				"v1 ConfigMap llm/cfg: Current: Resource is always ready",
				"apps/v1 Deployment llm/web: Current: Deployment is available. Replicas: 1",
			},
		},
		{
			name: "failure ends the wait",
			events: []event.Event{
				update(cfg, status.InProgressStatus, ""),
				update(web, status.FailedStatus, "Progress deadline exceeded"),
				update(cfg, status.CurrentStatus, "never seen"),
			},
			wantOutcome: OutcomeFailed,
			wantErrIs:   ErrFailed,
			wantNot: []rollout.ObjectStatus{
				{Object: object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"}, Status: rollout.StatusFailed, Message: "Progress deadline exceeded"},
				{Object: object.Ref{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "cfg"}, Status: rollout.StatusInProgress},
			},
		},
		{
			name: "timeout names what is not current",
			events: []event.Event{
				update(cfg, status.CurrentStatus, ""),
				update(web, status.InProgressStatus, "Available: 0/1"),
			},
			timeout:     100 * time.Millisecond,
			wantOutcome: OutcomeTimeout,
			wantErrIs:   ErrTimeout,
			wantNot: []rollout.ObjectStatus{
				{Object: object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"}, Status: rollout.StatusInProgress, Message: "Available: 0/1"},
			},
		},
		{
			name:        "objects never reported are not found after sync",
			events:      []event.Event{update(cfg, status.CurrentStatus, ""), {Type: event.SyncEvent}},
			timeout:     100 * time.Millisecond,
			wantOutcome: OutcomeTimeout,
			wantErrIs:   ErrTimeout,
			wantNot: []rollout.ObjectStatus{
				{Object: object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"}, Status: rollout.StatusNotFound, Message: "not found"},
			},
		},
		{
			name: "status errors are Unknown",
			events: []event.Event{{Type: event.ResourceUpdateEvent, Resource: &event.ResourceStatus{
				Identifier: web, Status: status.UnknownStatus, Error: errors.New("boom")}}},
			timeout:     100 * time.Millisecond,
			wantOutcome: OutcomeTimeout,
			wantErrIs:   ErrTimeout,
			wantNot: []rollout.ObjectStatus{
				{Object: object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"}, Status: rollout.StatusUnknown, Message: "boom"},
				{Object: object.Ref{Version: "v1", Kind: "ConfigMap", Namespace: ns, Name: "cfg"}, Status: rollout.StatusUnknown},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sw := &scriptedWatcher{events: tc.events}
			w := NewKstatusWaiterWithWatcher(sw, testMapper())
			events := make(chan rollout.Event)
			var got []string
			done := make(chan struct{})
			go func() {
				defer close(done)
				for e := range events {
					assert.False(t, e.Time.IsZero())
					got = append(got, rollout.ObjectStatus{Object: e.Object, Status: e.Status, Message: e.Message}.String())
				}
			}()
			res, err := w.Wait(context.Background(), objects(), Options{Timeout: tc.timeout, Namespace: ns, Events: events})
			<-done // Wait closed the channel
			assert.Equal(t, tc.wantOutcome, res.Outcome)
			assert.Equal(t, clobject.ObjMetadataSet{web, cfg}, sw.ids, "namespace defaulted, in order")
			require.Len(t, res.Objects, 2)
			if tc.wantErrIs == nil {
				require.NoError(t, err)
				assert.Empty(t, res.NotCurrent())
				assert.Equal(t, tc.wantEvents, got)
				return
			}
			require.ErrorIs(t, err, tc.wantErrIs)
			var nre *NotReadyError
			require.ErrorAs(t, err, &nre)
			assert.Equal(t, tc.wantNot, nre.Objects)
			for _, s := range tc.wantNot {
				assert.Contains(t, err.Error(), s.Object.String())
			}
			if tc.wantOutcome == OutcomeTimeout {
				assert.Equal(t, tc.timeout, nre.Timeout)
				assert.Contains(t, err.Error(), "timed out after 100ms")
			}
		})
	}
}

func TestKstatusWaiterEnds(t *testing.T) {
	t.Run("no objects", func(t *testing.T) {
		events := make(chan rollout.Event)
		res, err := NewKstatusWaiterWithWatcher(&scriptedWatcher{}, testMapper()).Wait(context.Background(), nil, Options{Events: events})
		require.NoError(t, err)
		assert.Equal(t, OutcomeCurrent, res.Outcome)
		_, open := <-events
		assert.False(t, open, "events closed")
	})
	t.Run("watch error", func(t *testing.T) {
		sw := &scriptedWatcher{events: []event.Event{{Type: event.ErrorEvent, Error: errors.New("forbidden")}}}
		res, err := NewKstatusWaiterWithWatcher(sw, testMapper()).Wait(context.Background(), objects(), Options{Namespace: ns})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "forbidden")
		assert.Equal(t, OutcomeError, res.Outcome)
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		sw := &scriptedWatcher{watching: make(chan struct{})}
		go func() { <-sw.watching; cancel() }()
		res, err := NewKstatusWaiterWithWatcher(sw, testMapper()).Wait(ctx, objects(), Options{Namespace: ns})
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, OutcomeCanceled, res.Outcome)
	})
	t.Run("parent deadline is a timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		res, err := NewKstatusWaiterWithWatcher(&scriptedWatcher{}, testMapper()).Wait(ctx, objects(), Options{Namespace: ns})
		require.ErrorIs(t, err, ErrTimeout)
		assert.Equal(t, OutcomeTimeout, res.Outcome)
		assert.Len(t, res.NotCurrent(), 2)
	})
	t.Run("unknown kind without namespace", func(t *testing.T) {
		res, err := NewKstatusWaiterWithWatcher(&scriptedWatcher{}, testMapper()).Wait(context.Background(),
			[]*unstructured.Unstructured{obj("example.com/v1", "Widget", "", "w")}, Options{Namespace: ns})
		require.Error(t, err)
		assert.True(t, meta.IsNoMatchError(err))
		assert.Equal(t, OutcomeError, res.Outcome)
	})
	t.Run("duplicates and cluster-scoped objects", func(t *testing.T) {
		sw := &scriptedWatcher{events: []event.Event{
			update(id("", "Namespace", "", ns), status.CurrentStatus, ""),
			update(cfg, status.CurrentStatus, ""),
		}}
		objs := []*unstructured.Unstructured{obj("v1", "Namespace", "", ns), obj("v1", "ConfigMap", "", "cfg"), obj("v1", "ConfigMap", ns, "cfg")}
		res, err := NewKstatusWaiterWithWatcher(sw, testMapper()).Wait(context.Background(), objs, Options{Namespace: ns, Timeout: time.Second})
		require.NoError(t, err)
		assert.Len(t, res.Objects, 2)
		assert.Equal(t, clobject.ObjMetadataSet{id("", "Namespace", "", ns), cfg}, sw.ids)
		assert.Equal(t, watcher.RESTScopeNamespace, sw.opts.RESTScopeStrategy, "no cluster-wide watch of namespaced kinds")
	})
}

func TestNotReadyErrorIs(t *testing.T) {
	cases := []struct {
		outcome Outcome
		is      error
		isNot   error
	}{
		{OutcomeTimeout, ErrTimeout, ErrFailed},
		{OutcomeFailed, ErrFailed, ErrTimeout},
	}
	for _, tc := range cases {
		t.Run(string(tc.outcome), func(t *testing.T) {
			err := error(&NotReadyError{Outcome: tc.outcome})
			assert.ErrorIs(t, err, tc.is)
			assert.NotErrorIs(t, err, tc.isNot)
		})
	}
}
