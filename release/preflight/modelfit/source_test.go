package modelfit

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/testhub"
)

const testToken = "hf_test_secret_token"

func TestHubSource(t *testing.T) {
	hub := testhub.New(configsDir, testToken)
	defer hub.Close()
	hub.Gate("meta-llama/Llama-3.3-70B-Instruct")
	hub.SetIndex("Qwen/Qwen3-8B", 16_381_470_720)
	ctx := context.Background()

	t.Run("public repo with its checkpoint index", func(t *testing.T) {
		l, err := Source{Endpoint: hub.URL}.Load(ctx, "Qwen/Qwen3-8B", "")
		require.NoError(t, err)
		assert.Equal(t, int64(36), l.Config.Layers)
		assert.Equal(t, int64(16_381_470_720), l.IndexBytes)
		assert.Equal(t, hub.URL+"/Qwen/Qwen3-8B/resolve/main/config.json", l.From)
		assert.Empty(t, hub.Authorization("/Qwen/Qwen3-8B/resolve/main/config.json"), "no token set, none sent")
	})
	t.Run("a pinned revision", func(t *testing.T) {
		_, err := Source{Endpoint: hub.URL}.Load(ctx, "Qwen/Qwen3-4B", "v1.0")
		require.NoError(t, err)
		assert.Equal(t, 1, hub.Requests("/Qwen/Qwen3-4B/resolve/v1.0/config.json"))
	})
	t.Run("gated without a token: skipped, the reason named", func(t *testing.T) {
		_, err := Source{Endpoint: hub.URL}.Load(ctx, "meta-llama/Llama-3.3-70B-Instruct", "")
		var skip *SkipError
		require.ErrorAs(t, err, &skip)
		var status *HTTPStatusError
		require.ErrorAs(t, err, &status)
		assert.Equal(t, http.StatusUnauthorized, status.Status)
		assert.Contains(t, err.Error(), "gated or private")
	})
	t.Run("gated with HF_TOKEN: read, the token sent and never printed", func(t *testing.T) {
		l, err := Source{Endpoint: hub.URL, Token: testToken}.Load(ctx, "meta-llama/Llama-3.3-70B-Instruct", "")
		require.NoError(t, err)
		assert.Equal(t, int64(80), l.Config.Layers)
		assert.Equal(t, "Bearer "+testToken, hub.Authorization("/meta-llama/Llama-3.3-70B-Instruct/resolve/main/config.json"))
		assert.NotContains(t, l.From, testToken)
	})
	t.Run("a wrong token is refused and not printed", func(t *testing.T) {
		_, err := Source{Endpoint: hub.URL, Token: "hf_wrong"}.Load(ctx, "meta-llama/Llama-3.3-70B-Instruct", "")
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "hf_wrong")
	})
	t.Run("no such repo", func(t *testing.T) {
		_, err := Source{Endpoint: hub.URL}.Load(ctx, "nobody/nothing", "")
		var status *HTTPStatusError
		require.ErrorAs(t, err, &status)
		assert.Equal(t, http.StatusNotFound, status.Status)
	})
}

func TestHubSourceIsBounded(t *testing.T) {
	t.Run("a hub that does not answer costs the timeout", func(t *testing.T) {
		release := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer slow.Close()
		defer close(release)
		start := time.Now()
		_, err := Source{Endpoint: slow.URL, Timeout: 200 * time.Millisecond}.Load(context.Background(), "Qwen/Qwen3-8B", "")
		var skip *SkipError
		require.ErrorAs(t, err, &skip)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, time.Since(start), 3*time.Second)
	})
	t.Run("nothing listening: skipped at once", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		start := time.Now()
		_, err = Source{Endpoint: "http://" + addr}.Load(context.Background(), "Qwen/Qwen3-8B", "")
		var skip *SkipError
		require.ErrorAs(t, err, &skip)
		assert.Less(t, time.Since(start), 2*time.Second)
	})
	t.Run("a config larger than the cap is not read", func(t *testing.T) {
		big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write(make([]byte, maxConfigBytes+10))
		}))
		defer big.Close()
		_, err := Source{Endpoint: big.URL}.Load(context.Background(), "Qwen/Qwen3-8B", "")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "larger than")
	})
}

