package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/cli"
	"helm.sh/helm/v4/pkg/provenance"
	"helm.sh/helm/v4/pkg/repo/v1"

	"github.com/vllmctl/vllmctl/charts"
)

// keyring is the keyring Options.Verify uses when Options.Keyring
// is "": Helm's default (see DefaultKeyring).
func (o Options) keyring() string {
	if o.Keyring != "" {
		return o.Keyring
	}
	return DefaultKeyring()
}

// DefaultKeyring is Helm's default --keyring: $GNUPGHOME (default
// ~/.gnupg) /pubring.gpg, or pubring.kbx when only that one exists (the
// legacy path when neither does, so that messages name it), as Helm's
// defaultKeyring.
func DefaultKeyring() string {
	home, _ := os.UserHomeDir()
	gnupg := filepath.Join(home, ".gnupg")
	if v, ok := os.LookupEnv("GNUPGHOME"); ok {
		gnupg = v
	}
	legacy := filepath.Join(gnupg, "pubring.gpg")
	if _, err := os.Stat(legacy); !errors.Is(err, fs.ErrNotExist) {
		return legacy
	}
	keybox := filepath.Join(gnupg, "pubring.kbx")
	if _, err := os.Stat(keybox); !errors.Is(err, fs.ErrNotExist) {
		return keybox
	}
	return legacy
}

// verifyError is the *InputError (exit 2) of a chart whose provenance
// could not be verified.
func verifyError(ref, msg string, err error) error {
	if err != nil {
		msg += ": " + err.Error()
	}
	return &charts.InputError{Source: "chart", File: ref, Err: err, Msg: "--verify: " + scrubURLs(msg)}
}

// verifyFromRepo verifies c, downloaded from chartURL of the repository
// e, with the provenance file served beside it (chartURL + ".prov"), as
// Helm's downloader does with VerifyAlways; the file name the provenance
// signs is the URL's last element. No provenance file (404) is an
// *InputError, a repository that fails to serve it a *RepoError.
func verifyFromRepo(ctx context.Context, settings *cli.EnvSettings, e *repo.Entry, c *Chart, chartURL string, o Options) error {
	archive, err := os.ReadFile(c.Path)
	if err != nil {
		return fmt.Errorf("chart %s: read %s: %w", c.Ref, c.Path, err)
	}
	prov, err := get(ctx, settings, e, c.Ref, chartURL+".prov", "", maxMetadataBytes, errProvTooLarge)
	if err != nil {
		var input *charts.InputError
		switch {
		case errors.As(err, &input), ctx.Err() != nil:
			return err
		case notFound(err):
			return verifyError(c.Ref, "no provenance file "+c.URL+".prov in the repository", err)
		}
		return fmt.Errorf("chart %s: %w", c.Ref, &RepoError{URL: c.URL + ".prov", Op: "fetch provenance", Err: err})
	}
	name := path.Base(c.URL)
	if u, err := url.Parse(chartURL); err == nil {
		name = path.Base(u.Path)
	}
	return verify(c, archive, prov, name, o)
}

// notFound reports whether err is Helm's HTTP getter's error for a 404 or
// 410 status ("failed to fetch URL : 404 Not Found"): it has no type.
func notFound(err error) bool {
	msg := err.Error()
	for _, code := range []int{http.StatusNotFound, http.StatusGone} {
		if strings.HasSuffix(msg, fmt.Sprintf(" : %d %s", code, http.StatusText(code))) {
			return true
		}
	}
	return false
}

// verifyLocal verifies the local chart path (ref) as Helm's
// downloader.VerifyChart does: a packaged chart (.tgz) with its provenance
// file path+".prov" beside it, signed by a key of the keyring. A chart
// directory cannot be verified.
func verifyLocal(ref, path string, o Options) (*Chart, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, verifyError(ref, "", err)
	case fi.IsDir():
		return nil, verifyError(ref, "unpacked charts cannot be verified (a chart directory has no provenance: package it and sign it, helm package --sign)", nil)
	case !strings.EqualFold(filepath.Ext(path), ".tgz"):
		return nil, verifyError(ref, "chart must be a tgz file", nil)
	}
	archive, err := os.ReadFile(path)
	if err != nil {
		return nil, verifyError(ref, "read the chart archive", err)
	}
	prov, err := os.ReadFile(path + ".prov")
	if err != nil {
		return nil, verifyError(ref, "no provenance file "+path+".prov", err)
	}
	c := &Chart{Ref: ref, Path: path}
	if err := verify(c, archive, prov, filepath.Base(path), o); err != nil {
		return nil, err
	}
	return c, nil
}

// verify checks the provenance prov of archive (a chart .tgz named name
// in it) against the keyring of o, as Helm's Signatory.Verify does, and
// records the signer and the signed digest in c. Any failure (a keyring
// that cannot be read, no signature, a key not in the keyring, a file
// that is not the one signed) is an *InputError naming c.Ref.
func verify(c *Chart, archive, prov []byte, name string, o Options) error {
	keyring := o.keyring()
	sig, err := provenance.NewFromKeyring(keyring, "")
	if err != nil {
		return verifyError(c.Ref, "load keyring "+keyring, err)
	}
	v, err := sig.Verify(archive, prov, name)
	if err != nil {
		what := "provenance of " + name
		if c.URL != "" {
			what += " (" + c.URL + ")"
		}
		return verifyError(c.Ref, what+" does not verify with keyring "+keyring, err)
	}
	var ids []string
	if v.SignedBy != nil {
		for id := range v.SignedBy.Identities {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	c.Signer, c.SignedDigest = strings.Join(ids, ", "), v.FileHash
	if c.Signer == "" && v.SignedBy != nil && v.SignedBy.PrimaryKey != nil {
		c.Signer = fmt.Sprintf("%X", v.SignedBy.PrimaryKey.Fingerprint)
	}
	return nil
}
