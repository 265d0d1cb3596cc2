package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/helmpath"
	"helm.sh/helm/v4/pkg/repo/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/vllmctl/vllmctl/charts"
)

// managerKeyPrefix names the index cache of a repository a dependency
// gives by URL without it being added: Helm's downloader.Manager caches
// it as helm-manager-<sha256 of the URL as written>.
const managerKeyPrefix = "helm-manager-"

// UpdateDependencies vendors the dependencies of the chart directory dir
// into dir/charts and writes its Chart.lock, as `helm dependency update`
// does. A chart whose dependencies are all file:// paths or already in
// charts/ is vendored by charts.UpdateDependencies. A chart with a
// dependency in a remote repository — a chart repository by URL
// (https://…) or by the name it was added under (@NAME or alias:NAME), or
// an OCI registry (oci://…) — is vendored by Helm v4's downloader.Manager
// (its Update), which resolves the versions as Helm does (the index of
// the repository, the tags of the registry), downloads into a temporary
// directory of the chart, moves the archives into charts/ only when all
// are there, and writes the same Chart.lock; file:// dependencies are
// then packed by it as well, after charts.CheckLocalDependencies checked
// them.
//
// Chart repositories are reached as Helm reaches them: with the
// credentials and TLS settings of their entry in Helm's repositories.yaml
// (settings.RepositoryConfig; none for a repository given by URL that is
// not added), their index cached in settings.RepositoryCache. Only the
// indexes the chart needs (and those of added repositories never fetched,
// which Helm's downloader reads) are fetched, before anything is written;
// unlike helm, which fetches every added repository and only warns when
// one cannot be reached, a failure is an error. OCI registries are
// reached with Helm's registry client, built from opts (--username and
// password, --plain-http, --ca-file, --cert-file, --key-file,
// --repo-insecure-skip-tls-verify: helm's flags of `dependency update`,
// which apply to registries only) and Helm's registry config.
//
// Errors: a repository or registry that cannot be reached or refuses the
// request (credentials included) is a *RepoError (exit 6); a chart or a
// version that is not there, a repository name that is not added, a bad
// constraint, is a *charts.InputError (exit 2) naming the dependency.
// charts/ is not changed then. Progress goes to progress (Helm's lines,
// passwords of URLs masked).
func UpdateDependencies(ctx context.Context, settings *cli.EnvSettings, dir string, opts Options, progress io.Writer) error {
	ch, err := loader.LoadDir(dir)
	if err != nil || !hasRemote(ch.Metadata.Dependencies) {
		// charts reports a chart that does not load as it always did.
		return charts.UpdateDependencies(dir, progress)
	}
	reqs := ch.Metadata.Dependencies
	if err := charts.CheckLocalDependencies(dir, reqs); err != nil {
		return err
	}
	epoch, err := charts.SourceDateEpoch()
	if err != nil {
		return err
	}
	repoURLs, err := fetchIndexes(ctx, settings, dir, reqs, progress)
	if err != nil {
		return err
	}
	out := &lineFilter{w: progress}
	defer out.Flush()
	client, err := newRegistryClient(settings, opts.registryOptions(), out)
	if err != nil {
		return fmt.Errorf("chart %s: %w", dir, err)
	}
	m := &downloader.Manager{
		Out:              out,
		ChartPath:        dir,
		SkipUpdate:       true, // fetchIndexes fetched them
		Getters:          getter.All(settings),
		RegistryClient:   client,
		RepositoryConfig: settings.RepositoryConfig,
		RepositoryCache:  settings.RepositoryCache,
		ContentCache:     settings.ContentCache,
		Debug:            settings.Debug,
		SourceDateEpoch:  epoch,
	}
	lockName := "Chart.lock"
	if ch.Metadata.APIVersion == chart.APIVersionV1 {
		lockName = "requirements.lock"
	}
	lockPath := filepath.Join(dir, lockName)
	before, beforeErr := os.ReadFile(lockPath)
	// Not cut short by ctx: the manager changes charts/ and the lock file,
	// which an interrupt would leave half done.
	if err := m.Update(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return dependencyError(dir, reqs, repoURLs, err)
	}
	out.Flush()
	after, err := os.ReadFile(lockPath)
	if err != nil {
		return fmt.Errorf("chart %s: %w", dir, err)
	}
	if beforeErr == nil && bytes.Equal(before, after) {
		fmt.Fprintln(progress, "the lock file is up to date")
		return nil
	}
	fmt.Fprintf(progress, "Wrote %s\n", lockPath)
	return nil
}