func TestFileAndLocalSources(t *testing.T) {
	ctx := context.Background()
	t.Run("--model-config wins over the model", func(t *testing.T) {
		file := filepath.Join(configsDir, "Qwen--Qwen3-14B.json")
		l, err := Source{File: file, Endpoint: "http://127.0.0.1:1"}.Load(ctx, "Qwen/Qwen3-8B", "")
		require.NoError(t, err)
		assert.Equal(t, int64(40), l.Config.Layers)
		assert.Equal(t, "--model-config "+file, l.From)
	})
	t.Run("--model-config that cannot be read", func(t *testing.T) {
		_, err := Source{File: "/nonexistent/config.json"}.Load(ctx, "x/y", "")
		var skip *SkipError
		require.ErrorAs(t, err, &skip)
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("a local directory with its index", func(t *testing.T) {
		dir := t.TempDir()
		data, err := os.ReadFile(filepath.Join(configsDir, "meta-llama--Llama-3.1-8B.json"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"metadata":{"total_size":16060522496}}`), 0o600))
		l, err := Source{}.Load(ctx, dir, "")
		require.NoError(t, err)
		assert.Equal(t, int64(16060522496), l.IndexBytes)
		assert.Equal(t, "local directory "+dir, l.From)
	})
	t.Run("a path inside the container (a PVC) is skipped", func(t *testing.T) {
		_, err := Source{}.Load(ctx, "/models/llama-70b", "")
		var skip *SkipError
		require.ErrorAs(t, err, &skip)
		assert.Contains(t, err.Error(), "--model-config")
	})
	t.Run("no model", func(t *testing.T) {
		_, err := Source{}.Load(ctx, "", "")
		var skip *SkipError
		assert.True(t, errors.As(err, &skip))
	})
}

// TestHubSourceRedactsEndpointPassword: an HF_ENDPOINT with user
// information has its password in no error and no report line, and one
// model's two requests share one deadline.
func TestHubSourceRedactsEndpointPassword(t *testing.T) {
	hub := testhub.New(configsDir, testToken)
	defer hub.Close()
	ctx := context.Background()
	withUser := strings.Replace(hub.URL, "http://", "http://mirror:s3cret@", 1)
	l, err := Source{Endpoint: withUser}.Load(ctx, "Qwen/Qwen3-8B", "")
	require.NoError(t, err)
	assert.NotContains(t, l.From, "s3cret")
	_, err = Source{Endpoint: withUser}.Load(ctx, "nobody/nothing", "")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l2.Addr().String()
	require.NoError(t, l2.Close())
	_, err = Source{Endpoint: "http://mirror:s3cret@" + addr}.Load(ctx, "Qwen/Qwen3-8B", "")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	_, err = Source{Endpoint: "http://mirror:s3cret@bad host"}.Load(ctx, "Qwen/Qwen3-8B", "")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")

	// config.json answers at once, the index hangs: the whole load costs
	// one timeout.
	release := make(chan struct{})
	defer close(release)
	data, err := os.ReadFile(filepath.Join(configsDir, "Qwen--Qwen3-8B.json"))
	require.NoError(t, err)
	half := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/config.json") {
			_, _ = w.Write(data)
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer half.Close()
	start := time.Now()
	l, err = Source{Endpoint: half.URL, Timeout: time.Second}.Load(ctx, "Qwen/Qwen3-8B", "")
	require.NoError(t, err)
	assert.Zero(t, l.IndexBytes)
	assert.Less(t, time.Since(start), 1800*time.Millisecond, "one deadline, not one per request")
}
