package main

import (
	"errors"
	"io"
	"io/fs"
	"strings"

	"github.com/spf13/pflag"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/charts/source"
)

// chartSourceFlags say where a CHART of a chart repository or an OCI
// registry comes from and how to reach it, with Helm's flag names: --repo,
// --version, --ca-file, --cert-file, --key-file, --username,
// --password-stdin, --pass-credentials, --plain-http (OCI registries), and
// the provenance flags --verify and --keyring. --repo, --version and --password-stdin are set on the
// command line only (not VLLMCTL_* nor the config file). The insecure-TLS flag is --repo-insecure-skip-tls-verify:
// --insecure-skip-tls-verify is kubectl's, about the API server.
type chartSourceFlags struct {
	repoURL         string
	version         string
	caFile          string
	certFile        string
	keyFile         string
	username        string
	passwordStdin   bool
	insecure        bool
	passCredentials bool
	plainHTTP       bool
	verify          bool
	keyring         string
}

// AddFlags registers the chart source flags on fs.
func (f *chartSourceFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.repoURL, "repo", "", "chart repository URL: CHART is then the name of a chart in it")
	fs.StringVar(&f.version, "version", "",
		"SemVer constraint of the chart version of a chart repository (\"1.2.3\", \"~0.1\", \">=1 <2\"); default: the latest stable")
	f.addTransportFlags(fs)
	fs.BoolVar(&f.plainHTTP, "plain-http", false, "talk HTTP, not HTTPS, to the OCI registry of an oci:// CHART")
	f.addVerifyFlags(fs)
	commandLineOnly(fs, "repo", "version", "password-stdin")
}

// addVerifyFlags registers Helm's provenance flags, --verify and
// --keyring (default: Helm's, $GNUPGHOME or ~/.gnupg, pubring.gpg).
func (f *chartSourceFlags) addVerifyFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&f.verify, "verify", false,
		"verify the chart's provenance before using it, as helm --verify: a packaged CHART's .tgz.prov, the .prov beside a repository's .tgz, an OCI chart's provenance layer; a chart that does not verify is refused (exit 2)")
	fs.StringVar(&f.keyring, "keyring", source.DefaultKeyring(), "public keyring used to verify the chart's provenance (--verify)")
}

// addTransportFlags registers the flags reaching a repository (shared with
// `repo add`).
func (f *chartSourceFlags) addTransportFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.caFile, "ca-file", "", "verify the chart repository's certificate with this CA bundle")
	fs.StringVar(&f.certFile, "cert-file", "", "client certificate for the chart repository (TLS)")
	fs.StringVar(&f.keyFile, "key-file", "", "client key for the chart repository (TLS)")
	fs.StringVar(&f.username, "username", "", "chart repository username (basic auth)")
	fs.BoolVar(&f.passwordStdin, "password-stdin", false, "read the chart repository password from stdin")
	fs.BoolVar(&f.insecure, "repo-insecure-skip-tls-verify", false,
		"do not verify the chart repository's certificate (--insecure-skip-tls-verify is about the API server)")
	fs.BoolVar(&f.passCredentials, "pass-credentials", false,
		"send the repository credentials to every host a chart is downloaded from, not only the repository's")
}

// addRegistryFlags registers the flags reaching an OCI registry with
// helm's names for `dependency update` (Helm applies them to its registry
// client only): the transport flags but --pass-credentials, and
// --plain-http.
func (f *chartSourceFlags) addRegistryFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.caFile, "ca-file", "", "verify the OCI registries' certificates with this CA bundle")
	fs.StringVar(&f.certFile, "cert-file", "", "client certificate for the OCI registries (TLS)")
	fs.StringVar(&f.keyFile, "key-file", "", "client key for the OCI registries (TLS)")
	fs.StringVar(&f.username, "username", "", "OCI registry username (default: Helm's registry login)")
	fs.BoolVar(&f.passwordStdin, "password-stdin", false, "read the OCI registry password from stdin")
	fs.BoolVar(&f.insecure, "repo-insecure-skip-tls-verify", false,
		"do not verify the OCI registries' certificates (--insecure-skip-tls-verify is about the API server)")
	fs.BoolVar(&f.plainHTTP, "plain-http", false, "talk HTTP, not HTTPS, to the OCI registries")
	commandLineOnly(fs, "password-stdin")
}

// options returns the source options, reading the password from in with
// --password-stdin (one line; a trailing newline is dropped).
// maxTLSFileBytes caps --ca-file, --cert-file and --key-file (PEM
// bundles), maxPasswordBytes what --password-stdin reads: larger or
// endless inputs (/dev/zero) are refused at once, exit 2, instead of read
// whole by Helm's TLS and registry clients.
const (
	maxTLSFileBytes  = 4 << 20
	maxPasswordBytes = 64 << 10
)

func (f *chartSourceFlags) options(in io.Reader) (source.Options, error) {
	for _, file := range []struct{ flag, path string }{{"--ca-file", f.caFile}, {"--cert-file", f.certFile}, {"--key-file", f.keyFile}} {
		if file.path == "" {
			continue
		}
		// A missing or unreadable file is left to the clients, which name it.
		if _, err := charts.ReadFileCapped(file.path, maxTLSFileBytes); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			return source.Options{}, newUsageError("%s %s: %v", file.flag, file.path, err)
		}
	}
	o := source.Options{
		RepoURL: strings.TrimSpace(f.repoURL), Version: strings.TrimSpace(f.version),
		CAFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile,
		Username: f.username, InsecureSkipTLSVerify: f.insecure, PassCredentialsAll: f.passCredentials,
		PlainHTTP: f.plainHTTP, Verify: f.verify, Keyring: f.keyring,
	}
	if f.passwordStdin {
		if f.username == "" {
			return o, newUsageError("--password-stdin needs --username")
		}
		if in == nil {
			return o, newUsageError("--password-stdin: no stdin")
		}
		b, err := io.ReadAll(io.LimitReader(in, maxPasswordBytes+1))
		if err != nil {
			return o, newUsageError("--password-stdin: %v", err)
		}
		if len(b) > maxPasswordBytes {
			return o, newUsageError("--password-stdin: stdin holds more than the cap of %d KiB", maxPasswordBytes>>10)
		}
		o.Password = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if o.Password == "" {
			return o, newUsageError("--password-stdin: stdin is empty")
		}
	}
	return o, nil
}
