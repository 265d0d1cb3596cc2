package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/helmpath"
	"helm.sh/helm/v4/pkg/repo/v1"

	"github.com/vllmctl/vllmctl/charts"
)

// fetchTimeout bounds one HTTP request to a chart repository.
const fetchTimeout = 2 * time.Minute

// Options say which chart of a repository to take and how to reach the
// repository. The transport fields mirror Helm's flags of the same names.
type Options struct {
	// RepoURL is the chart repository URL (--repo): the reference is then a
	// chart NAME in it, whether or not the repository was added.
	RepoURL string
	// Version is a SemVer constraint (--version), e.g. "~0.1", ">=1.2 <2"
	// or "1.2.3"; "" is the latest stable version.
	Version string
	// CAFile, CertFile and KeyFile configure TLS (--ca-file, --cert-file,
	// --key-file).
	CAFile, CertFile, KeyFile string
	// InsecureSkipTLSVerify skips the verification of the repository's
	// certificate.
	InsecureSkipTLSVerify bool
	// Username and Password are basic-auth credentials for the repository.
	// For REPO/NAME they replace the repository's stored ones when set.
	Username, Password string
	// PassCredentialsAll sends the credentials to every host (a chart URL
	// of another host than the repository's), as Helm's
	// --pass-credentials; otherwise only to the repository's host.
	PassCredentialsAll bool
	// PlainHTTP talks HTTP, not HTTPS, to an OCI registry (--plain-http).
	PlainHTTP bool
	// Verify checks the chart's provenance as Helm's --verify does and
	// refuses a chart that does not verify: a packaged chart (.tgz) with
	// its .tgz.prov beside it, a chart of a repository with the .prov
	// served beside its .tgz, a chart of an OCI registry with its
	// provenance layer; signed by a key of Keyring. A chart directory or
	// a built-in chart cannot be verified.
	Verify bool
	// Keyring is the public keyring Verify checks signatures with (GnuPG's
	// pubring.gpg or pubring.kbx, or ASCII-armored keys); "" is Helm's
	// default, DefaultKeyring.
	Keyring string
}

// fromRepository reports whether the options only make sense for a chart
// of a repository.
func (o Options) fromRepository() bool {
	return o.RepoURL != "" || o.Version != "" || o.Username != "" || o.Password != "" ||
		o.CAFile != "" || o.CertFile != "" || o.KeyFile != "" || o.InsecureSkipTLSVerify || o.PassCredentialsAll || o.PlainHTTP
}

// Chart is where a chart reference led.
type Chart struct {
	// Ref is the reference as given.
	Ref string `json:"ref"`
	// Builtin is true for a built-in chart (Path is then "").
	Builtin bool `json:"builtin,omitempty"`
	// Path is the chart's directory or .tgz: the local one, or the
	// downloaded .tgz in Helm's content cache.
	Path string `json:"path,omitempty"`
	// RepoURL is the repository a downloaded chart came from ("" when
	// local or built-in); Repo is its name in repositories.yaml, if added.
	RepoURL string `json:"repoURL,omitempty"`
	Repo    string `json:"repo,omitempty"`
	// Name and Version are the chart version chosen from the index.
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	// URL is the downloaded .tgz's URL; for an OCI registry, the
	// reference pulled: oci://HOST/PATH/NAME:TAG (or @sha256:…).
	URL string `json:"url,omitempty"`
	// Digest is "sha256:<hex>" of the downloaded .tgz; for an OCI
	// registry, the manifest's digest (what oci://…@sha256:… pins).
	Digest string `json:"digest,omitempty"`
	// ChartDigest is the digest of an OCI chart's .tgz layer (the key of
	// Helm's content cache); "" for a chart repository (see Digest).
	ChartDigest string `json:"chartDigest,omitempty"`
	// Signer and SignedDigest are set when the chart's provenance was
	// verified (Options.Verify): the identities of the key that signed it
	// ("Name (comment) <email>", comma-separated), and the "sha256:<hex>"
	// of the .tgz the provenance signs.
	Signer       string `json:"signer,omitempty"`
	SignedDigest string `json:"signedDigest,omitempty"`
}

