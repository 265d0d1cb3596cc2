package exitcode_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

type coded struct{ code int }

func (c coded) Error() string { return "coded" }
func (c coded) ExitCode() int { return c.code }

// codedCause carries its own code and wraps its cause, as
// cluster.UnknownKindError (6) wraps the RESTMapper's error.
type codedCause struct {
	code int
	err  error
}

func (c codedCause) Error() string { return "coded: " + c.err.Error() }
func (c codedCause) Unwrap() error { return c.err }
func (c codedCause) ExitCode() int { return c.code }

// cancelledRequest is what a request in flight returns when its context
// is cancelled.
var cancelledRequest = &url.Error{Op: "Get", URL: "https://127.0.0.1:1/api", Err: context.Canceled}

func TestOf(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, exitcode.OK},
		{"own code, wrapped", fmt.Errorf("release x: %w", coded{exitcode.InProgress}), exitcode.InProgress},
		{"own code wins over an API error inside", fmt.Errorf("%w: %w", coded{exitcode.Invalid}, apierrors.NewForbidden(schema.GroupResource{}, "x", nil)), exitcode.Invalid},
		{"API error", fmt.Errorf("apply: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "deployments"}, "x", nil)), exitcode.Cluster},
		{"network error", &url.Error{Op: "Get", URL: "https://127.0.0.1:1", Err: errors.New("connection refused")}, exitcode.Cluster},
		{"interrupted", fmt.Errorf("wait: %w", context.Canceled), exitcode.Interrupted},
		{"interrupted mid-request", fmt.Errorf("create Secret: %w", &url.Error{Op: "Post", URL: "https://127.0.0.1:1", Err: context.Canceled}), exitcode.Interrupted},
		{"anything else", errors.New("boom"), exitcode.Internal},
		{"connection refused", &url.Error{Op: "Get", URL: "https://127.0.0.1:1", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, exitcode.Cluster},
		{"a net.Error alone", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, exitcode.Cluster},
		// A syscall.Errno is a net.Error; on a file it is not the cluster's.
		{"output to a closed pipe", fmt.Errorf("write progress: %w", &fs.PathError{Op: "write", Path: "/dev/stderr", Err: syscall.EPIPE}), exitcode.Internal},
		{"a full disk", &fs.PathError{Op: "write", Path: "/tmp/result.json", Err: syscall.ENOSPC}, exitcode.Internal},

		// A cancelled context is an interrupt, never the cluster refusing.
		{"kind not served, discovery cancelled", fmt.Errorf("apply: %w", codedCause{exitcode.Cluster, cancelledRequest}), exitcode.Interrupted},
		{"own internal code, cancelled", codedCause{exitcode.Internal, fmt.Errorf("read: %w", context.Canceled)}, exitcode.Interrupted},
		{"API error and a cancelled request", errors.Join(apierrors.NewForbidden(schema.GroupResource{}, "x", nil), cancelledRequest), exitcode.Interrupted},
		{"own cluster code, deadline", codedCause{exitcode.Cluster, context.DeadlineExceeded}, exitcode.Cluster},
		{"rolled back, cancelled", codedCause{exitcode.RolledBack, context.Canceled}, exitcode.RolledBack},
		{"failed, cancelled", codedCause{exitcode.Failed, context.Canceled}, exitcode.Failed},
		{"in progress, cancelled", codedCause{exitcode.InProgress, context.Canceled}, exitcode.InProgress},
		{"invalid, cancelled", codedCause{exitcode.Invalid, context.Canceled}, exitcode.Invalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, exitcode.Of(tc.err))
		})
	}
}
