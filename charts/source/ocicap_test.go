package source_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/charts/source"
	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// hugeLayerRegistry serves, as an OCI registry, the chart charts/web:1.0.0
// whose manifest declares a chart layer of size bytes; the layer itself is
// zeros, as many as declared (never its digest). sent counts the layer's
// bytes written.
func hugeLayerRegistry(t *testing.T, size int64, sent *atomic.Int64) *httptest.Server {
	t.Helper()
	config := []byte(`{"name":"web","version":"1.0.0","apiVersion":"v2"}`)
	digest := func(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }
	layerDigest := digest([]byte("a layer that is never served"))
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.cncf.helm.config.v1+json", "digest": digest(config), "size": len(config)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip", "digest": layerDigest, "size": size}},
	})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/v2/" || p == "/v2":
			w.WriteHeader(http.StatusOK)
		case strings.HasSuffix(p, "/manifests/1.0.0") || strings.HasSuffix(p, "/manifests/"+digest(manifest)):
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", digest(manifest))
			w.Header().Set("Content-Length", fmt.Sprint(len(manifest)))
			if r.Method != http.MethodHead {
				_, _ = w.Write(manifest)
			}
		case strings.HasSuffix(p, "/blobs/"+digest(config)):
			w.Header().Set("Content-Length", fmt.Sprint(len(config)))
			_, _ = w.Write(config)
		case strings.HasSuffix(p, "/blobs/"+layerDigest):
			w.Header().Set("Content-Length", fmt.Sprint(size))
			chunk := make([]byte, 1<<20)
			for left := size; left > 0; left -= int64(len(chunk)) {
				n, err := w.Write(chunk[:min(left, int64(len(chunk)))])
				sent.Add(int64(n))
				if err != nil {
					return
				}
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestOCIPullSizeCap: a chart whose manifest declares a chart layer
// larger than source.MaxChartArchiveBytes is refused before the layer is
// fetched (exit 6, naming the registry and the cap), instead of pulled
// whole into memory.
func TestOCIPullSizeCap(t *testing.T) {
	var sent atomic.Int64
	srv := hugeLayerRegistry(t, 2*source.MaxChartArchiveBytes, &sent)
	ref := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/charts/web:1.0.0"
	_, _, err := source.Load(context.Background(), settings(t), ref, source.Options{PlainHTTP: true})
	require.Error(t, err)
	assert.Equal(t, exitcode.Cluster, exitcode.Of(err), "%v", err)
	assert.Contains(t, err.Error(), fmt.Sprintf("larger than the cap of %d MiB", source.MaxChartArchiveBytes>>20))
	assert.Less(t, sent.Load(), int64(source.MaxChartArchiveBytes), "the layer was not pulled")
}
