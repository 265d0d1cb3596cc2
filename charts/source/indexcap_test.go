package source_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/helmpath"
	"helm.sh/helm/v4/pkg/repo/v1"

	"github.com/vllmctl/vllmctl/charts/source"
	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// endlessIndex serves an index.yaml that never ends (a valid header, then
// comment lines), as a repository serving too much would.
func endlessIndex(t *testing.T, chunked bool, sent *atomic.Int64) *httptest.Server {
	t.Helper()
	line := "# " + strings.Repeat("x", 1021) + "\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/index.yaml") {
			http.NotFound(w, r)
			return
		}
		if !chunked {
			w.Header().Set("Content-Length", fmt.Sprint(2*source.MaxIndexBytes))
		}
		_, _ = io.WriteString(w, "apiVersion: v1\nentries: {}\n")
		for i := 0; i < (source.MaxIndexBytes>>10)+4096; i++ {
			n, err := io.WriteString(w, line)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestIndexSizeCap: an index beyond source.MaxIndexBytes is refused
// (exit 6, naming the repository and the cap) after reading at most about
// that much, whether the server says its length or streams it; a cached
// index beyond it is refused before it is read.
func TestIndexSizeCap(t *testing.T) {
	s := settings(t)
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			var sent atomic.Int64
			srv := endlessIndex(t, chunked, &sent)
			_, err := source.Locate(context.Background(), s, "x", source.Options{RepoURL: srv.URL})
			require.Error(t, err)
			assert.Equal(t, exitcode.Cluster, exitcode.Of(err), "%v", err)
			assert.Contains(t, err.Error(), srv.URL)
			assert.Contains(t, err.Error(), "larger than 64 MiB")
			srv.Close() // waits for the handler: its writes fail once the client is gone
			assert.Less(t, sent.Load(), int64(source.MaxIndexBytes+16<<20), "the index is not read far past the cap")
		})
	}

	t.Run("a cached index", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		t.Cleanup(srv.Close)
		f, err := repo.LoadFile(s.RepositoryConfig)
		if err != nil {
			f = repo.NewFile()
		}
		f.Update(&repo.Entry{Name: "big", URL: srv.URL})
		require.NoError(t, f.WriteFile(s.RepositoryConfig, 0o600))
		path := filepath.Join(s.RepositoryCache, helmpath.CacheIndexFile("big"))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		fh, err := os.Create(path)
		require.NoError(t, err)
		require.NoError(t, fh.Truncate(source.MaxIndexBytes+1))
		require.NoError(t, fh.Close())
		_, err = source.Locate(context.Background(), s, "big/x", source.Options{})
		require.Error(t, err)
		assert.Equal(t, exitcode.Cluster, exitcode.Of(err), "%v", err)
		assert.Contains(t, err.Error(), "larger than 64 MiB")
	})
}

// TestChartArchiveSizeCap: a chart archive a repository serves beyond
// source.MaxChartArchiveBytes (with or without its length declared) is
// refused (exit 6, naming the repository and the cap) after reading at
// most about that much, instead of read whole into memory.
func TestChartArchiveSizeCap(t *testing.T) {
	s := settings(t)
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			var sent atomic.Int64
			chunk := make([]byte, 1<<20)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case strings.HasSuffix(r.URL.Path, "/index.yaml"):
					_, _ = io.WriteString(w, "apiVersion: v1\nentries:\n  web:\n  - {apiVersion: v2, name: web, version: 1.0.0, urls: [web-1.0.0.tgz]}\n")
				case strings.HasSuffix(r.URL.Path, "/web-1.0.0.tgz"):
					if !chunked {
						w.Header().Set("Content-Length", fmt.Sprint(2*source.MaxChartArchiveBytes))
					}
					for i := 0; i < 2*source.MaxChartArchiveBytes/len(chunk); i++ {
						n, err := w.Write(chunk)
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
			_, _, err := source.Load(context.Background(), s, "web", source.Options{RepoURL: srv.URL})
			require.Error(t, err)
			assert.Equal(t, exitcode.Cluster, exitcode.Of(err), "%v", err)
			assert.Contains(t, err.Error(), fmt.Sprintf("the chart archive is larger than %d MiB", source.MaxChartArchiveBytes>>20))
			assert.Contains(t, err.Error(), srv.URL)
			srv.Close() // waits for the handler: its writes fail once the client is gone
			assert.Less(t, sent.Load(), int64(source.MaxChartArchiveBytes+16<<20), "read no further than about the cap")
		})
	}
}
