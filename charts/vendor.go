package charts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/yaml"
)

// UpdateDependencies vendors the dependencies of the chart in directory
// dir whose repository is a file:// path, as `helm dependency update`
// does: each one is packed with Helm's chartutil.Save into
// dir/charts/NAME-VERSION.tgz (the version of the chart found there, which
// must be within the dependency's range), archives of charts/ that no
// dependency produced any more are deleted, and Chart.lock is written
// unless its digest is unchanged (requirements.lock for apiVersion v1).
// Dependencies without a repository must already be directories in
// charts/, as in Helm. A dependency in a remote repository (https, oci) is
// an *InputError naming `vllmctl dependency update`, and nothing is
// written: this package reaches no network. That command runs
// source.UpdateDependencies, which vendors such charts with Helm's
// downloader and calls this function only for charts without remote
// dependencies, so the refusal guards other callers of the package.
// Progress goes to progress.
//
// Helm's downloader.Manager does the same but pulls Helm's registry and
// plugin machinery into the binary; this is its file:// path, on Helm's
// loader, chartutil.Save and chart.Lock, and writes the Chart.lock Helm
// writes (a test compares the two).
func UpdateDependencies(dir string, progress io.Writer) error {
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return &InputError{Source: "chart", File: dir, Msg: errMsg(err), Err: err}
	case !fi.IsDir():
		return &InputError{Source: "chart", File: dir, Msg: "not a chart directory (only unpacked charts can be updated)"}
	}
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return &InputError{Source: "chart", File: dir, Msg: err.Error(), Err: err}
	}
	reqs := ch.Metadata.Dependencies
	if len(reqs) == 0 {
		fmt.Fprintf(progress, "chart %s has no dependencies\n", ch.Name())
		return nil
	}
	if err := refuseRemote(dir, reqs); err != nil {
		return err
	}
	locked, err := resolveLocal(dir, reqs)
	if err != nil {
		return err
	}
	if err := vendorLocal(dir, reqs, progress); err != nil {
		return err
	}
	digest, err := hashReq(reqs, locked)
	if err != nil {
		return fmt.Errorf("chart %s: lock digest: %w", dir, err)
	}
	if ch.Lock != nil && ch.Lock.Digest == digest {
		fmt.Fprintln(progress, "the lock file is up to date")
		return nil
	}
	lock := &chart.Lock{Generated: time.Now(), Digest: digest, Dependencies: locked}
	return writeLock(dir, lock, ch.Metadata.APIVersion == chart.APIVersionV1, progress)
}

// refuseRemote refuses dependencies vllmctl does not fetch.
func refuseRemote(dir string, reqs []*chart.Dependency) error {
	var remote []string
	for _, d := range reqs {
		if d.Repository != "" && !strings.HasPrefix(d.Repository, "file://") {
			remote = append(remote, describeDependency(d))
		}
	}
	if len(remote) == 0 {
		return nil
	}
	return &InputError{Source: "chart", File: dir, Msg: fmt.Sprintf(
		"dependencies in remote repositories are out of scope of this function (it vendors file:// repositories only): %s; fetch them with `vllmctl dependency update %s`",
		strings.Join(remote, ", "), dir)}
}

