package diff

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/secretdata"
)

// gramLen is the length of the value fragments looked for in messages:
// a message holding any 8 consecutive bytes of a Secret value, or a whole
// shorter value, is withheld.
const gramLen = 8

// RedactedError replaces an error whose message may echo a Secret value
// (an API server rejecting an object can quote it). When every echo is of
// a whole value, Message is the original message with each value replaced
// by "(redacted)"; otherwise the original message is withheld and only
// what is safe is kept: the object, the reason, the HTTP code and the
// fields the server named. It does not unwrap to the original error, so
// the value cannot be reached through it. ExitCode is the original's: its
// own ExitCode, 6 for an API or network error, else 1.
type RedactedError struct {
	// Message is the original message with the values replaced; empty
	// when it is withheld.
	Message string
	// Object is the object the error was about, when known ("v1 Secret
	// ns/name").
	Object string
	// Reason and Code are the API server's, when it answered.
	Reason string
	Code   int32
	// Fields are the field paths the server named.
	Fields []string
	code   int
}

// Redacted replaces a Secret value in a RedactedError's message.
const Redacted = secretdata.Redacted

func (e *RedactedError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	var b strings.Builder
	b.WriteString("dry-run apply")
	if e.Object != "" {
		b.WriteString(" of " + e.Object)
	}
	b.WriteString(" failed")
	var details []string
	if e.Reason != "" {
		details = append(details, "reason "+e.Reason)
	}
	if e.Code != 0 {
		details = append(details, fmt.Sprintf("HTTP %d", e.Code))
	}
	if len(e.Fields) > 0 {
		details = append(details, "fields "+strings.Join(e.Fields, ", "))
	}
	if len(details) > 0 {
		b.WriteString(" (" + strings.Join(details, "; ") + ")")
	}
	b.WriteString("; the error message is withheld because it may contain Secret data")
	return b.String()
}

// ExitCode is the original error's exit code.
func (e *RedactedError) ExitCode() int { return e.code }

// redact returns err, or a *RedactedError in its place when its message
// contains any of values, or any gramLen consecutive bytes of one. Whole
// values of gramLen bytes or more are replaced by "(redacted)"; if the
// message still holds any trace of a value (a shorter value, or a value
// cut short), it is withheld. refs are the names of the objects err may be
// about ("v1 Secret ns/name"); the longest found in the message names the
// object.
func redact(err error, values []string, refs []string) error {
	if err == nil || len(values) == 0 {
		return err
	}
	msg := err.Error()
	if !leaks(msg, values) {
		return err
	}
	r := &RedactedError{code: exitcode.Of(err)}
	long := make([]string, 0, len(values))
	for _, v := range values {
		if len(v) >= gramLen {
			long = append(long, v)
		}
	}
	sort.Slice(long, func(i, j int) bool { return len(long[i]) > len(long[j]) })
	replaced := msg
	for _, v := range long {
		replaced = strings.ReplaceAll(replaced, v, Redacted)
	}
	if !leaks(replaced, values) {
		r.Message = replaced
		return r
	}
	for _, ref := range refs {
		if strings.Contains(msg, ref) && len(ref) > len(r.Object) {
			r.Object = ref
		}
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		r.Reason, r.Code = string(s.Reason), s.Code
		if s.Details != nil {
			for _, c := range s.Details.Causes {
				if c.Field != "" && !leaks(c.Field, values) {
					r.Fields = append(r.Fields, c.Field)
				}
			}
		}
	}
	return r
}

// leaks reports whether msg contains a value, or for values of gramLen
// bytes or more, any gramLen consecutive bytes of one (servers may quote a
// value cut short).
func leaks(msg string, values []string) bool {
	grams := map[string]bool{}
	for i := 0; i+gramLen <= len(msg); i++ {
		grams[msg[i:i+gramLen]] = true
	}
	for _, v := range values {
		if len(v) < gramLen {
			if strings.Contains(msg, v) {
				return true
			}
			continue
		}
		for i := 0; i+gramLen <= len(v); i++ {
			if grams[v[i:i+gramLen]] {
				return true
			}
		}
	}
	return false
}
