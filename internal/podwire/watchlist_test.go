package podwire

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
	"k8s.io/client-go/tools/cache"
)

// watchListServer answers as the API server does an informer that lists
// by watching (client-go's WatchListClient, on by default): to a watch
// with sendInitialEvents, the pods as ADDED events and then the bookmark
// that ends them, its annotation saying so; to anything else, a list.
func watchListServer(t *testing.T, pods []corev1.Pod, watchLists *atomic.Int32) *httptest.Server {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.True(t, ok)
	embedded := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("watch") != "true" {
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
			data, err := runtime.Encode(embedded, &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: metav1.ListMeta{ResourceVersion: "50"}, Items: pods})
			if err != nil {
				t.Errorf("encoding the pod list: %v", err)
				return
			}
			_, _ = w.Write(data)
			return
		}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf+";stream=watch")
		w.WriteHeader(http.StatusOK)
		enc := restwatch.NewEncoder(streaming.NewEncoder(info.StreamSerializer.NewFrameWriter(w), scheme.Codecs.EncoderForVersion(info.StreamSerializer.Serializer, corev1.SchemeGroupVersion)), embedded)
		if q.Get("sendInitialEvents") == "true" {
			watchLists.Add(1)
			for i := range pods {
				if err := enc.Encode(&watch.Event{Type: watch.Added, Object: &pods[i]}); err != nil {
					t.Errorf("encoding pod %s: %v", pods[i].Name, err)
					return
				}
			}
			end := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{ResourceVersion: "50",
				Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
			if err := enc.Encode(&watch.Event{Type: watch.Bookmark, Object: end}); err != nil {
				t.Errorf("encoding the bookmark: %v", err)
				return
			}
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
}

// TestInformerSyncsByWatchList: an informer of pods over a NewClient
// client syncs when it lists by watching, with either filter: the
// bookmark that ends the initial events keeps the annotation that says
// so. (Cutting the annotations off left such an informer never synced:
// the rollout watcher judged no pod.)
func TestInformerSyncsByWatchList(t *testing.T) {
	pods := []corev1.Pod{*fullPod("chat-abc-1"), *fullPod("chat-abc-2")}
	for _, tc := range []struct {
		name string
		f    Filter
	}{{"Watched", Watched}, {"Requests", Requests}} {
		t.Run(tc.name, func(t *testing.T) {
			var watchLists atomic.Int32
			srv := watchListServer(t, pods, &watchLists)
			defer srv.Close()
			rc, err := NewClient(&rest.Config{Host: srv.URL}, tc.f)
			require.NoError(t, err)
			c := Pods{RC: rc, Namespace: "ns"}
			inf := cache.NewSharedIndexInformer(&cache.ListWatch{ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.List(ctx, o)
			}, WatchFuncWithContext: c.Watch}, &corev1.Pod{}, 0, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			go inf.RunWithContext(ctx)
			require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced), "the informer never synced")
			assert.Equal(t, int32(1), watchLists.Load(), "the informer listed by watching")
			assert.Len(t, inf.GetStore().List(), 2)
		})
	}
}
