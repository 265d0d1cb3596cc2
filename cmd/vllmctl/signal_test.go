package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// outcome is an error with the exit code of a rollout's outcome.
type outcome int

func (o outcome) Error() string { return fmt.Sprintf("outcome %d", int(o)) }
func (o outcome) ExitCode() int { return int(o) }

// TestExitCodeAfterSignal: once a signal ended the command's context, an
// error that would be 6 or 1 is 130 (interrupted), whatever it says; the
// codes of an outcome stand; without a signal nothing changes.
func TestExitCodeAfterSignal(t *testing.T) {
	// An error of a request the interrupt cut short that does not wrap
	// the cancellation (discovery's failed groups do not).
	cut := errors.New("the cluster does not serve kind Service in v1: unable to retrieve the complete list of server APIs: v1: context canceled")
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1/api", Err: errors.New("connection refused")}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", nil)
	for _, tc := range []struct {
		name     string
		ctxErr   error
		err      error
		want     int
		wantText string // on stderr
	}{
		{name: "success", ctxErr: context.Canceled, err: nil, want: 0},
		{name: "internal, interrupted", ctxErr: context.Canceled, err: cut, want: 130, wantText: "Error: the cluster does not serve kind Service"},
		{name: "network, interrupted", ctxErr: context.Canceled, err: refused, want: 130},
		{name: "API error, interrupted", ctxErr: context.Canceled, err: forbidden, want: 130},
		{name: "invalid input, interrupted", ctxErr: context.Canceled, err: newUsageError("--timeout 0s: must be positive"), want: 2},
		{name: "rolled back, interrupted", ctxErr: context.Canceled, err: outcome(3), want: 3},
		{name: "failed, interrupted", ctxErr: context.Canceled, err: outcome(4), want: 4},
		{name: "in progress, interrupted", ctxErr: context.Canceled, err: outcome(5), want: 5},
		{name: "diff's changes found, interrupted", ctxErr: context.Canceled, err: silentError{code: ExitChanges}, want: 1},
		{name: "internal, no signal", err: cut, want: 1},
		{name: "network, no signal", err: refused, want: 6},
		{name: "API error, no signal", err: forbidden, want: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			assert.Equal(t, tc.want, exitCode(&stderr, tc.ctxErr, tc.err))
			assert.Contains(t, stderr.String(), tc.wantText)
		})
	}
}
