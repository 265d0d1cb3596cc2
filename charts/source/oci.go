package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"
	godigest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/registry"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/errdef"
	orasregistry "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/vllmctl/vllmctl/charts"
)

// ociPrefix starts a chart reference of an OCI registry.
const ociPrefix = registry.OCIScheme + "://"

// IsOCI reports whether ref names a chart of an OCI registry (oci://…).
func IsOCI(ref string) bool { return strings.HasPrefix(ref, ociPrefix) }

// ociRef is a parsed oci://HOST/PATH/NAME[:TAG][@DIGEST].
type ociRef struct {
	// repo is HOST/PATH/NAME.
	repo string
	// tag and digest are "" when not given.
	tag, digest string
}

// parseOCIRef splits ref into repository, tag and digest and checks each
// as an OCI reference; a bad one is an *InputError naming ref.
func parseOCIRef(ref string) (ociRef, error) {
	bad := func(msg string, err error) error {
		return &charts.InputError{Source: "chart", File: ref, Err: err, Msg: msg}
	}
	raw := strings.TrimPrefix(ref, ociPrefix)
	var r ociRef
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		raw, r.digest = raw[:i], raw[i+1:]
		hexPart, ok := strings.CutPrefix(r.digest, "sha256:")
		if b, err := hex.DecodeString(hexPart); !ok || err != nil || len(b) != sha256.Size || strings.ToLower(hexPart) != hexPart {
			return r, bad(fmt.Sprintf("digest %q is not sha256:<64 lower-case hex digits>", r.digest), nil)
		}
	}
	if i := strings.LastIndex(raw, ":"); i >= 0 && !strings.Contains(raw[i+1:], "/") {
		raw, r.tag = raw[:i], raw[i+1:]
		if r.tag == "" {
			return r, bad("empty tag after ':'", nil)
		}
	}
	r.repo = raw
	host, path, ok := strings.Cut(raw, "/")
	if !ok || host == "" || path == "" {
		return r, bad("an OCI reference is oci://HOST/PATH/NAME[:TAG][@sha256:DIGEST]", nil)
	}
	// Check the whole reference as Helm's registry client parses it.
	check := r.repo
	if r.tag != "" {
		check += ":" + strings.ReplaceAll(r.tag, "+", "_")
	}
	if r.digest != "" {
		check += "@" + r.digest
	}
	if _, err := orasregistry.ParseReference(check); err != nil {
		return r, bad(fmt.Sprintf("not an OCI reference: %v", err), err)
	}
	return r, nil
}

// RegistryOptions say how to reach an OCI registry; the fields mirror
// Helm's flags of the same names.
type RegistryOptions struct {
	// Username and Password log in for this client only (not stored),
	// else the credentials of Helm's registry config (falling back to
	// docker's config, as Helm's client does) are used.
	Username, Password string
	// PlainHTTP talks HTTP to the registry, not HTTPS.
	PlainHTTP bool
	// CAFile, CertFile and KeyFile configure TLS.
	CAFile, CertFile, KeyFile string
	// InsecureSkipTLSVerify skips the verification of the registry's
	// certificate.
	InsecureSkipTLSVerify bool
}

// registryOptions are the registry part of o.
func (o Options) registryOptions() RegistryOptions {
	return RegistryOptions{
		Username: o.Username, Password: o.Password, PlainHTTP: o.PlainHTTP,
		CAFile: o.CAFile, CertFile: o.CertFile, KeyFile: o.KeyFile,
		InsecureSkipTLSVerify: o.InsecureSkipTLSVerify,
	}
}

// newRegistryClient returns Helm's registry client with Helm's registry
// config (settings.RegistryConfig) as its credentials file, as helm builds
// it for pull and registry login.
func newRegistryClient(settings *cli.EnvSettings, o RegistryOptions, out io.Writer) (*registry.Client, error) {
	opts := []registry.ClientOption{
		registry.ClientOptDebug(settings.Debug),
		registry.ClientOptEnableCache(true),
		registry.ClientOptWriter(out),
		registry.ClientOptCredentialsFile(settings.RegistryConfig),
		registry.ClientOptBasicAuth(o.Username, o.Password),
	}
	if o.PlainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	if o.CAFile != "" || o.CertFile != "" || o.KeyFile != "" || o.InsecureSkipTLSVerify {
		conf, err := tlsConfig(o)
		if err != nil {
			return nil, err
		}
		opts = append(opts, registry.ClientOptHTTPClient(&http.Client{
			Transport: &http.Transport{TLSClientConfig: conf, Proxy: http.ProxyFromEnvironment},
		}))
	}
	return registry.NewClient(opts...)
}

