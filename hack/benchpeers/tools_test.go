package main

import (
	"context"
	"os"
	"slices"
	"strings"
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

// TestFinishDirect: without the proxy (-direct) the table shows no
// request counts nor a requests ratio (nothing counted them), but the
// wall times and their ratio; through the proxy it shows both.
func TestFinishDirect(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(map[bool]string{false: "proxy", true: "direct"}[direct], func(t *testing.T) {
			var out strings.Builder
			b := &bench{o: options{direct: direct}, out: &out, report: report{Scenarios: map[string]map[string]*stats{}, Descriptions: map[string]string{}}}
			s := newScenario("large-upgrade", "an upgrade", "vllmctl", "kubectl")
			s.runs["vllmctl"] = []run{{Seconds: 40, Requests: 37, Watches: 6}}
			s.runs["kubectl"] = []run{{Seconds: 38, Requests: 6, Watches: 1}}
			b.finish(s)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 4 {
				t.Fatalf("table:\n%s", out.String())
			}
			kubectl := strings.Fields(lines[3])
			if got := kubectl[len(kubectl)-2]; got != "1.05x" {
				t.Errorf("wall ratio %q, want 1.05x:\n%s", got, out.String())
			}
			want := []string{"6", "1", "6.17x"}
			if direct {
				want = []string{"-", "-", "-"}
			}
			if got := []string{kubectl[5], kubectl[6], kubectl[len(kubectl)-1]}; !slices.Equal(got, want) {
				t.Errorf("requests, watches, requests ratio %q, want %q:\n%s", got, want, out.String())
			}
			_, hasRatio := b.report.Scenarios["large-upgrade"]["kubectl"].VllmctlRatio["requests"]
			if hasRatio == direct {
				t.Errorf("requests ratio in the report: %v with direct %v", hasRatio, direct)
			}
		})
	}
}
