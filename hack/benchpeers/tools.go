// tools.go holds the running of the tools as child processes: measured runs, rusage, reruns.

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	kwait "k8s.io/apimachinery/pkg/util/wait"
)

// ---------------------------------------------------------------------------
// Running tools.

// step is one command of a measured run: its arguments and the exit codes
// it may end with (0 when none are given).
type step struct {
	argv []string
	ok   []int
}

func cmd(argv ...string) step { return step{argv: argv} }

func (s step) expect(codes ...int) step { s.ok = codes; return s }

// result is one process's outcome.
type result struct {
	exit           int
	stdout, stderr []byte
	wall, cpu      time.Duration
	maxRSSKiB      int64
}

// exec runs argv as a child process in the tools' environment.
func (b *bench) exec(ctx context.Context, argv []string) result {
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = b.env
	c.Dir = b.dir
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	start := time.Now()
	err := c.Start()
	var hwm int64
	if err == nil {
		stop := make(chan struct{})
		sampled := make(chan int64)
		go func() { sampled <- sampleHWM(c.Process.Pid, stop) }()
		err = c.Wait()
		close(stop)
		hwm = <-sampled
	}
	r := result{wall: time.Since(start), stdout: out.Bytes(), stderr: errOut.Bytes()}
	if c.ProcessState != nil {
		r.exit = c.ProcessState.ExitCode()
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			// ru_maxrss is not the child's own peak: Go starts a child
			// with vfork (CLONE_VM), and at exec the kernel records the
			// peak of the memory it leaves, which is the parent's, so a
			// small tool would show this benchmark's own RSS. The peak
			// comes from sampling the child's VmHWM; rusage only when no
			// sample was taken.
			r.maxRSSKiB = ru.Maxrss // KiB on Linux
			if hwm > 0 {
				r.maxRSSKiB = hwm
			}
			r.cpu = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
		}
	} else if err != nil {
		r.exit = -1
		r.stderr = append(r.stderr, []byte(err.Error())...)
	}
	return r
}

// sampleHWM reads the peak resident set size (VmHWM, KiB) of process pid
// every 5 ms until stop is closed or the process is gone, and returns the
// highest value read (0: none). VmHWM only grows, so what the sampling misses
// is the growth in the process's last milliseconds.
func sampleHWM(pid int, stop <-chan struct{}) int64 {
	path := fmt.Sprintf("/proc/%d/status", pid)
	var hwm int64
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if v, ok := readHWM(path); ok {
			hwm = max(hwm, v)
		}
		select {
		case <-stop:
			return hwm
		case <-t.C:
		}
	}
}

// readHWM returns the VmHWM line of a /proc/PID/status file, in KiB.
func readHWM(path string) (int64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kib); err == nil {
				return kib, true
			}
		}
	}
	return 0, false
}

// tail is the last lines of out, for error messages.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// run is the outcome of one measured run of a tool: one or more
// processes, back to back.
type run struct {
	Seconds    float64 `json:"seconds"`
	Requests   int64   `json:"requests"`
	Watches    int64   `json:"watches"`
	BytesRead  int64   `json:"bytesRead"`
	ExitCode   int     `json:"exitCode"`
	MaxRSSMiB  float64 `json:"maxRSSMiB"`
	CPUSeconds float64 `json:"cpuSeconds"`
	Note       string  `json:"note,omitempty"`
	// ToolSeconds (process start to exit), Outcome and Stuck: scenarios
	// measuring a recovery, whose Seconds end when the cluster recovered
	// (a stuck run: the scenario's limit, a lower bound).
	ToolSeconds float64 `json:"toolSeconds,omitempty"`
	Outcome     string  `json:"outcome,omitempty"`
	Stuck       bool    `json:"stuck,omitempty"`
	Error       string  `json:"error,omitempty"`
	// PerTarget: the fleet scenarios' requests of each target (its own
	// proxy), by target name.
	PerTarget map[string]int64 `json:"requestsPerTarget,omitempty"`
	byKey     map[string]int   // requests by method and path
	stdout    []byte           // of the last step
}

// measure runs steps back to back with the proxy's counters reset first:
// the wall time is from the first start to the last exit, the peak RSS
// the largest of the steps', the CPU time their sum.
func (b *bench) measure(ctx context.Context, steps ...step) (run, error) {
	b.proxy.reset()
	var r run
	var rss int64
	var cpu time.Duration
	start := time.Now()
	for _, s := range steps {
		res := b.exec(ctx, s.argv)
		rss = max(rss, res.maxRSSKiB)
		cpu += res.cpu
		r.ExitCode, r.stdout = res.exit, res.stdout
		ok := s.ok
		if len(ok) == 0 {
			ok = []int{0}
		}
		if !slices.Contains(ok, res.exit) {
			r.Seconds = time.Since(start).Seconds()
			return r, fmt.Errorf("%s: exit %d, expected %v:\n%s%s", strings.Join(shortArgv(s.argv), " "), res.exit, ok,
				tail(res.stdout, 5), tail(res.stderr, 15))
		}
	}
	r.Seconds = time.Since(start).Seconds()
	c := b.proxy.take()
	r.Requests, r.Watches, r.BytesRead, r.byKey = c.requests, c.watches, c.bytes, c.byKey
	r.MaxRSSMiB = float64(rss) / 1024
	r.CPUSeconds = cpu.Seconds()
	return r, ctx.Err()
}

// setup runs steps unmeasured; any exit but 0 is an error.
func (b *bench) setup(ctx context.Context, steps ...step) error {
	for _, s := range steps {
		if res := b.exec(ctx, s.argv); res.exit != 0 {
			return fmt.Errorf("setup: %s: exit %d:\n%s", strings.Join(shortArgv(s.argv), " "), res.exit, tail(res.stderr, 15))
		}
	}
	return ctx.Err()
}

func shortArgv(argv []string) []string {
	out := slices.Clone(argv)
	out[0] = filepath.Base(out[0])
	return out
}

// apiServerStart is the API server's process_start_time_seconds: other
// users of the shared local cluster restart it, which re-establishes every
// watch and fails requests in flight.
func (b *bench) apiServerStart(ctx context.Context) string {
	var start string
	_ = kwait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		raw, err := b.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "process_start_time_seconds "); ok {
				start = v
				return true, nil
			}
		}
		return true, nil
	})
	return start
}

// attempt runs fn (one run, its setup included) and runs it again, up to
// twice, when the API server restarted meanwhile.
func (b *bench) attempt(ctx context.Context, label string, fn func() (run, error)) (run, error) {
	for i := 1; ; i++ {
		before := b.apiServerStart(ctx)
		r, err := fn()
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		if after := b.apiServerStart(ctx); after == before || i == 3 {
			if after != before {
				r.Note = "the API server restarted during the run"
			}
			return r, err
		}
		progress("%s: the API server restarted during the run (another user of the cluster?); running it again", label)
	}
}