// hasRemote reports whether a dependency of reqs is in a remote
// repository.
func hasRemote(reqs []*chart.Dependency) bool {
	for _, d := range reqs {
		if d.Repository != "" && !strings.HasPrefix(d.Repository, "file://") {
			return true
		}
	}
	return false
}

// repoAlias is the repository name of @NAME or alias:NAME ("" for
// another repository).
func repoAlias(r string) string {
	if name, ok := strings.CutPrefix(r, "@"); ok {
		return name
	}
	if name, ok := strings.CutPrefix(r, "alias:"); ok {
		return name
	}
	return ""
}

// sameURL is Helm's urlutil.Equal: the same URL but for a trailing
// slash or an unclean path.
func sameURL(a, b string) bool {
	au, err := url.Parse(a)
	if err != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	bu, err := url.Parse(b)
	if err != nil {
		return false
	}
	for _, u := range []*url.URL{au, bu} {
		if u.Path == "" {
			u.Path = "/"
		}
		u.Path = filepath.Clean(u.Path)
	}
	return au.String() == bu.String()
}

// fetchIndexes fetches into settings.RepositoryCache, under the names
// Helm's downloader.Manager reads them from, the index of each chart
// repository of reqs (an added one by its name, by @NAME, alias:NAME or
// its URL; another by URL as helm-manager-<sha256 of the URL>), and of
// each added repository whose index was never fetched (the manager reads
// them all). It returns the URL of the repository of each remote
// dependency, by dependency name (for messages). A repository name that
// is not added is an *InputError; a repository that cannot be reached a
// *RepoError.
func fetchIndexes(ctx context.Context, settings *cli.EnvSettings, dir string, reqs []*chart.Dependency, progress io.Writer) (map[string]string, error) {
	f, err := loadRepoFile(settings.RepositoryConfig)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", dir, err)
	}
	urls := map[string]string{}
	var entries []*repo.Entry
	seen := map[string]bool{}
	add := func(e *repo.Entry) {
		if !seen[e.Name] {
			seen[e.Name] = true
			entries = append(entries, e)
		}
	}
	var missing []string
	for _, d := range reqs {
		r := d.Repository
		switch {
		case r == "" || strings.HasPrefix(r, "file://"):
			continue
		case IsOCI(r):
			urls[d.Name] = r
			continue
		case repoAlias(r) != "":
			if e := f.Get(repoAlias(r)); e != nil {
				urls[d.Name] = e.URL
				add(e)
				continue
			}
			missing = append(missing, fmt.Sprintf("%s (repository %q)", d.Name, r))
			continue
		}
		urls[d.Name] = r
		if e := entryByURL(f, r); e != nil {
			add(e)
			continue
		}
		if _, err := url.ParseRequestURI(r); err != nil {
			missing = append(missing, fmt.Sprintf("%s (repository %q)", d.Name, r))
			continue
		}
		sum := sha256.Sum256([]byte(r))
		add(&repo.Entry{Name: managerKeyPrefix + hex.EncodeToString(sum[:]), URL: r})
	}
	if len(missing) > 0 {
		return nil, &charts.InputError{Source: "chart", File: dir, Msg: fmt.Sprintf(
			"no repository definition for %s: a repository is a URL (https://…, oci://…, file://…) or @NAME of a repository added with `vllmctl repo add NAME URL`",
			strings.Join(missing, ", "))}
	}
	for _, e := range f.Repositories {
		if e == nil || seen[e.Name] {
			continue
		}
		if _, err := os.Stat(filepath.Join(settings.RepositoryCache, helmpath.CacheIndexFile(e.Name))); err != nil {
			add(e)
		}
	}
	for _, e := range entries {
		if _, err := downloadIndex(ctx, settings, e, settings.RepositoryCache); err != nil {
			name := e.Name
			if strings.HasPrefix(name, managerKeyPrefix) {
				return nil, fmt.Errorf("chart %s: %w", dir, err)
			}
			return nil, fmt.Errorf("chart %s: repository %s: %w", dir, name, err)
		}
		if strings.HasPrefix(e.Name, managerKeyPrefix) {
			fmt.Fprintf(progress, "...Successfully got an update from the %q chart repository\n", redactURL(e.URL))
		} else {
			fmt.Fprintf(progress, "...Successfully got an update from the %q chart repository\n", e.Name)
		}
	}
	return urls, nil
}

// entryByURL is the added repository of URL u, as Helm matches them.
func entryByURL(f *repo.File, u string) *repo.Entry {
	for _, e := range f.Repositories {
		if e != nil && sameURL(e.URL, u) {
			return e
		}
	}
	return nil
}

