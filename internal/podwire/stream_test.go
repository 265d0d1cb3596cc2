package podwire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// podList is a list of n full pods, as a page of a paged list.
func podList(n int) *corev1.PodList {
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "77", Continue: "page-2", RemainingItemCount: new(int64)}}
	*list.RemainingItemCount = 12
	for i := 0; i < n; i++ {
		list.Items = append(list.Items, *fullPod(fmt.Sprintf("chat-abc-%d", i)))
	}
	return list
}

// listServer answers every request with answer(n), n the request's
// number from 1, and counts them.
func listServer(t *testing.T, answer func(n int32, w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(n.Add(1), w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func writeBody(contentType string, body []byte) func(int32, http.ResponseWriter, *http.Request) {
	return func(_ int32, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}
}

func listThrough(t *testing.T, srv *httptest.Server, f Filter) (*corev1.PodList, error) {
	t.Helper()
	rc, err := NewClient(&rest.Config{Host: srv.URL}, f)
	require.NoError(t, err)
	return Pods{RC: rc, Namespace: "ns"}.List(context.Background(), metav1.ListOptions{Limit: 250})
}

// TestListIsReadAsItArrives: a list read item by item off the response
// holds what the client's decoder makes of the same page read whole (the
// pods cut down by the filter, the list's continue token, resource
// version and remaining count), whatever the filter; without a filter,
// and through a client podwire did not make, the pods are whole.
func TestListIsReadAsItArrives(t *testing.T) {
	list := podList(40)
	body := protobufOf(t, list)
	srv, _ := listServer(t, writeBody(runtime.ContentTypeProtobuf, body))
	for _, tc := range []struct {
		name string
		f    Filter
	}{{"Watched", Watched}, {"Requests", Requests}} {
		t.Run(tc.name, func(t *testing.T) {
			want, _, err := decoderOf(t, tc.f).Decode(body, nil, &corev1.PodList{})
			require.NoError(t, err)
			got, err := listThrough(t, srv, tc.f)
			require.NoError(t, err)
			wl := want.(*corev1.PodList)
			assert.Equal(t, wl.ListMeta, got.ListMeta)
			assert.Equal(t, "page-2", got.Continue)
			require.Len(t, got.Items, 40)
			assert.Equal(t, wl.Items, got.Items)
			assert.Nil(t, got.Items[0].ManagedFields, "cut down")
		})
	}

	t.Run("whole", func(t *testing.T) {
		got, err := listThrough(t, srv, nil)
		require.NoError(t, err)
		require.Len(t, got.Items, 40)
		assert.Equal(t, list.Items[3].Spec, got.Items[3].Spec)
		rc, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, APIPath: "/api", ContentConfig: rest.ContentConfig{
			GroupVersion: &corev1.SchemeGroupVersion, NegotiatedSerializer: newSerializer(Requests)}})
		require.NoError(t, err)
		plain, err := Pods{RC: rc}.List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, plain.Items, 40)
		assert.Empty(t, plain.Items[0].Spec.Volumes, "decoded whole, then cut down by the decoder")
	})
}

// TestListPassesOverFieldsItDoesNotRead: fields of the envelope it does
// not read (the content type and encoding, fields a newer API server may
// add), of any wire type, are passed over.
func TestListPassesOverFieldsItDoesNotRead(t *testing.T) {
	body := protobufOf(t, podList(2))
	require.Equal(t, []byte{0x1a, 0x00, 0x22, 0x00}, body[len(body)-4:], "the envelope ends with its empty content encoding and type")
	body = protowire.AppendTag(body, 9, protowire.VarintType)
	body = protowire.AppendVarint(body, 1<<40)
	body = protowire.AppendTag(body, 10, protowire.Fixed64Type)
	body = protowire.AppendFixed64(body, 7)
	body = protowire.AppendTag(body, 11, protowire.Fixed32Type)
	body = protowire.AppendFixed32(body, 7)
	body = protowire.AppendTag(body, 12, protowire.BytesType)
	body = protowire.AppendBytes(body, make([]byte, 100<<10))
	var got corev1.PodList
	require.NoError(t, new(stream).readList(bytes.NewReader(body), Requests, &got))
	assert.Len(t, got.Items, 2)
}

