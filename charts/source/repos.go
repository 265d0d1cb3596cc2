package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gofrs/flock"
	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/helmpath"
	"helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"

	"github.com/vllmctl/vllmctl/charts"
)

// Repository is an added chart repository, as `repo list` shows it.
type Repository struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// loadRepoFile reads Helm's repositories.yaml at path; a missing file is
// an empty one.
func loadRepoFile(path string) (*repo.File, error) {
	f, err := repo.LoadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return repo.NewFile(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("repositories file %s: %w", path, err)
	}
	return f, nil
}

// Repositories returns the repositories of Helm's repositories.yaml, in its
// order (credentials left out).
func Repositories(settings *cli.EnvSettings) ([]Repository, error) {
	f, err := loadRepoFile(settings.RepositoryConfig)
	if err != nil {
		return nil, err
	}
	out := []Repository{}
	for _, e := range f.Repositories {
		if e != nil {
			out = append(out, Repository{Name: e.Name, URL: redactURL(e.URL)})
		}
	}
	return out, nil
}

// AddResult says what AddRepository did.
type AddResult string

// The results of AddRepository.
const (
	// Added: the repository is new.
	Added AddResult = "added"
	// Unchanged: a repository of that name and the same configuration was
	// there already (nothing written), as Helm skips it.
	Unchanged AddResult = "unchanged"
	// Replaced: force replaced a repository of that name.
	Replaced AddResult = "replaced"
)

// ValidateRepoName checks the name of a repository to add, with Helm's
// rule (cmd/helm/repo_add.go: non-empty, no "/") and no control character
// (an escape sequence in a name would be printed by every listing): an
// *charts.InputError quoting the name (exit 2).
func ValidateRepoName(name string) error {
	switch {
	case name == "":
		return &charts.InputError{Source: "repository name", Msg: "must be non-empty"}
	case strings.Contains(name, "/"):
		return &charts.InputError{Source: "repository name", File: strconv.Quote(name), Msg: "contains \"/\", please specify a different name without \"/\""}
	case strings.ContainsFunc(name, unicode.IsControl) || !utf8.ValidString(name):
		return &charts.InputError{Source: "repository name", File: strconv.Quote(name), Msg: "contains a control character or is not UTF-8"}
	}
	return nil
}

// AddRepository adds e to Helm's repositories.yaml with Helm's semantics:
// the name may not contain "/"; the repository's index is fetched first
// (and cached, as `helm repo add` does), so a repository that cannot be
// reached is not added (a *RepoError); a repository of the same name is
// kept when its configuration is the same (Unchanged) and refused when it
// differs, unless force replaces it. The file is locked while it is
// updated, with Helm's lock file.
func AddRepository(ctx context.Context, settings *cli.EnvSettings, e repo.Entry, force bool) (AddResult, error) {
	if err := ValidateRepoName(e.Name); err != nil {
		return "", err
	}
	if strings.HasPrefix(e.URL, "oci://") {
		return "", &charts.InputError{Source: "repository", File: e.Name,
			Msg: "OCI registries are not chart repositories: they are not added (and not supported here)"}
	}
	unlock, err := lockRepoFile(ctx, settings.RepositoryConfig)
	if err != nil {
		return "", err
	}
	defer unlock()

	f, err := loadRepoFile(settings.RepositoryConfig)
	if err != nil {
		return "", err
	}
	result := Added
	if old := f.Get(e.Name); old != nil {
		if !force {
			if reflect.DeepEqual(*old, e) {
				return Unchanged, nil
			}
			return "", &charts.InputError{Source: "repository", File: e.Name,
				Msg: fmt.Sprintf("already added with another configuration (%s); remove it first or use --force-update", redactURL(old.URL))}
		}
		result = Replaced
	}
	if _, err := downloadIndex(ctx, settings, &e, settings.RepositoryCache); err != nil {
		return "", fmt.Errorf("repository %s: %w", e.Name, err)
	}
	f.Update(&e)
	if err := writeRepoFile(f, settings.RepositoryConfig); err != nil {
		return "", fmt.Errorf("repository %s: %w", e.Name, err)
	}
	return result, nil
}

// RemoveRepositories removes the named repositories from repositories.yaml
// and their index cache files, as `helm repo remove`. A name that is not
// there is an *InputError naming it; nothing is removed then.
func RemoveRepositories(ctx context.Context, settings *cli.EnvSettings, names ...string) error {
	unlock, err := lockRepoFile(ctx, settings.RepositoryConfig)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := loadRepoFile(settings.RepositoryConfig)
	if err != nil {
		return err
	}
	for _, n := range names {
		if !f.Has(n) {
			return &charts.InputError{Source: "repository", File: n, Err: fs.ErrNotExist, Msg: "not added"}
		}
	}
	for _, n := range names {
		f.Remove(n)
	}
	if err := writeRepoFile(f, settings.RepositoryConfig); err != nil {
		return fmt.Errorf("remove repositories %s: %w", strings.Join(names, ", "), err)
	}
	for _, n := range names {
		for _, p := range []string{helmpath.CacheIndexFile(n), helmpath.CacheChartsFile(n)} {
			if err := os.Remove(filepath.Join(settings.RepositoryCache, p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("repository %s: remove cached index: %w", n, err)
			}
		}
	}
	return nil
}

// UpdateRepositories fetches the index of each named repository (all when
// names is empty) into Helm's cache, as `helm repo update`, and returns the
// names updated. A name that is not added is an *InputError and nothing is
// fetched; otherwise every repository is tried and the failures are
// returned joined (each a *RepoError).
func UpdateRepositories(ctx context.Context, settings *cli.EnvSettings, names ...string) ([]string, error) {
	f, err := loadRepoFile(settings.RepositoryConfig)
	if err != nil {
		return nil, err
	}
	var entries []*repo.Entry
	if len(names) == 0 {
		if len(f.Repositories) == 0 {
			return nil, &charts.InputError{Source: "repositories", Msg: "none added (vllmctl repo add NAME URL)"}
		}
		entries = f.Repositories
	}
	for _, n := range names {
		e := f.Get(n)
		if e == nil {
			return nil, &charts.InputError{Source: "repository", File: n, Err: fs.ErrNotExist, Msg: "not added"}
		}
		entries = append(entries, e)
	}
	var updated []string
	var errs []error
	for _, e := range entries {
		if _, err := downloadIndex(ctx, settings, e, settings.RepositoryCache); err != nil {
			errs = append(errs, fmt.Errorf("repository %s: %w", e.Name, err))
			continue
		}
		updated = append(updated, e.Name)
	}
	sort.Strings(updated)
	return updated, errors.Join(errs...)
}

// lockRepoFile takes Helm's lock on the repositories file (the file's path
// with its extension replaced by .lock), waiting up to 30s.
func lockRepoFile(ctx context.Context, path string) (func(), error) {
	lockPath := path + ".lock"
	if ext := filepath.Ext(path); ext != "" && len(ext) < len(path) {
		lockPath = strings.TrimSuffix(path, ext) + ".lock"
	}
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	lockCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l := flock.New(lockPath)
	ok, err := l.TryLockContext(lockCtx, 100*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !ok {
		return nil, fmt.Errorf("lock %s: held by another process", path)
	}
	return func() { _ = l.Unlock() }, nil
}

// writeRepoFile writes repositories.yaml as Helm's repo.File.WriteFile
// does (YAML, mode 0600), but through a temporary file renamed into place:
// a process killed mid-write leaves the old file whole, with every
// repository and its credentials.
func writeRepoFile(f *repo.File, path string) error {
	data, err := yaml.Marshal(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; left only on failure
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
