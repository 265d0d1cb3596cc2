// Package exitcode holds vllmctl's exit codes (docs/exit-codes.md) and the one rule that maps an error to its
// code. Errors of the library packages implement Coder where their code is
// not a plain internal error; cmd/vllmctl's main exits with Of(err).
package exitcode

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The exit codes (docs/exit-codes.md).
const (
	OK          = 0
	Changes     = 1 // diff found changes
	Internal    = 1 // any other command: an unexpected internal error
	Invalid     = 2 // invalid input: nothing applied, no record changed
	RolledBack  = 3 // rollout failed, previous good revision serving
	Failed      = 4 // rollout failed, not rolled back
	InProgress  = 5 // another operation on the release is in progress
	Cluster     = 6 // the cluster refused or could not be reached
	Interrupted = 130
)

// Coder is implemented by errors that carry their own exit code.
type Coder interface {
	error
	ExitCode() int
}

// Of returns the exit code of err: 0 for nil, its own ExitCode (the
// outermost in its chain), Interrupted for a cancelled context, Cluster for
// an API or network error, else Internal. A cancelled context is an
// interrupt, never the cluster's doing: an error whose own code is Cluster
// or Internal but that wraps context.Canceled (a request the interrupt cut
// short) is Interrupted too; the other codes (a rollout's outcome, invalid
// input) stand.
func Of(err error) int {
	if err == nil {
		return OK
	}
	canceled := errors.Is(err, context.Canceled)
	var ec Coder
	if errors.As(err, &ec) {
		code := ec.ExitCode()
		if canceled && (code == Cluster || code == Internal) {
			return Interrupted
		}
		return code
	}
	// An interrupt that cancelled a request in flight surfaces as a
	// network error: it is still an interrupt, not the cluster's doing.
	if canceled {
		return Interrupted
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return Cluster
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return Cluster
	}
	// A file's error (a write to a closed pipe, a full disk) carries a
	// syscall.Errno, which is a net.Error too: it is this machine's, not
	// the cluster's.
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return Internal
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return Cluster
	}
	return Internal
}
