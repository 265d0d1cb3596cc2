package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// TestKubeconfigFilesCapped: a kubeconfig that would be read without end
// (a device, a huge file, a directory), given by --kubeconfig or in
// $KUBECONFIG, is refused naming it (exit 2) before client-go reads it; a
// regular file, a pipe and a missing file are left to client-go.
func TestKubeconfigFilesCapped(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "config")
	require.NoError(t, os.WriteFile(small, []byte("apiVersion: v1\nkind: Config\n"), 0o600))
	huge := filepath.Join(dir, "huge")
	f, err := os.Create(huge)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(maxKubeconfigBytes+1)) // sparse
	require.NoError(t, f.Close())
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))

	for _, tc := range []struct {
		name, explicit, env, want string
	}{
		{name: "regular", explicit: small},
		{name: "missing", explicit: filepath.Join(dir, "none")},
		{name: "pipe", explicit: fifo},
		{name: "device", explicit: "/dev/zero", want: "kubeconfig /dev/zero: not a regular file"},
		{name: "directory", explicit: dir, want: "not a regular file"},
		{name: "huge", explicit: huge, want: "16777217 bytes, over the 16 MiB"},
		{name: "env list", env: small + string(filepath.ListSeparator) + "/dev/zero", want: "kubeconfig /dev/zero"},
		{name: "env fine", env: small + string(filepath.ListSeparator) + fifo},
		{name: "flag over env", explicit: small, env: "/dev/zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			err := checkKubeconfigFiles(tc.explicit)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, ExitInvalid, exitcode.Of(err))
		})
	}

	stdout, stderr, code := runRoot(t, "status", "chat", "--kubeconfig", "/dev/zero")
	assert.Equal(t, 2, code, stdout)
	assert.Contains(t, stderr, "kubeconfig /dev/zero: not a regular file")
}
