package wait

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestStreamConfig: the watcher's clients (the typed client and the pods'
// REST client) reach an API server that speaks HTTP/2 over HTTP/1.1 and
// without asking for gzip, while a client of the config it was made from
// speaks HTTP/2 with gzip; the config given is left as it was.
func TestStreamConfig(t *testing.T) {
	type seen struct{ proto, encoding string }
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.Proto, r.Header.Get("Accept-Encoding")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	base := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	}}
	last := func() seen {
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, got)
		return got[len(got)-1]
	}

	full, err := kubernetes.NewForConfig(base)
	require.NoError(t, err)
	_, err = full.CoreV1().Pods("ns").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, seen{"HTTP/2.0", "gzip"}, last(), "a client of the base config")

	streams := StreamConfig(base)
	typed, err := kubernetes.NewForConfig(streams)
	require.NoError(t, err)
	_, err = typed.AppsV1().Deployments("ns").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, seen{"HTTP/1.1", ""}, last(), "the watcher's typed client")

	pods, err := NewPodWatchClient(streams)
	require.NoError(t, err)
	err = pods.Get().Namespace("ns").Resource("pods").Do(t.Context()).Error()
	require.NoError(t, err)
	assert.Equal(t, seen{"HTTP/1.1", ""}, last(), "the pods' REST client")

	assert.Empty(t, base.TLSClientConfig.NextProtos, "the base config is not changed")
	assert.False(t, base.DisableCompression)
	assert.Nil(t, base.Dial)

	// A dialer the config already has (a caller's own) is kept: the
	// watcher's connections go through it.
	var dials atomic.Int32
	withDial := rest.CopyConfig(base)
	withDial.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	own, err := kubernetes.NewForConfig(StreamConfig(withDial))
	require.NoError(t, err)
	_, err = own.CoreV1().Pods("ns").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, seen{"HTTP/1.1", ""}, last(), "the watcher's client on a config with a dialer")
	assert.Positive(t, dials.Load(), "the config's own dialer is used")
}
