package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/termout"
)

// Exit codes of vllmctl (docs/exit-codes.md).
const (
	ExitOK          = exitcode.OK
	ExitChanges     = exitcode.Changes
	ExitInternal    = exitcode.Internal
	ExitInvalid     = exitcode.Invalid
	ExitRolledBack  = exitcode.RolledBack
	ExitFailed      = exitcode.Failed
	ExitInProgress  = exitcode.InProgress
	ExitClusterErr  = exitcode.Cluster
	exitInterrupted = exitcode.Interrupted
)

// ExitCoder is implemented by errors that carry their own exit code.
type ExitCoder = exitcode.Coder

// silentError carries an exit code whose explanation has already been
// printed (for example diff's "changes found").
type silentError struct{ code int }

func (e silentError) Error() string { return fmt.Sprintf("exit status %d", e.code) }
func (e silentError) ExitCode() int { return e.code }

// usageError marks bad flags or arguments.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }
func (e usageError) ExitCode() int { return ExitInvalid }

func newUsageError(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// ExitCode prints err (unless it is silent) and returns the exit code for
// it (exitcode.Of: the one rule).
func ExitCode(stderr io.Writer, err error) int {
	if err == nil {
		return ExitOK
	}
	var s silentError
	if !errors.As(err, &s) {
		// Errors quote the cluster (API and webhook messages, failure
		// diagnoses): escaped, line by line.
		fmt.Fprintf(stderr, "Error: %s\n", termout.SanitizeText(err.Error()))
	}
	return exitcode.Of(err)
}