// helmInputMessages are the messages of Helm's downloader and resolver
// (plain strings, no typed errors) that say the chart asks for something
// that is not there: a chart, a version, a repository definition, a
// reference or constraint that does not parse. They are matched as text
// only after the typed errors (registry answers, network and TLS errors)
// were classified.
var helmInputMessages = []string{
	"can't get a valid version for",
	"chart not found in repo",
	"entry not found",
	"no matching version",
	"no chart version found",
	"could not locate a version matching", // an OCI dependency whose range no tag matches
	"no chart name found",
	"not found in ", // FindChartInRepoURL: "chart X not found in URL"
	"no repository definition for",
	"improperly formatted oci chart reference",
	"invalid version/constraint format",
	"does not satisfy the constraint",
	"is a symlink to",
}

// dependencyError classifies an error of Helm's downloader.Manager: a
// registry's "not found" and Helm's own messages of something missing are
// an *InputError (exit 2); a registry's other answers, network and TLS
// errors and an HTTP error status of a chart repository are a *RepoError
// (exit 6); anything else is returned with the chart named. Every message
// loses the passwords of its URLs. urls are the repositories of the
// dependencies by name (those named by the message are named).
func dependencyError(dir string, reqs []*chart.Dependency, urls map[string]string, err error) error {
	var input *charts.InputError
	var repoErr *RepoError
	if errors.As(err, &input) || errors.As(err, &repoErr) {
		return err
	}
	msg := scrubURLs(err.Error())
	dep, where := blame(reqs, urls, msg)
	asInput := func() error {
		if dep != "" {
			msg = fmt.Sprintf("dependency %s (repository %s): %s", dep, redactURL(where), msg)
		}
		return &charts.InputError{Source: "chart", File: dir, Msg: msg}
	}
	asRepo := func() error {
		if where == "" {
			where = "of chart " + dir
		}
		return fmt.Errorf("chart %s: %w", dir, &RepoError{URL: redactURL(where), Op: "update dependencies", Err: errors.New(msg)})
	}
	var resp *errcode.ErrorResponse
	isResp := errors.As(err, &resp)
	var urlErr *url.Error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var certInvalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	switch {
	case errors.Is(err, errdef.ErrNotFound) || (isResp && resp.StatusCode == http.StatusNotFound):
		return asInput()
	case isResp,
		errors.As(err, &urlErr), errors.As(err, &opErr), errors.As(err, &dnsErr), errors.As(err, &unknownCA), errors.As(err, &hostname),
		errors.As(err, &certInvalid), errors.As(err, &verify), errors.As(err, &header):
		return asRepo()
	}
	for _, m := range helmInputMessages {
		if strings.Contains(msg, m) {
			return asInput()
		}
	}
	// Helm's getter: "failed to fetch URL : 401 Unauthorized" (a string).
	if strings.Contains(msg, "failed to fetch ") {
		return asRepo()
	}
	return fmt.Errorf("chart %s: %s", dir, msg)
}

// blame is the dependency msg names (by its repository's URL or its
// name) and its repository's URL; "" when none.
func blame(reqs []*chart.Dependency, urls map[string]string, msg string) (string, string) {
	names := func(d *chart.Dependency) bool { return strings.Contains(msg, d.Name) }
	anyOne := func(*chart.Dependency) bool { return true }
	for _, also := range []func(*chart.Dependency) bool{names, anyOne} { // by URL and name first
		for _, d := range reqs {
			u := urls[d.Name]
			if u != "" && strings.Contains(msg, strings.TrimSuffix(redactURL(u), "/")) && also(d) {
				return d.Name, u
			}
		}
	}
	return "", ""
}

// lineFilter passes Helm's progress lines on, whole, with the passwords
// of their URLs masked, leaving out "Save error occurred" (the error is
// returned).
type lineFilter struct {
	w   io.Writer
	buf []byte
}

// Write implements io.Writer.
func (l *lineFilter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.line(string(l.buf[:i+1]))
		l.buf = l.buf[i+1:]
	}
}

// Flush writes what is left of a line.
func (l *lineFilter) Flush() {
	if len(l.buf) > 0 {
		l.line(string(l.buf) + "\n")
		l.buf = nil
	}
}

func (l *lineFilter) line(s string) {
	if strings.HasPrefix(s, "Save error occurred: ") {
		return
	}
	_, _ = io.WriteString(l.w, scrubURLs(s))
}