// Remote reports whether the chart came from a repository.
func (c *Chart) Remote() bool { return c.RepoURL != "" }

// Settings returns Helm's environment settings (paths and HELM_* variables)
// as the helm CLI reads them.
func Settings() *cli.EnvSettings { return cli.New() }

// Load locates ref (see Locate) and loads the chart.
func Load(ctx context.Context, settings *cli.EnvSettings, ref string, opts Options) (*chart.Chart, *Chart, error) {
	ch, loc, err := load(ctx, settings, ref, opts)
	return ch, loc, maskCredentials(err)
}

func load(ctx context.Context, settings *cli.EnvSettings, ref string, opts Options) (*chart.Chart, *Chart, error) {
	loc, err := Locate(ctx, settings, ref, opts)
	if err != nil {
		return nil, nil, err
	}
	if !loc.Remote() {
		ch, err := charts.Load(ref)
		return ch, loc, err
	}
	ch, err := loader.LoadFile(loc.Path)
	if err != nil {
		return nil, loc, &charts.InputError{
			Source: "chart", File: ref, Err: err,
			Msg: fmt.Sprintf("%q version %q from %s is not a packaged chart: %v", loc.Name, loc.Version, loc.URL, err),
		}
	}
	return ch, loc, nil
}

// Locate finds the chart ref names, in this order: a built-in chart (a
// plain name), an existing local path (a directory or a .tgz), a chart of
// an added repository (REPO/NAME). With opts.RepoURL, ref is always a
// chart NAME in that repository, as with Helm's --repo. A reference
// oci://HOST/PATH/NAME[:TAG][@sha256:…] is a chart of an OCI registry,
// pulled with Helm's registry client (see locateOCI). A chart of a
// repository is downloaded into Helm's content cache unless it is there.
// A plain name that is none of these yields charts.Load's *InputError.
// No error shows the password of a URL, whatever form ref or the
// repository URL took (maskCredentials); an oci:// reference holding
// credentials is refused (Helm's registry client would take them for a
// digest): they go to --username and --password-stdin, or registry login.
func Locate(ctx context.Context, settings *cli.EnvSettings, ref string, opts Options) (*Chart, error) {
	c, err := locate(ctx, settings, ref, opts)
	return c, maskCredentials(err)
}

