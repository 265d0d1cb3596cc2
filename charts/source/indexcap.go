package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/repo/v1"
)

// MaxIndexBytes bounds a chart repository's index.yaml, as fetched and as
// read from the cache: Helm reads and parses an index whole (a 198 MB one
// took 2.2 GB and over a minute before it failed). The largest public
// indexes are a few tens of MiB.
const MaxIndexBytes = 64 << 20

// errIndexTooLarge is the error of an index beyond MaxIndexBytes.
var errIndexTooLarge = fmt.Errorf("the index is larger than %d MiB, the most vllmctl reads", MaxIndexBytes>>20)

// indexSlack is what a fetch may read beyond MaxIndexBytes: the status
// line and headers, TLS records' overhead.
const indexSlack = 1 << 20

// indexGetters are Helm's getters for e's index, whose HTTP(S) getter
// reads at most MaxIndexBytes (and indexSlack) from the connection: its
// transport (TLS from e, as Helm's own would set it; proxies from the
// environment; no gzip, so the bytes read are the index's) fails the read
// with errIndexTooLarge beyond that. Other schemes (plugins) are Helm's.
func indexGetters(settings *cli.EnvSettings, e *repo.Entry) (getter.Providers, *capState, error) {
	return cappedGetters(settings, e, MaxIndexBytes, errIndexTooLarge)
}

// MaxChartArchiveBytes caps a chart archive fetched from a chart
// repository, as a pulled chart layer (by the size its manifest declares)
// from an OCI registry: Helm 4's cap of a chart once decompressed
// (archive.MaxDecompressedChartSize, 100 MiB), which a gzip archive of
// such a chart cannot exceed by much. Helm's getters read an archive
// whole into memory, however large.
const MaxChartArchiveBytes = 100 << 20

// maxMetadataBytes caps a chart's provenance file and a pulled chart's
// config and provenance layers (a Chart.yaml's fields, a signature);
// manifests are capped by oras (4 MiB).
const maxMetadataBytes = 4 << 20

// The errors of a chart archive and a provenance file beyond their caps.
var (
	errChartTooLarge = fmt.Errorf("the chart archive is larger than %d MiB, the most vllmctl reads", MaxChartArchiveBytes>>20)
	errProvTooLarge  = fmt.Errorf("the provenance file is larger than %d MiB, the most vllmctl reads", maxMetadataBytes>>20)
)

// cappedGetters are Helm's getters for e, whose HTTP(S) getter reads at
// most limit bytes (and indexSlack) from each connection: beyond that the
// read fails with tooLarge (capState.err reports it).
func cappedGetters(settings *cli.EnvSettings, e *repo.Entry, limit int64, tooLarge error) (getter.Providers, *capState, error) {
	tlsConf, err := tlsConfig(RegistryOptions{CAFile: e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile,
		InsecureSkipTLSVerify: e.InsecureSkipTLSVerify})
	if err != nil {
		return nil, nil, err
	}
	state := &capState{tooLarge: tooLarge}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsConf
	tr.DisableCompression = true
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &capConn{Conn: c, left: limit + indexSlack, state: state}, nil
	}
	providers := getter.Providers{{
		Schemes: []string{"http", "https"},
		New: func(opts ...getter.Option) (getter.Getter, error) {
			return getter.NewHTTPGetter(append(opts, getter.WithTransport(tr))...)
		},
	}}
	for _, p := range getter.All(settings) {
		if !p.Provides("http") && !p.Provides("https") {
			providers = append(providers, p)
		}
	}
	return providers, state, nil
}

// capState records that a capped connection was cut short (net/http may
// report it as an unexpected EOF of a body of known length).
type capState struct {
	over     atomic.Bool
	tooLarge error
}

// err is the cap's error when a connection was cut short, else err.
func (s *capState) err(err error) error {
	if err != nil && s.over.Load() {
		return fmt.Errorf("%w (%v)", s.tooLarge, err)
	}
	return err
}

// capConn is a connection that reads at most left bytes, then fails with
// its cap's error.
type capConn struct {
	net.Conn
	left  int64
	state *capState
}

func (c *capConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.state.over.Store(true)
		return 0, c.state.tooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
}

// loadIndex reads the index at path, refusing one beyond MaxIndexBytes
// before reading it (a cached index came from a remote: *RepoError, exit
// 6, naming the repository).
func loadIndex(path, repoURL string) (*repo.IndexFile, error) {
	info, err := os.Stat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err == nil && info.Size() > MaxIndexBytes {
		return nil, &RepoError{URL: redactURL(repoURL), Op: "read index", Err: fmt.Errorf("%s: %w", path, errIndexTooLarge)}
	}
	return repo.LoadIndexFile(path)
}
