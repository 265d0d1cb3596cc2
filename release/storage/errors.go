package storage

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// ErrExists is matched (errors.Is) by the error Store.Create returns when the
// revision's record already exists.
var ErrExists = errors.New("release record already exists")

// ErrNoDeployed is matched (errors.Is) by the error Deployed returns when no
// revision of the release is deployed.
var ErrNoDeployed = errors.New("no deployed revision")

// InvalidNameError reports a release name that cannot be used (exit code 2).
type InvalidNameError struct {
	Name    string
	Reasons []string
}

func (e *InvalidNameError) Error() string {
	return fmt.Sprintf("invalid release name %q: %s", e.Name, strings.Join(e.Reasons, "; "))
}

// ExitCode is 2: invalid input.
func (e *InvalidNameError) ExitCode() int { return exitcode.Invalid }

// NotFoundError reports a release, or a revision of it, that has no record
// (exit code 2). Existing lists the revisions that do exist.
type NotFoundError struct {
	Namespace string
	Name      string
	// Revision is the revision asked for; 0 when the release was asked for.
	Revision int
	Existing []int
}

func (e *NotFoundError) Error() string {
	if e.Revision == 0 || len(e.Existing) == 0 {
		return fmt.Sprintf("release %s not found in namespace %s", e.Name, e.Namespace)
	}
	revs := make([]string, len(e.Existing))
	for i, r := range e.Existing {
		revs[i] = strconv.Itoa(r)
	}
	return fmt.Sprintf("revision %d of release %s not found; revisions: %s",
		e.Revision, e.Name, strings.Join(revs, ", "))
}

// ExitCode is 2: invalid input (unknown release or revision).
func (e *NotFoundError) ExitCode() int { return exitcode.Invalid }

// ConflictError reports an Update of a record that changed since it was
// read: typically another operation took the release's lock over (exit
// code 5). Err is the underlying error, if any.
type ConflictError struct {
	Namespace string
	Name      string
	Revision  int
	Err       error
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("release %s revision %d (Secret %s/%s) was changed by another operation since it was read (lock taken over?)",
		e.Name, e.Revision, e.Namespace, SecretName(e.Name, e.Revision))
}

// Unwrap returns the underlying error.
func (e *ConflictError) Unwrap() error { return e.Err }

// ExitCode is 5: another operation on this release is in progress.
func (e *ConflictError) ExitCode() int { return exitcode.InProgress }

// LockedError reports that another operation holds the release's lock: a
// pending record exists (exit code 5).
type LockedError struct {
	Namespace string
	Name      string
	// Revision, Status, Holder and Description describe the pending record
	// holding the lock.
	Revision    int
	Status      Status
	Holder      string
	Description string
	// Age is how long ago the pending record was last written.
	Age time.Duration
	// Timeout is the pending record's own lease (Release.Lease): an
	// operation that takes locks over does so once it has watched the
	// record go unrenewed that long; 0 when only a forced unlock can take
	// it over.
	Timeout time.Duration
	// NoTakeover names the refused operation when it never takes a lock
	// over (wait): the message then says to run it again instead.
	NoTakeover Operation
}

// Refusing marks e as the refusal of op, an operation that takes no lock
// and never takes one over.
func (e *LockedError) Refusing(op Operation) *LockedError {
	e.NoTakeover = op
	return e
}

func (e *LockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "release %s in namespace %s is locked by another operation: revision %d is %s",
		e.Name, e.Namespace, e.Revision, e.Status)
	if e.Description != "" {
		fmt.Fprintf(&b, " (%s)", e.Description)
	}
	holder := e.Holder
	if holder == "" {
		holder = "unknown holder"
	}
	fmt.Fprintf(&b, ", held by %s for %s", holder, e.Age.Truncate(time.Second))
	switch {
	case e.NoTakeover != "":
		fmt.Fprintf(&b, "; %s takes no lock and never takes one over: run it again once that operation ends, or see `vllmctl history %s -n %s`",
			e.NoTakeover, e.Name, e.Namespace)
		if e.Timeout > 0 {
			fmt.Fprintf(&b, " (deploy, rollback and uninstall take the lock over once they watched it unrenewed for its lease of %s)", e.Timeout)
		}
	case e.Timeout > 0:
		fmt.Fprintf(&b, "; it is taken over once watched unrenewed for its lease of %s, or now with --force-unlock", e.Timeout)
	default:
		b.WriteString("; use --force-unlock to take it over")
	}
	return b.String()
}

// ExitCode is 5: another operation on this release is in progress.
func (e *LockedError) ExitCode() int { return exitcode.InProgress }

// UnreadableError reports a release record whose data cannot be decoded
// (corrupted, or written by something else). It never blocks the view of
// the other records (list, history); an operation that needs the release's
// history refuses with it before writing any record (exit code 6).
type UnreadableError struct {
	Namespace string
	Name      string
	Revision  int
	Err       error
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("release %s revision %d: record Secret %s/%s is unreadable: %v "+
		"(repair: vllmctl history %s -n %s --repair marks it, or delete the Secret)",
		e.Name, e.Revision, e.Namespace, SecretName(e.Name, e.Revision), e.Err, e.Name, e.Namespace)
}

// Unwrap returns the decode error.
func (e *UnreadableError) Unwrap() error { return e.Err }

// ExitCode is 6: the cluster holds a record vllmctl cannot use.
func (e *UnreadableError) ExitCode() int { return exitcode.Cluster }

// HandedOverError: the release was given back to Helm (`vllmctl
// handover`); vllmctl does not act on it until it is adopted again (exit
// code 2).
type HandedOverError struct {
	Namespace, Name string
	Revision        int
}

func (e *HandedOverError) Error() string {
	return fmt.Sprintf("release %s in namespace %s was handed over to Helm at revision %d: Helm manages it now (`vllmctl adopt %s` takes it back)",
		e.Name, e.Namespace, e.Revision, e.Name)
}

// ExitCode is 2: invalid input, nothing changed.
func (e *HandedOverError) ExitCode() int { return exitcode.Invalid }

// CheckNotHandedOver returns a *HandedOverError when one of the records of
// release name in namespace ns is handed-over.
func CheckNotHandedOver(entries []Entry, ns, name string) error {
	for _, e := range entries {
		if e.Status == StatusHandedOver {
			return &HandedOverError{Namespace: ns, Name: name, Revision: e.Revision}
		}
	}
	return nil
}