// resolveLocal is the lock of reqs, as Helm's resolver makes it: the
// version of the chart at each file:// path, which must be within the
// dependency's range; a dependency without a repository keeps its version
// and must be a directory in charts/.
func resolveLocal(dir string, reqs []*chart.Dependency) ([]*chart.Dependency, error) {
	locked := make([]*chart.Dependency, len(reqs))
	var missing []string
	for i, d := range reqs {
		constraint, err := semver.NewConstraint(d.Version)
		if err != nil {
			return nil, &InputError{Source: "chart", File: dir, Err: err,
				Msg: fmt.Sprintf("dependency %q has an invalid version/constraint format: %v", d.Name, err)}
		}
		if d.Repository != "" && !strings.HasPrefix(d.Repository, "file://") {
			continue // a remote one (CheckLocalDependencies): Helm's resolver locks it
		}
		if d.Repository == "" {
			if _, err := localPath("file://"+filepath.Join("charts", d.Name), dir); err != nil {
				return nil, err
			}
			locked[i] = &chart.Dependency{Name: d.Name, Version: d.Version}
			continue
		}
		src, err := localPath(d.Repository, dir)
		if err != nil {
			return nil, err
		}
		sub, err := loader.LoadDir(src)
		if err != nil {
			return nil, &InputError{Source: "chart", File: src, Msg: fmt.Sprintf("dependency %s: %v", d.Name, err), Err: err}
		}
		v, err := semver.NewVersion(sub.Metadata.Version)
		if err != nil || !constraint.Check(v) {
			missing = append(missing, fmt.Sprintf("%q (repository %q, version %q; %s has %s)", d.Name, d.Repository, d.Version, src, sub.Metadata.Version))
			continue
		}
		locked[i] = &chart.Dependency{Name: d.Name, Repository: d.Repository, Version: sub.Metadata.Version}
	}
	if len(missing) > 0 {
		return nil, &InputError{Source: "chart", File: dir, Msg: fmt.Sprintf(
			"can't get a valid version for %d subchart(s): %s. Change the version constraint in Chart.yaml or the chart's version",
			len(missing), strings.Join(missing, ", "))}
	}
	return locked, nil
}

