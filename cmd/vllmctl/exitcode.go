package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Exit codes of the contract (shared/design/contract.md).
const (
	ExitOK          = 0
	ExitChanges     = 1 // diff found changes; elsewhere: unexpected internal error
	ExitInternal    = 1
	ExitInvalid     = 2
	ExitRolledBack  = 3
	ExitFailed      = 4
	ExitInProgress  = 5
	ExitClusterErr  = 6
	exitInterrupted = 130
)

// ExitCoder is implemented by errors that carry their own exit code. Every
// library package returns typed errors implementing it where the code is
// not a plain internal error.
type ExitCoder interface {
	error
	ExitCode() int
}

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

// ExitCode prints err (unless it is silent) and returns the exit code for it.
func ExitCode(stderr io.Writer, err error) int {
	if err == nil {
		return ExitOK
	}
	code := classify(err)
	var s silentError
	if !errors.As(err, &s) {
		fmt.Fprintf(stderr, "Error: %v\n", err)
	}
	return code
}

func classify(err error) int {
	var ec ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return ExitClusterErr
	}
	var urlErr *url.Error
	var netErr net.Error
	if errors.As(err, &urlErr) || errors.As(err, &netErr) {
		return ExitClusterErr
	}
	if errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	return ExitInternal
}
