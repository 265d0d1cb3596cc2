// Package source locates the chart a command renders: a built-in chart, a
// local chart (a directory or a packaged .tgz), or a chart of a Helm chart
// repository (HTTP/HTTPS), named REPO/NAME for a repository added to Helm's
// repositories.yaml or NAME with a repository URL (Options.RepoURL), at the
// highest version matching a SemVer constraint (Options.Version; default:
// the latest stable version).
//
// It owns Helm's repository files as Helm does, through Helm v4's own
// packages and Helm's paths (cli.EnvSettings: HELM_REPOSITORY_CONFIG,
// HELM_REPOSITORY_CACHE, HELM_CONTENT_CACHE and the HELM_*_HOME
// directories): repositories.yaml (AddRepository, Repositories,
// RemoveRepositories) and the index cache (UpdateRepositories), so that
// repositories added with `helm repo add` are seen here and the other way
// round. Downloaded charts are kept in Helm's content cache, keyed by the
// sha256 digest of the .tgz, which Chart.Digest reports.
//
// Errors carry their exit code: a repository that cannot be reached or
// refuses a request (connection refused, DNS, a TLS failure, an HTTP error
// status such as 401) is a *RepoError (exit 6); a chart, a version or a
// repository name that is not there, or a bad version constraint, is a
// *charts.InputError (exit 2) naming the reference.
package source
