package main

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/vllmctl/vllmctl/diff"
)

// openPTY opens a pseudo-terminal and returns its terminal side.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { _ = ptmx.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tty.Close() })
	return tty
}

// TestTerminalThroughTheRedactingStreams: the command's output streams
// are diff.Writers; a terminal behind one is still a terminal (colours,
// the live view), anything else is not.
func TestTerminalThroughTheRedactingStreams(t *testing.T) {
	if v, ok := os.LookupEnv("NO_COLOR"); ok {
		require.NoError(t, os.Unsetenv("NO_COLOR"))
		t.Cleanup(func() { _ = os.Setenv("NO_COLOR", v) })
	}
	tty := openPTY(t)
	red := diff.NewRedactor()
	assert.True(t, colorOutput(tty))
	assert.True(t, colorOutput(diff.NewWriter(tty, red)), "a terminal behind the redacting writer")
	assert.True(t, colorOutput(diff.NewWriter(diff.NewWriter(tty, red), red)))
	assert.False(t, colorOutput(diff.NewWriter(&bytes.Buffer{}, red)))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	assert.False(t, colorOutput(diff.NewWriter(w, red)), "a pipe")
}
