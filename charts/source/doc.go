// Package source locates the chart a command renders: a built-in chart, a
// local chart (a directory or a packaged .tgz), or a chart of a Helm chart
// repository (HTTP/HTTPS), named REPO/NAME for a repository added to Helm's
// repositories.yaml or NAME with a repository URL (Options.RepoURL), at the
// highest version matching a SemVer constraint (Options.Version; default:
// the latest stable version), or a chart of an OCI registry,
// oci://HOST/PATH/NAME at a tag (the reference's, or the highest tag
// matching Options.Version) or pinned by manifest digest (@sha256:…),
// pulled with Helm v4's registry client (helm.sh/helm/v4/pkg/registry).
//
// It owns Helm's repository files as Helm does, through Helm v4's own
// packages and Helm's paths (cli.EnvSettings: HELM_REPOSITORY_CONFIG,
// HELM_REPOSITORY_CACHE, HELM_CONTENT_CACHE and the HELM_*_HOME
// directories): repositories.yaml (AddRepository, Repositories,
// RemoveRepositories) and the index cache (UpdateRepositories), so that
// repositories added with `helm repo add` are seen here and the other way
// round; and Helm's registry config (HELM_REGISTRY_CONFIG, falling back
// to docker's config as Helm's client does) for OCI credentials
// (RegistryLogin, RegistryLogout). Downloaded charts are kept in Helm's
// content cache, keyed by the sha256 digest of the .tgz, which
// Chart.Digest reports for a chart repository (for an OCI registry,
// Chart.Digest is the manifest digest and Chart.ChartDigest the .tgz's).
//
// UpdateDependencies vendors the dependencies of a chart directory as
// `helm dependency update` does, with Helm's downloader.Manager on the
// same files, cache and registry config (file:// ones only: with
// charts.UpdateDependencies).
//
// With Options.Verify, the chart's provenance is verified as Helm's
// --verify does, with Helm v4's pkg/provenance and Options.Keyring (see
// verify.go): a local .tgz with its .tgz.prov, a repository's .tgz with
// the .prov served beside it, an OCI chart with its provenance layer; the
// signer and the signed digest are reported in Chart.Signer and
// Chart.SignedDigest. A chart that does not verify, a chart directory and
// a built-in chart are refused with a *charts.InputError.
//
// Errors carry their exit code: a repository that cannot be reached or
// refuses a request (connection refused, DNS, a TLS failure, an HTTP error
// status such as 401), and so is a registry that cannot be reached or
// refuses the credentials, is a *RepoError (exit 6); a chart, a version, a
// tag, a digest or a repository name that is not there, a digest
// mismatch, a bad OCI reference or a bad version constraint, is a
// *charts.InputError (exit 2) naming the reference.
package source
