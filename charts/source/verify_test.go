package source_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/provenance"
	"helm.sh/helm/v4/pkg/repo/v1"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/charts/source"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/testprov"
)

// exitCodeOf is the exit code err carries (exitcode.Internal when none).
func exitCodeOf(err error) int {
	var c interface{ ExitCode() int }
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return exitcode.Internal
}

func TestDefaultKeyring(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  string
	}{
		{"neither: the legacy path", nil, "pubring.gpg"},
		{"pubring.gpg", []string{"pubring.gpg"}, "pubring.gpg"},
		{"only a keybox", []string{"pubring.kbx"}, "pubring.kbx"},
		{"both: the legacy one", []string{"pubring.kbx", "pubring.gpg"}, "pubring.gpg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("GNUPGHOME", home)
			for _, f := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(home, f), nil, 0o600))
			}
			assert.Equal(t, filepath.Join(home, tt.want), source.DefaultKeyring())
		})
	}
	t.Run("without GNUPGHOME: ~/.gnupg", func(t *testing.T) {
		home := t.TempDir()
		t.Setenv("HOME", home)
		require.NoError(t, os.Unsetenv("GNUPGHOME")) // t.Setenv restores it
		assert.Equal(t, filepath.Join(home, ".gnupg", "pubring.gpg"), source.DefaultKeyring())
	})
}

// TestLocateVerify: Locate with Verify reports the signer and the signed
// digest of a verified chart (a local .tgz, a repository's), and refuses
// one that does not verify with an *InputError (exit 2) naming the chart;
// a repository failing to serve the .prov (500) is a *RepoError (exit 6);
// a chart from the content cache has its .prov fetched and checked again.
func TestLocateVerify(t *testing.T) {
	s := settings(t)
	keys := t.TempDir()
	signer := testprov.NewKey(t, keys, "signer", "signer@example.com")
	other := testprov.NewKey(t, keys, "other", "other@example.com")
	ch, err := loader.LoadDir("../testdata/charts/handwritten")
	require.NoError(t, err)

	dir := t.TempDir()
	tgz, err := chartutil.Save(ch, dir)
	require.NoError(t, err)
	signer.Sign(t, tgz)
	d, err := provenance.DigestFile(tgz)
	require.NoError(t, err)
	digest := "sha256:" + d

	var provStatus atomic.Int32 // 0: serve the file
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".prov") && provStatus.Load() != 0 {
			http.Error(w, "no", int(provStatus.Load()))
			return
		}
		http.FileServer(http.Dir(dir)).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	idx, err := repo.IndexDirectory(dir, srv.URL)
	require.NoError(t, err)
	require.NoError(t, idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644))

	tests := []struct {
		name       string
		ref        string
		opts       source.Options
		provStatus int
		wantCode   int
		wantErr    string
	}{
		{"local .tgz", tgz, source.Options{Verify: true, Keyring: signer.Keyring}, 0, exitcode.OK, ""},
		{"repository .tgz", "handwritten", source.Options{RepoURL: srv.URL, Verify: true, Keyring: signer.Keyring}, 0, exitcode.OK, ""},
		{"repository .tgz from the cache", "handwritten", source.Options{RepoURL: srv.URL, Verify: true, Keyring: signer.Keyring}, 0, exitcode.OK, ""},
		{"cached, .prov now missing", "handwritten", source.Options{RepoURL: srv.URL, Verify: true, Keyring: signer.Keyring}, http.StatusNotFound, exitcode.Invalid, "no provenance file " + srv.URL + "/handwritten-1.2.3.tgz.prov"},
		{"repository fails to serve the .prov", "handwritten", source.Options{RepoURL: srv.URL, Verify: true, Keyring: signer.Keyring}, http.StatusInternalServerError, exitcode.Cluster, "fetch provenance"},
		{"local .tgz, other key", tgz, source.Options{Verify: true, Keyring: other.Keyring}, 0, exitcode.Invalid, "signature made by unknown entity"},
		{"repository .tgz, other key", "handwritten", source.Options{RepoURL: srv.URL, Verify: true, Keyring: other.Keyring}, 0, exitcode.Invalid, "signature made by unknown entity"},
		{"directory", "../testdata/charts/handwritten", source.Options{Verify: true, Keyring: signer.Keyring}, 0, exitcode.Invalid, "unpacked charts cannot be verified"},
		{"built-in", charts.DefaultChart, source.Options{Verify: true, Keyring: signer.Keyring}, 0, exitcode.Invalid, "a built-in chart cannot be verified"},
		{"not a .tgz", filepath.Join(dir, "index.yaml"), source.Options{Verify: true, Keyring: signer.Keyring}, 0, exitcode.Invalid, "chart must be a tgz file"},
		{"repository flags with a local chart", tgz, source.Options{Verify: true, Version: "1.2.3"}, 0, exitcode.Invalid, "apply to a chart of a repository"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			provStatus.Store(int32(tt.provStatus))
			c, err := source.Locate(context.Background(), s, tt.ref, tt.opts)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, "signer <signer@example.com>", c.Signer)
				assert.Equal(t, digest, c.SignedDigest)
				return
			}
			require.Error(t, err)
			assert.Nil(t, c)
			assert.Equal(t, tt.wantCode, exitCodeOf(err), err.Error())
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Contains(t, err.Error(), tt.ref)
		})
	}

	t.Run("without Verify: no signer", func(t *testing.T) {
		c, err := source.Locate(context.Background(), s, tgz, source.Options{})
		require.NoError(t, err)
		assert.Empty(t, c.Signer)
		assert.Empty(t, c.SignedDigest)
	})
}