// CheckLocalDependencies checks, before anything is written, what
// UpdateDependencies checks of the dependencies of the chart in dir that
// are not in a remote repository: each version constraint (also of the
// remote ones), each file:// path and the version of the chart found
// there, each dependency without repository in charts/ and its version.
// A failure is the *InputError UpdateDependencies returns for it.
// charts/source checks a chart with remote dependencies with it before
// Helm's downloader vendors them.
func CheckLocalDependencies(dir string, reqs []*chart.Dependency) error {
	if _, err := resolveLocal(dir, reqs); err != nil {
		return err
	}
	for _, d := range reqs {
		if d.Repository == "" {
			if err := checkUnmanaged(dir, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// localPath is the directory of a file:// repository, relative to the
// chart directory unless absolute (Helm's resolver.GetLocalPath).
func localPath(repo, dir string) (string, error) {
	p := strings.TrimPrefix(repo, "file://")
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	if _, err := os.Stat(p); err != nil {
		msg := errMsg(err)
		if errors.Is(err, fs.ErrNotExist) {
			msg = "directory not found"
		}
		return "", &InputError{Source: "chart", File: dir, Err: err, Msg: fmt.Sprintf("repository %s: %s: %s", repo, p, msg)}
	}
	return p, nil
}

// vendorLocal packs the file:// dependencies into a temporary directory
// of the chart, then moves the archives into charts/ and deletes the
// archives there that no dependency produced (Helm's downloadAll and
// safeMoveDeps).
func vendorLocal(dir string, reqs []*chart.Dependency, progress io.Writer) error {
	dest := filepath.Join(dir, "charts")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return fmt.Errorf("chart %s: %w", dir, err)
	}
	tmp := filepath.Join(dir, "tmpcharts-"+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("chart %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)

	epoch, err := SourceDateEpoch()
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "Saving %d charts\n", len(reqs))
	packed, err := packDependencies(dir, tmp, reqs, epoch, progress)
	if err != nil {
		return err
	}
	// All packed: only now is charts/ changed.
	for _, name := range packed.order {
		if err := os.Rename(filepath.Join(tmp, name), filepath.Join(dest, name)); err != nil {
			return fmt.Errorf("move %s into %s: %w", name, dest, err)
		}
		fmt.Fprintf(progress, "Saved %s\n", filepath.Join(dest, name))
	}
	return deleteOutdated(dir, packed, progress)
}

// packedDeps is what packDependencies did.
type packedDeps struct {
	local map[string]bool // names of the dependencies without repository
	saved map[string]bool // archive names packed
	order []string        // archive names, in the order of the dependencies
}

// packDependencies packs each file:// dependency of reqs into tmp, and
// checks that each dependency without repository, already in charts/,
// satisfies its version constraint.
func packDependencies(dir, tmp string, reqs []*chart.Dependency, epoch *time.Time, progress io.Writer) (packedDeps, error) {
	packed := packedDeps{local: map[string]bool{}, saved: map[string]bool{}}
	for _, d := range reqs {
		if d.Repository == "" {
			packed.local[d.Name] = true
			if err := checkUnmanaged(dir, d); err != nil {
				return packedDeps{}, err
			}
			continue
		}
		src, err := localPath(d.Repository, dir)
		if err != nil {
			return packedDeps{}, err
		}
		sub, err := loader.LoadDir(src)
		if err != nil {
			return packedDeps{}, &InputError{Source: "chart", File: src, Msg: err.Error(), Err: err}
		}
		if epoch != nil {
			sub.StampModTimes(*epoch)
		}
		file, err := chartutil.Save(sub, tmp)
		if err != nil {
			return packedDeps{}, fmt.Errorf("pack dependency %s from %s: %w", d.Name, src, err)
		}
		if name := filepath.Base(file); !packed.saved[name] { // the same chart twice (aliases): one archive
			packed.saved[name] = true
			packed.order = append(packed.order, name)
		}
		fmt.Fprintf(progress, "Packed %s %s from %s\n", d.Name, sub.Metadata.Version, d.Repository)
	}
	return packed, nil
}

// checkUnmanaged checks that the dependency d without repository, which
// must already be a directory of charts/, satisfies its version
// constraint.
func checkUnmanaged(dir string, d *chart.Dependency) error {
	p := filepath.Join(dir, "charts", d.Name)
	sub, err := loader.LoadDir(p)
	if err != nil {
		return &InputError{Source: "chart", File: p, Msg: err.Error(), Err: err}
	}
	if !chartutil.IsCompatibleRange(d.Version, sub.Metadata.Version) {
		return &InputError{Source: "chart", File: dir, Msg: fmt.Sprintf(
			"dependency %s at version %s does not satisfy the constraint %s", d.Name, sub.Metadata.Version, d.Version)}
	}
	return nil
}

// deleteOutdated deletes the chart archives of dir/charts that were not
// packed, except those of dependencies without repository.
func deleteOutdated(dir string, packed packedDeps, progress io.Writer) error {
	dest := filepath.Join(dir, "charts")
	entries, err := os.ReadDir(dest)
	if err != nil {
		return fmt.Errorf("chart %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() || packed.saved[e.Name()] {
			continue
		}
		p := filepath.Join(dest, e.Name())
		old, err := loader.LoadFile(p)
		if err != nil || packed.local[old.Name()] {
			continue // not a chart, or a dependency without repository
		}
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("delete outdated %s: %w", p, err)
		}
		fmt.Fprintf(progress, "Deleted outdated %s\n", p)
	}
	return nil
}

// SourceDateEpoch is SOURCE_DATE_EPOCH as Helm reads it (archives get
// that modification time), nil when unset; a value that is not a number
// of seconds is an *InputError.
func SourceDateEpoch() (*time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return nil, &InputError{Source: "SOURCE_DATE_EPOCH", Msg: fmt.Sprintf("%q is not a number of seconds", s)}
	}
	t := time.Unix(n, 0).UTC()
	return &t, nil
}

// hashReq is the lock digest Helm computes (internal/resolver.HashReq):
// the SHA-256 of the JSON of the declared and the locked dependencies.
func hashReq(req, lock []*chart.Dependency) (string, error) {
	data, err := json.Marshal([2][]*chart.Dependency{req, lock})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// writeLock writes the lock file as Helm does, refusing to write through
// a symbolic link.
func writeLock(dir string, lock *chart.Lock, legacy bool, progress io.Writer) error {
	data, err := yaml.Marshal(lock)
	if err != nil {
		return fmt.Errorf("chart %s: lock file: %w", dir, err)
	}
	name := "Chart.lock"
	if legacy {
		name = "requirements.lock"
	}
	dest := filepath.Join(dir, name)
	if fi, err := os.Lstat(dest); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return &InputError{Source: "chart", File: dest, Msg: "is a symbolic link: not writing through it"}
	}
	if err := os.WriteFile(dest, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", dest, err)
	}
	fmt.Fprintf(progress, "Wrote %s\n", dest)
	return nil
}