// TestListOfJSON: a server that answers JSON gets its list decoded whole.
func TestListOfJSON(t *testing.T) {
	list := podList(3)
	data, err := json.Marshal(list)
	require.NoError(t, err)
	srv, _ := listServer(t, writeBody("application/json", data))
	got, err := listThrough(t, srv, Requests)
	require.NoError(t, err)
	require.Len(t, got.Items, 3)
	assert.Equal(t, "page-2", got.Continue)
	assert.Equal(t, "chat-abc-2", got.Items[2].Name)
}

// TestListRefusals: an error status keeps its reason (the preflight tells
// a Forbidden list apart); a connection closed before any answer is
// tried again; bad bytes are an error, never a short list.
func TestListRefusals(t *testing.T) {
	t.Run("forbidden", func(t *testing.T) {
		status := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden, Message: `pods is forbidden: User "ci" cannot list resource "pods"`}
		data, err := json.Marshal(status)
		require.NoError(t, err)
		srv, _ := listServer(t, func(_ int32, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write(data)
		})
		_, err = listThrough(t, srv, Requests)
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
	})

	t.Run("connection closed, then answered", func(t *testing.T) {
		body := protobufOf(t, podList(2))
		srv, n := listServer(t, func(n int32, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					_ = conn.Close()
				}
				return
			}
			writeBody(runtime.ContentTypeProtobuf, body)(n, w, r)
		})
		got, err := listThrough(t, srv, Requests)
		require.NoError(t, err)
		assert.Len(t, got.Items, 2)
		assert.GreaterOrEqual(t, n.Load(), int32(2))
	})

	body := protobufOf(t, podList(3))
	huge := append([]byte(protobufMagic), protowire.AppendTag(nil, unknownRaw, protowire.BytesType)...)
	huge = protowire.AppendVarint(huge, 1<<40)
	// A list of 20 MiB whose one item claims 17 MiB.
	hugeItem := append([]byte(protobufMagic), body[len(protobufMagic):len(protobufMagic)+2+int(body[len(protobufMagic)+1])]...)
	hugeItem = protowire.AppendTag(hugeItem, unknownRaw, protowire.BytesType)
	hugeItem = protowire.AppendVarint(hugeItem, 20<<20)
	hugeItem = protowire.AppendTag(hugeItem, podListItems, protowire.BytesType)
	hugeItem = protowire.AppendVarint(hugeItem, 17<<20)
	event := protobufOf(t, &corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}, ObjectMeta: metav1.ObjectMeta{Name: "e"}})
	for name, bad := range map[string][]byte{
		"cut short":      body[:len(body)-100],
		"cut in a field": body[:len(body)/2],
		"a huge length":  huge,
		"a huge item":    hugeItem,
		"not a list":     event,
		"no object":      []byte(protobufMagic),
		"no list":        body[:len(protobufMagic)+2+int(body[len(protobufMagic)+1])],
		"cut in a tag":   append(append([]byte{}, body...), 0x80),
		"garbage":        append([]byte(protobufMagic), 0xff, 0xff, 0xff),
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := listServer(t, writeBody(runtime.ContentTypeProtobuf, bad))
			got, err := listThrough(t, srv, Requests)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "read the pods' list")
			assert.NotNil(t, got)
		})
	}
}

// TestListLargerThanAnItemBound: a list whose bytes pass maxItemBytes
// (an unpaged list of a big namespace) is read; only an item is bounded.
func TestListLargerThanAnItemBound(t *testing.T) {
	list := podList(1)
	pad := strings.Repeat("x", 64<<10)
	for i := 0; i < 300; i++ {
		p := *fullPod(fmt.Sprintf("big-%d", i))
		p.Annotations = map[string]string{"pad": pad}
		list.Items = append(list.Items, p)
	}
	body := protobufOf(t, list)
	require.Greater(t, len(body), maxItemBytes)
	var got corev1.PodList
	require.NoError(t, new(stream).readList(bytes.NewReader(body), Requests, &got))
	assert.Len(t, got.Items, 301)
}

// TestReadPodListHoldsOnePodAtATime: the reader's buffers grow to the
// largest pod, not to the page.
func TestReadPodListHoldsOnePodAtATime(t *testing.T) {
	list := podList(200)
	body := protobufOf(t, list)
	one := len(protobufOf(t, &list.Items[0]))
	var got corev1.PodList
	s := &stream{}
	r := bytes.NewReader(body)
	require.NoError(t, s.readList(r, Requests, &got))
	require.Len(t, got.Items, 200)
	assert.Less(t, cap(s.buf), 2*one, "the item buffer holds one pod")
	assert.Less(t, len(body), 200*one+1024)
}
