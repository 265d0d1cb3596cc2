package source

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/vllmctl/vllmctl/charts"
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
	// Helm's getters repeat the URL they fetched, password included:
	// every URL in the message loses its password.
	return scrubURLs(fmt.Sprintf("%s %s: %s: %v", what, e.URL, e.Op, e.Err))
}

// Unwrap returns the underlying error.
func (e *RepoError) Unwrap() error { return e.Err }

// ExitCode is exitcode.Cluster (6).
func (e *RepoError) ExitCode() int { return exitcode.Cluster }

// redactURL returns u without its password, for messages (also when u
// does not parse).
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return scrubURLs(u)
	}
	return p.Redacted()
}

// withoutUserinfo returns u without user and password: what a record
// keeps of where a chart came from.
func withoutUserinfo(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return scrubURLs(u)
	}
	p.User = nil
	return p.String()
}

// urlPassword matches the password of a URL written in text
// ("scheme://user:password@").
var urlPassword = regexp.MustCompile(`(://[^/\s:@]*):[^/\s@]*@`)

// scrubURLs replaces the password of every URL in text by "xxxxx", as
// url.URL.Redacted does.
func scrubURLs(text string) string {
	return urlPassword.ReplaceAllString(text, "$1:xxxxx@")
}

// hasPassword reports whether text holds a URL with a password
// ("scheme://user:password@") that is not masked already.
func hasPassword(text string) bool {
	for _, m := range urlPasswordValue.FindAllStringSubmatch(text, -1) {
		if m[1] != "xxxxx" {
			return true
		}
	}
	return false
}

// urlPasswordValue captures the password of a URL written in text.
var urlPasswordValue = regexp.MustCompile(`://[^/\s:@]*:([^/\s@]*)@`)

// maskCredentials returns err with the password of every URL in its
// message masked ("xxxxx"), whatever form the chart reference took (an
// oci:// reference, a --repo URL, a path that looks like a URL), with
// err's exit code. An *charts.InputError stays one (its file, path and
// message masked); any other error becomes one that does not unwrap to
// err, so that the password cannot be reached through it. err is
// returned as it is when its message holds no password.
func maskCredentials(err error) error {
	if err == nil || !hasPassword(err.Error()) {
		return err
	}
	var ie *charts.InputError
	if errors.As(err, &ie) && ie.Error() == err.Error() {
		c := *ie
		c.File, c.Path, c.Msg = scrubURLs(c.File), scrubURLs(c.Path), scrubURLs(c.Msg)
		c.Err = maskCredentials(c.Err)
		if !hasPassword(c.Error()) {
			return &c
		}
	}
	return &maskedError{msg: scrubURLs(err.Error()), code: exitcode.Of(err)}
}

// maskedError is an error whose message lost a URL's password; it keeps
// the original's exit code.
type maskedError struct {
	msg  string
	code int
}

func (e *maskedError) Error() string { return e.msg }

// ExitCode is the original error's.
func (e *maskedError) ExitCode() int { return e.code }
