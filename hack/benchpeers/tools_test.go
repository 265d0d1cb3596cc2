package main

import (
	"context"
	"os"
	"testing"
)

// TestExecMeasuresTheChildsOwnPeak checks that a small child's peak RSS is
// its own: the rusage of a child started by Go (vfork) reports at least
// the parent's peak, which this test process makes large first.
func TestExecMeasuresTheChildsOwnPeak(t *testing.T) {
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	self, ok := readHWM("/proc/self/status")
	if !ok {
		t.Fatal("no /proc/self/status VmHWM")
	}
	r := (&bench{env: os.Environ()}).exec(context.Background(), []string{"/bin/sh", "-c", "sleep 0.2"})
	if r.exit != 0 {
		t.Fatalf("sh exited %d: %s", r.exit, r.stderr)
	}
	if r.maxRSSKiB <= 0 || r.maxRSSKiB > 16<<10 {
		t.Fatalf("sh peaked at %d KiB; this process at %d KiB", r.maxRSSKiB, self)
	}
	_ = ballast[len(ballast)-1]
}
