package source

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// RepoError reports a chart repository or an OCI registry (a URL of
// oci://…) that could not be reached (connection
// refused, DNS, TLS) or that refused a request (an HTTP error status, 401
// for a credential it does not accept included), or that served something
// that is not a chart repository index. Its exit code is 6, as for the
// cluster: the fault is on the far side of the network, not in the input.
type RepoError struct {
	// URL is the repository's (or the chart's) URL, without credentials.
	URL string
	// Op says what was being fetched, e.g. "fetch index", "fetch chart".
	Op string
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *RepoError) Error() string {
	what := "chart repository"
	if strings.HasPrefix(e.URL, ociPrefix) {
		what = "registry"
	}
	return fmt.Sprintf("%s %s: %s: %v", what, e.URL, e.Op, e.Err)
}

// Unwrap returns the underlying error.
func (e *RepoError) Unwrap() error { return e.Err }

// ExitCode is exitcode.Cluster (6).
func (e *RepoError) ExitCode() int { return exitcode.Cluster }

// redactURL returns u without its password, for messages.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Redacted()
}