// tlsConfig is the client TLS configuration of o; a file that cannot be
// read or parsed is an *InputError naming it.
func tlsConfig(o RegistryOptions) (*tls.Config, error) {
	conf := &tls.Config{InsecureSkipVerify: o.InsecureSkipTLSVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // --repo-insecure-skip-tls-verify asks for it
	if o.CertFile != "" || o.KeyFile != "" {
		if o.CertFile == "" || o.KeyFile == "" {
			return nil, &charts.InputError{Source: "--cert-file", File: o.CertFile, Msg: "--cert-file and --key-file go together"}
		}
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, &charts.InputError{Source: "--cert-file", File: o.CertFile, Err: err, Msg: err.Error()}
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, &charts.InputError{Source: "--ca-file", File: o.CAFile, Err: err, Msg: err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &charts.InputError{Source: "--ca-file", File: o.CAFile, Msg: "no PEM certificate in it"}
		}
		conf.RootCAs = pool
	}
	return conf, nil
}

// locateOCI pulls the chart ref names from its registry: the tag of the
// reference, else the highest tag matching opts.Version (a SemVer
// constraint, "" for the latest stable), or the manifest of the
// reference's digest (checked against the tag when both are given). The
// .tgz is kept in Helm's content cache, keyed by its sha256 digest, and
// read from there instead of being fetched again.
func locateOCI(ctx context.Context, settings *cli.EnvSettings, ref string, opts Options) (*Chart, error) {
	r, err := parseOCIRef(ref)
	if err != nil {
		return nil, err
	}
	client, err := newRegistryClient(settings, opts.registryOptions(), io.Discard)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", ref, err)
	}
	if r.tag != "" && opts.Version != "" && opts.Version != r.tag {
		return nil, &charts.InputError{Source: "chart", File: ref,
			Msg: fmt.Sprintf("the reference's tag %s is not --version %s", r.tag, opts.Version)}
	}
	tag := r.tag
	if tag == "" && (r.digest == "" || opts.Version != "") {
		if _, err := semver.NewVersion(opts.Version); err == nil {
			// An exact version is the tag, as with Helm.
			tag = opts.Version
		} else if r.digest == "" {
			tags, err := call(ctx, func() ([]string, error) { return client.Tags(r.repo) })
			if err != nil {
				return nil, registryError(ctx, ref, r.repo, "list tags", err)
			}
			tag, err = registry.GetTagMatchingVersionOrConstraint(tags, opts.Version)
			if err != nil {
				want := opts.Version
				if want == "" {
					want = "latest stable"
				}
				return nil, &charts.InputError{Source: "chart", File: ref, Err: err,
					Msg: fmt.Sprintf("no tag of %s%s matches %s (versions: %s)", ociPrefix, r.repo, want, strings.Join(tags, ", "))}
			}
		}
	}
	pullRef := r.repo + ":" + tag
	shown := ociPrefix + r.repo + ":" + tag
	if r.digest != "" {
		if tag != "" {
			desc, err := call(ctx, func() (string, error) {
				d, err := client.Resolve(r.repo + ":" + strings.ReplaceAll(tag, "+", "_"))
				return d.Digest.String(), err
			})
			if err != nil {
				return nil, registryError(ctx, ref, r.repo+":"+tag, "resolve tag", err)
			}
			if desc != r.digest {
				return nil, &charts.InputError{Source: "chart", File: ref,
					Msg: fmt.Sprintf("digest mismatch: tag %s is %s, not %s", tag, desc, r.digest)}
			}
		}
		pullRef, shown = r.repo+"@"+r.digest, ociPrefix+r.repo+"@"+r.digest
		if tag != "" {
			shown = ociPrefix + r.repo + ":" + tag + "@" + r.digest
		}
	}
	cache := &downloader.DiskCache{Root: settings.ContentCache}
	pulled, err := pullChart(ctx, client, cache, ref, pullRef, opts.Verify)
	if err != nil {
		return nil, registryError(ctx, ref, strings.TrimPrefix(shown, ociPrefix), "pull", err)
	}
	if r.digest != "" && pulled.manifest != r.digest {
		return nil, &charts.InputError{Source: "chart", File: ref,
			Msg: fmt.Sprintf("digest mismatch: the registry served manifest %s", pulled.manifest)}
	}
	if tag == "" && opts.Version != "" {
		// Pinned by digest with a --version constraint: the chart must
		// satisfy it.
		c, _ := semver.NewConstraint(opts.Version) // checked by Locate
		v, err := semver.NewVersion(pulled.meta.Version)
		if err != nil || c == nil || !c.Check(v) {
			return nil, &charts.InputError{Source: "chart", File: ref,
				Msg: fmt.Sprintf("%s is version %s, which does not match --version %s", shown, pulled.meta.Version, opts.Version)}
		}
	}
	c := &Chart{Ref: ref, RepoURL: ociPrefix + r.repo, Path: pulled.path, URL: shown,
		Name: pulled.meta.Name, Version: pulled.meta.Version,
		Digest: pulled.manifest, ChartDigest: pulled.chart}
	if opts.Verify {
		if err := verifyOCI(c, pulled, opts); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// verifyOCI verifies the pulled chart c with its provenance layer (media
// type registry.ProvLayerMediaType, what helm push uploads from the
// .tgz.prov beside the chart), as Helm does with VerifyAlways. The file
// the provenance signs is NAME-VERSION.tgz, the name helm package gives
// the archive it signs. No provenance layer is an *InputError.
func verifyOCI(c *Chart, pulled *pulledChart, o Options) error {
	if pulled.prov == nil {
		return verifyError(c.Ref, fmt.Sprintf("%s has no provenance: the manifest has no layer of media type %s", c.URL, registry.ProvLayerMediaType), nil)
	}
	archive, err := os.ReadFile(pulled.path)
	if err != nil {
		return fmt.Errorf("chart %s: read %s: %w", c.Ref, pulled.path, err)
	}
	return verify(c, archive, pulled.prov, pulled.meta.Name+"-"+pulled.meta.Version+".tgz", o)
}

// maxPullBytes is the cap of a pulled blob of mediaType; 0: oras's own.
func maxPullBytes(mediaType string) int64 {
	switch mediaType {
	case registry.ChartLayerMediaType, registry.LegacyChartLayerMediaType:
		return MaxChartArchiveBytes
	case registry.ConfigMediaType, registry.ProvLayerMediaType:
		return maxMetadataBytes
	}
	return 0
}

// pulledChart is what pullChart pulled.
type pulledChart struct {
	// manifest and chart are the digests of the manifest and of the .tgz
	// layer.
	manifest, chart string
	// path is the .tgz in Helm's content cache.
	path string
	// meta is the chart's metadata (the manifest's config).
	meta chart.Metadata
	// prov is the provenance layer's content, when pulled with withProv
	// and the manifest has one.
	prov []byte
}

// pullChart pulls the manifest of pullRef (HOST/PATH/NAME:TAG or @DIGEST;
// ref is the reference as given, for messages), its config (the chart's metadata)
// and its .tgz layer with Helm's registry client, unless the layer is in
// cache already (keyed by its sha256 digest, checked): then only the
// manifest and config are fetched. A pulled layer is put in cache. With
// withProv, the provenance layer (registry.ProvLayerMediaType) is pulled
// too, as the registry client's Pull does with PullOptWithProv(true).
func pullChart(ctx context.Context, client *registry.Client, cache *downloader.DiskCache, ref, pullRef string, withProv bool) (*pulledChart, error) {
	var (
		mu     sync.Mutex
		cached *pulledChart // the layer found in cache
	)
	generic := client.Generic()
	allowed := []string{ocispec.MediaTypeImageIndex, ocispec.MediaTypeImageManifest,
		registry.ConfigMediaType, registry.ChartLayerMediaType, registry.LegacyChartLayerMediaType}
	if withProv {
		allowed = append(allowed, registry.ProvLayerMediaType)
	}
	res, err := call(ctx, func() (*registry.GenericPullResult, error) {
		return generic.PullGeneric(pullRef, registry.GenericPullOptions{
			AllowedMediaTypes: allowed,
			PreCopy: func(_ context.Context, d ocispec.Descriptor) error {
				if limit := maxPullBytes(d.MediaType); limit > 0 && d.Size > limit {
					return fmt.Errorf("%s %s of %d bytes: larger than the cap of %d MiB", d.MediaType, d.Digest, d.Size, limit>>20)
				}
				c, ok := cachedLayer(cache, d)
				if !ok {
					return nil
				}
				mu.Lock()
				cached = c
				mu.Unlock()
				return oras.SkipNode
			},
		})
	})
	if err != nil {
		return nil, err
	}
	out := cached
	if out == nil {
		out = &pulledChart{}
	}
	out.manifest = res.Manifest.Digest.String()
	var config, layer, prov *ocispec.Descriptor
	for i, d := range res.Descriptors {
		switch {
		case d.MediaType == registry.ConfigMediaType:
			config = &res.Descriptors[i]
		case isChartLayer(d):
			layer = &res.Descriptors[i]
		case withProv && d.MediaType == registry.ProvLayerMediaType:
			prov = &res.Descriptors[i]
		}
	}
	if prov != nil {
		if out.prov, err = generic.GetDescriptorData(res.MemoryStore, *prov); err != nil {
			return nil, fmt.Errorf("provenance layer %s: %w", prov.Digest, err)
		}
	}
	if config == nil {
		return nil, &charts.InputError{Source: "chart", File: ref,
			Msg: fmt.Sprintf("not a Helm chart: the manifest has no chart config (%s)", registry.ConfigMediaType)}
	}
	b, err := generic.GetDescriptorData(res.MemoryStore, *config)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &out.meta); err != nil {
		return nil, fmt.Errorf("chart config %s: %w", config.Digest, err)
	}
	if out.path != "" {
		return out, nil
	}
	if layer == nil {
		return nil, &charts.InputError{Source: "chart", File: ref,
			Msg: fmt.Sprintf("not a Helm chart: the manifest has no chart layer (%s)", registry.ChartLayerMediaType)}
	}
	data, err := generic.GetDescriptorData(res.MemoryStore, *layer)
	if err != nil {
		return nil, err
	}
	// oras checked the layer against its digest; the cache key is the
	// .tgz's sha256 as for a chart repository.
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != layer.Digest.String() {
		return nil, fmt.Errorf("chart layer digest %s does not match the manifest's %s", got, layer.Digest)
	}
	out.chart = layer.Digest.String()
	if out.path, err = cache.Put(sum, bytes.NewReader(data), downloader.CacheChart); err != nil {
		return nil, fmt.Errorf("content cache: %w", err)
	}
	return out, nil
}

// cachedLayer returns the pulled chart whose .tgz layer d is in the
// content cache (its sha256 checked), if it is.
func cachedLayer(cache *downloader.DiskCache, d ocispec.Descriptor) (*pulledChart, bool) {
	if !isChartLayer(d) || d.Digest.Algorithm() != godigest.SHA256 {
		return nil, false
	}
	key, err := hex.DecodeString(d.Digest.Encoded())
	if err != nil || len(key) != sha256.Size {
		return nil, false
	}
	p, err := cache.Get([sha256.Size]byte(key), downloader.CacheChart)
	if err != nil {
		return nil, false
	}
	if sum, err := fileDigest(p); err != nil || sum != [sha256.Size]byte(key) {
		return nil, false
	}
	return &pulledChart{chart: d.Digest.String(), path: p}, true
}

// isChartLayer reports whether d is a chart's .tgz layer.
func isChartLayer(d ocispec.Descriptor) bool {
	return d.MediaType == registry.ChartLayerMediaType || d.MediaType == registry.LegacyChartLayerMediaType
}

// registryError classifies an error of the registry about ref: a
// repository, tag or manifest that is not there is an *InputError (exit
// 2); anything else (unreachable, TLS, credentials refused, a server
// error) is a *RepoError (exit 6). The context's own error, and an
// *InputError (an artifact that is no chart), are returned as they are.
func registryError(ctx context.Context, ref, what, op string, err error) error {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	var input *charts.InputError
	if errors.As(err, &input) {
		return err
	}
	var resp *errcode.ErrorResponse
	if errors.Is(err, errdef.ErrNotFound) || (errors.As(err, &resp) && resp.StatusCode == http.StatusNotFound) {
		return &charts.InputError{Source: "chart", File: ref, Err: err,
			Msg: fmt.Sprintf("%s%s: not found in the registry: %v", ociPrefix, what, err)}
	}
	return fmt.Errorf("chart %s: %w", ref, &RepoError{URL: ociPrefix + what, Op: op, Err: err})
}

// RegistryLogin checks the credentials against the registry at host (as
// `helm registry login`) and stores them in Helm's registry config. A
// registry that cannot be reached or refuses them is a *RepoError (exit 6).
func RegistryLogin(ctx context.Context, settings *cli.EnvSettings, host string, o RegistryOptions) error {
	host = strings.TrimPrefix(host, ociPrefix)
	if host == "" || strings.Contains(host, "/") {
		return &charts.InputError{Source: "registry", File: host, Msg: "a registry is HOST or HOST:PORT"}
	}
	client, err := newRegistryClient(settings, RegistryOptions{
		PlainHTTP: o.PlainHTTP, CAFile: o.CAFile, CertFile: o.CertFile, KeyFile: o.KeyFile,
		InsecureSkipTLSVerify: o.InsecureSkipTLSVerify,
	}, io.Discard)
	if err != nil {
		return fmt.Errorf("registry %s: %w", host, err)
	}
	_, err = call(ctx, func() (struct{}, error) {
		return struct{}{}, client.Login(host, registry.LoginOptBasicAuth(o.Username, o.Password), registry.LoginOptPlainText(o.PlainHTTP))
	})
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return &RepoError{URL: ociPrefix + host, Op: "login", Err: err}
	}
	return nil
}

// RegistryLogout removes the credentials of host from Helm's registry
// config (nothing to remove is no error, as with helm).
func RegistryLogout(_ context.Context, settings *cli.EnvSettings, host string) error {
	host = strings.TrimPrefix(host, ociPrefix)
	client, err := newRegistryClient(settings, RegistryOptions{}, io.Discard)
	if err != nil {
		return fmt.Errorf("registry %s: %w", host, err)
	}
	if err := client.Logout(host); err != nil {
		return fmt.Errorf("registry %s: logout: %w", host, err)
	}
	return nil
}