func locate(ctx context.Context, settings *cli.EnvSettings, ref string, opts Options) (*Chart, error) {
	if ref == "" {
		ref = charts.DefaultChart
	}
	if opts.Version != "" {
		if _, err := semver.NewConstraint(opts.Version); err != nil {
			return nil, &charts.InputError{Source: "--version", File: opts.Version, Err: err,
				Msg: fmt.Sprintf("not a SemVer constraint (chart %s): %v", ref, err)}
		}
	}
	if opts.RepoURL != "" {
		if IsOCI(opts.RepoURL) || IsOCI(ref) {
			return nil, &charts.InputError{Source: "chart", File: ref,
				Msg: "--repo is a chart repository URL; give an OCI chart as CHART oci://HOST/PATH/NAME"}
		}
		if opts.PlainHTTP {
			return nil, &charts.InputError{Source: "chart", File: ref, Msg: "--plain-http applies to an OCI registry (oci://…), not to --repo"}
		}
		if strings.Contains(ref, "/") {
			return nil, &charts.InputError{Source: "chart", File: ref,
				Msg: "with --repo, CHART is the name of a chart in the repository (no slash)"}
		}
		return locateByURL(ctx, settings, ref, opts)
	}
	if IsOCI(ref) {
		if host, _, _ := strings.Cut(strings.TrimPrefix(ref, ociPrefix), "/"); strings.Contains(host, "@") {
			return nil, &charts.InputError{Source: "chart", File: redactURL(ref),
				Msg: "an oci:// reference takes no credentials (user:password@): give them with --username and --password-stdin, or vllmctl registry login"}
		}
		if opts.PassCredentialsAll {
			return nil, &charts.InputError{Source: "chart", File: ref, Msg: "--pass-credentials applies to a chart repository, not to an OCI registry"}
		}
		return locateOCI(ctx, settings, ref, opts)
	}
	if opts.PlainHTTP {
		return nil, &charts.InputError{Source: "chart", File: ref, Msg: "--plain-http applies to an OCI registry (oci://…)"}
	}
	local := func() (*Chart, error) {
		if opts.fromRepository() {
			return nil, &charts.InputError{Source: "chart", File: ref,
				Msg: "--version and the repository flags apply to a chart of a repository (REPO/NAME or --repo), not to a local or built-in chart"}
		}
		return &Chart{Ref: ref}, nil
	}
	if !strings.ContainsAny(ref, `/\`) && charts.IsBuiltin(ref) {
		c, err := local()
		if err == nil && opts.Verify {
			return nil, verifyError(ref, "a built-in chart cannot be verified (it has no provenance)", nil)
		}
		if c != nil {
			c.Builtin = true
		}
		return c, err
	}
	if _, err := os.Stat(ref); err == nil {
		c, err := local()
		if err == nil && opts.Verify {
			return verifyLocal(ref, ref, opts)
		}
		if c != nil {
			c.Path = ref
		}
		return c, err
	}
	repoName, name, ok := strings.Cut(ref, "/")
	if !ok || filepath.IsAbs(ref) || strings.HasPrefix(ref, ".") || name == "" || strings.Contains(name, "/") {
		// Not a repository reference: today's error (not a directory nor
		// a built-in chart).
		_, err := charts.Load(ref)
		if err == nil {
			err = &charts.InputError{Source: "chart", File: ref, Msg: "not found"}
		}
		return nil, err
	}
	return locateInRepo(ctx, settings, ref, repoName, name, opts)
}

// locateInRepo finds REPO/NAME in the cached index of an added repository
// (fetching the index when it is not cached yet) and downloads it.
func locateInRepo(ctx context.Context, settings *cli.EnvSettings, ref, repoName, name string, opts Options) (*Chart, error) {
	f, err := loadRepoFile(settings.RepositoryConfig)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", ref, err)
	}
	entry := f.Get(repoName)
	if entry == nil {
		return nil, &charts.InputError{Source: "chart", File: ref, Err: fs.ErrNotExist,
			Msg: fmt.Sprintf("not a chart directory nor a built-in chart, and %q is not an added repository (add it with vllmctl repo add %s URL)", repoName, repoName)}
	}
	e := *entry
	if opts.Username != "" || opts.Password != "" {
		e.Username, e.Password = opts.Username, opts.Password
	}
	if opts.CAFile != "" || opts.CertFile != "" || opts.KeyFile != "" {
		e.CAFile, e.CertFile, e.KeyFile = opts.CAFile, opts.CertFile, opts.KeyFile
	}
	e.InsecureSkipTLSVerify = e.InsecureSkipTLSVerify || opts.InsecureSkipTLSVerify
	e.PassCredentialsAll = e.PassCredentialsAll || opts.PassCredentialsAll

	indexPath := filepath.Join(settings.RepositoryCache, helmpath.CacheIndexFile(repoName))
	if _, err := os.Stat(indexPath); errors.Is(err, fs.ErrNotExist) {
		// Not updated since it was added (by hand or elsewhere): fetch it
		// as repo update would.
		if _, err := downloadIndex(ctx, settings, &e, settings.RepositoryCache); err != nil {
			return nil, fmt.Errorf("chart %s: %w", ref, err)
		}
	}
	idx, err := loadIndex(indexPath, e.URL)
	if err != nil {
		return nil, fmt.Errorf("chart %s: cached index of repository %s (run vllmctl repo update %s): %w", ref, repoName, repoName, err)
	}
	c, err := download(ctx, settings, &e, idx, ref, name, opts)
	if c != nil {
		c.Repo = repoName
	}
	return c, err
}

// locateByURL finds NAME in the index of the repository at opts.RepoURL,
// fetched into a temporary directory (it is not an added repository), and
// downloads it.
func locateByURL(ctx context.Context, settings *cli.EnvSettings, name string, opts Options) (*Chart, error) {
	e := &repo.Entry{
		Name: "vllmctl-repo", URL: opts.RepoURL,
		Username: opts.Username, Password: opts.Password,
		CAFile: opts.CAFile, CertFile: opts.CertFile, KeyFile: opts.KeyFile,
		InsecureSkipTLSVerify: opts.InsecureSkipTLSVerify, PassCredentialsAll: opts.PassCredentialsAll,
	}
	tmp, err := os.MkdirTemp("", "vllmctl-index-")
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	indexPath, err := downloadIndex(ctx, settings, e, tmp)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	idx, err := loadIndex(indexPath, e.URL)
	if err != nil {
		return nil, &RepoError{URL: redactURL(e.URL), Op: "read index", Err: err}
	}
	return download(ctx, settings, e, idx, name, name, opts)
}

// download picks the version of name matching opts.Version in idx and
// returns its .tgz from Helm's content cache, downloading it when it is
// not there. With opts.Verify, the provenance file served beside the .tgz
// (its URL + ".prov") is fetched and verified, as Helm's downloader does.
func download(ctx context.Context, settings *cli.EnvSettings, e *repo.Entry, idx *repo.IndexFile, ref, name string, opts Options) (*Chart, error) {
	c, chartURL, err := fetchChart(ctx, settings, e, idx, ref, name, opts.Version)
	if err != nil {
		return nil, err
	}
	if opts.Verify {
		if err := verifyFromRepo(ctx, settings, e, c, chartURL, opts); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// fetchChart is download without the verification; it also returns the
// .tgz's URL (with the repository's userinfo, if any).
func fetchChart(ctx context.Context, settings *cli.EnvSettings, e *repo.Entry, idx *repo.IndexFile, ref, name, version string) (*Chart, string, error) {
	cv, err := idx.Get(name, version)
	if err != nil {
		return nil, "", notInIndex(ref, name, version, e.URL, idx, err)
	}
	if len(cv.URLs) == 0 {
		return nil, "", &charts.InputError{Source: "chart", File: ref,
			Msg: fmt.Sprintf("version %s has no download URL in the index of %s", cv.Version, redactURL(e.URL))}
	}
	chartURL, err := repo.ResolveReferenceURL(e.URL, cv.URLs[0])
	if err != nil {
		return nil, "", &RepoError{URL: redactURL(e.URL), Op: fmt.Sprintf("chart URL %q", cv.URLs[0]), Err: err}
	}
	out := &Chart{Ref: ref, RepoURL: withoutUserinfo(e.URL), Name: cv.Name, Version: cv.Version, URL: withoutUserinfo(chartURL)}

	cache := &downloader.DiskCache{Root: settings.ContentCache}
	if want, err := hex.DecodeString(strings.TrimPrefix(cv.Digest, "sha256:")); err == nil && len(want) == sha256.Size {
		if p, err := cache.Get([sha256.Size]byte(want), downloader.CacheChart); err == nil {
			if sum, err := fileDigest(p); err == nil && sum == [sha256.Size]byte(want) {
				out.Path, out.Digest = p, "sha256:"+hex.EncodeToString(sum[:])
				return out, chartURL, nil
			}
		}
	}

	data, err := get(ctx, settings, e, ref, chartURL, "application/gzip,application/octet-stream", MaxChartArchiveBytes, errChartTooLarge)
	var input *charts.InputError
	if errors.As(err, &input) {
		return nil, "", err
	}
	if err != nil {
		return nil, "", fmt.Errorf("chart %s: %w", ref, &RepoError{URL: out.URL, Op: "fetch chart", Err: err})
	}
	sum := sha256.Sum256(data)
	if cv.Digest != "" && strings.TrimPrefix(cv.Digest, "sha256:") != hex.EncodeToString(sum[:]) {
		return nil, "", fmt.Errorf("chart %s: %w", ref, &RepoError{URL: out.URL, Op: "fetch chart",
			Err: fmt.Errorf("digest sha256:%x does not match the index's %s", sum, cv.Digest)})
	}
	p, err := cache.Put(sum, bytes.NewReader(data), downloader.CacheChart)
	if err != nil {
		return nil, "", fmt.Errorf("chart %s: cache %s: %w", ref, out.URL, err)
	}
	out.Path, out.Digest = p, "sha256:"+hex.EncodeToString(sum[:])
	return out, chartURL, nil
}

// get fetches u (a chart's URL in e, or its provenance) with Helm's
// getter of its scheme and e's transport options, reading at most limit
// bytes (an HTTP(S) answer beyond it fails with tooLarge, read no
// further); a scheme no getter handles is an *InputError naming ref.
func get(ctx context.Context, settings *cli.EnvSettings, e *repo.Entry, ref, u, accept string, limit int64, tooLarge error) ([]byte, error) {
	parsed, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	providers, capped, err := cappedGetters(settings, e, limit, tooLarge)
	if err != nil {
		return nil, err
	}
	g, err := providers.ByScheme(parsed.Scheme)
	if err != nil {
		return nil, &charts.InputError{Source: "chart", File: ref, Err: err, Msg: fmt.Sprintf("%s: %v", withoutUserinfo(u), err)}
	}
	return call(ctx, func() ([]byte, error) {
		opts := []getter.Option{
			getter.WithURL(e.URL),
			getter.WithTimeout(fetchTimeout),
			getter.WithInsecureSkipVerifyTLS(e.InsecureSkipTLSVerify),
			getter.WithTLSClientConfig(e.CertFile, e.KeyFile, e.CAFile),
			getter.WithBasicAuth(e.Username, e.Password),
			getter.WithPassCredentialsAll(e.PassCredentialsAll),
		}
		if accept != "" {
			opts = append(opts, getter.WithAcceptHeader(accept))
		}
		b, err := g.Get(u, opts...)
		if err = capped.err(err); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	})
}

// notInIndex turns the index's answer for a missing chart or version into
// an *InputError naming the reference and what the index holds.
func notInIndex(ref, name, version, repoURL string, idx *repo.IndexFile, err error) error {
	where := redactURL(repoURL)
	if errors.Is(err, repo.ErrNoChartName) {
		return &charts.InputError{Source: "chart", File: ref, Err: err,
			Msg: fmt.Sprintf("no chart %q in repository %s", name, where)}
	}
	var have []string
	for _, cv := range idx.Entries[name] {
		have = append(have, cv.Version)
	}
	want := version
	if want == "" {
		want = "latest stable"
	}
	return &charts.InputError{Source: "chart", File: ref, Err: err,
		Msg: fmt.Sprintf("no version of %s in repository %s matches %s (versions: %s)", name, where, want, strings.Join(have, ", "))}
}

// downloadIndex fetches e's index.yaml into dir (as Helm's cache names it:
// <name>-index.yaml, and <name>-charts.txt) and returns its path.
func downloadIndex(ctx context.Context, settings *cli.EnvSettings, e *repo.Entry, dir string) (string, error) {
	providers, capped, err := indexGetters(settings, e)
	if err != nil {
		return "", err
	}
	r, err := repo.NewChartRepository(e, providers)
	if err != nil {
		return "", &charts.InputError{Source: "repository URL", File: redactURL(e.URL), Msg: err.Error(), Err: err}
	}
	r.CachePath = dir
	p, err := call(ctx, r.DownloadIndexFile)
	if err = capped.err(err); err != nil {
		return "", &RepoError{URL: redactURL(e.URL), Op: "fetch index", Err: err}
	}
	return p, nil
}

// call runs f, returning early with ctx's error when ctx ends first (Helm's
// getters take no context; the request then ends in the background, bounded
// by its timeout).
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// fileDigest is the sha256 of the file at path.
func fileDigest(path string) ([sha256.Size]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}
