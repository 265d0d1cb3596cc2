//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release/storage"
)

// Signals: SIGINT, SIGTERM and SIGHUP end a command
// the same way. TestFaultSignals (faults_test.go) sends each in every phase
// of an upgrade with rollback on failure; these cases add what it leaves
// open: the exact code of an interrupt before anything is applied, and an
// interrupt mid-rollout with rollback disabled.

// terminating are the signals that end a vllmctl command cleanly.
var terminating = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// isDiscovery matches the API discovery requests (the RESTMapper's).
func isDiscovery(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.URL.Path == "/api" || r.URL.Path == "/apis")
}

// TestSignalsDuringDiscovery: a deploy or a diff signalled while its API
// discovery is in flight exits 130 (interrupted), not 6: the cancelled
// discovery is no kind "the cluster does not serve". The deploy applied
// and recorded nothing, and left no lock.
func TestSignalsDuringDiscovery(t *testing.T) {
	for _, sig := range terminating {
		for _, command := range []string{"deploy", "diff"} {
			t.Run(fmt.Sprintf("%s/%s", command, sig), func(t *testing.T) {
				t.Parallel()
				f := newRelFixture(t)
				proxy := f.startHoldProxy(t, isDiscovery, false)
				p := f.via(proxy).start(t, command, relName, relChart, "--set", "greeting=interrupted")
				select {
				case <-proxy.held:
				case <-time.After(60 * time.Second):
					require.FailNow(t, "the proxy held no discovery request", "stderr:\n%s", p.stderr.String())
				}
				require.NoError(t, p.cmd.Process.Signal(sig))
				r := p.wait(t)
				t.Logf("%s %s during discovery: exit %d: %s", command, sig, r.code, lastLine(r.stderr))

				assert.Equal(t, 130, r.code, "%s", r)
				assert.NotContains(t, r.stderr, "does not serve kind")
				assert.Empty(t, r.stdout, "no result")
				assert.Empty(t, f.history(t), "no record written")
			})
		}
	}
}

// TestSignalsMidRolloutNoRollback: a deploy with --no-rollback signalled
// while it waits for a slow rollout exits 130: its revision is recorded
// failed (Interrupted), revision 1 stays deployed, no lock is left, and
// the next deploy works. SIGHUP no longer kills it (exit 129) with its
// pending record left behind.
func TestSignalsMidRolloutNoRollback(t *testing.T) {
	for _, sig := range terminating {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			f := newRelFixture(t)
			f.faultInstall(t)

			p := f.start(t, faultDeployArgs("--set", "greeting=interrupted", "--set", "readyDelay=60s", "--no-rollback", "-o", "json")...)
			p.waitProgress(t, relName+"#2 replicaset:", "deployment/"+relName+": ")
			require.NotContains(t, p.stderr.String(), relName+"#2 done:", "the rollout is under way when the signal is sent")
			require.NoError(t, p.cmd.Process.Signal(sig))
			r := p.wait(t)
			t.Logf("deploy --no-rollback %s mid-rollout: exit %d: %s", sig, r.code, lastLine(r.stderr))

			require.Equal(t, 130, r.code, "%s", r)
			res := result(t, r)
			assert.Equal(t, 2, res.Revision)
			assert.Equal(t, storage.StatusFailed, res.Status)
			assert.Zero(t, res.RolledBackTo, "not rolled back")
			if assert.NotNil(t, res.Failure) {
				assert.Equal(t, "Interrupted", res.Failure.Reason)
			}
			assert.Empty(t, pendingRecords(t, f), "no lock left behind")
			assert.Equal(t, []storage.Status{storage.StatusDeployed, storage.StatusFailed}, statuses(f.history(t)))
			f.assertConsistent(t, 1)
			f.assertNextDeploy(t)
		})
	}
}

// TestClosedPipe: a deploy whose stdout and stderr are a pipe nobody reads
// any more (vllmctl deploy ... 2>&1 | head) is not killed by SIGPIPE with
// its pending record and lock left behind, as Go's default would: it
// finishes. A healthy upgrade whose reader is gone from the start is
// deployed (exit 1: only its output failed, not 6: the cluster did
// nothing wrong); a crashing one whose reader goes away mid-rollout is
// still rolled back (exit 3). Either way no lock is left and the next
// deploy works.
func TestClosedPipe(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		closeWhen string // a line after which the reader goes away; "": at once
		code      int
		want      []storage.Status
	}{
		{"healthy upgrade, reader gone at once", []string{"--set", "greeting=piped", "--set", "readyDelay=3s"}, "", 1,
			[]storage.Status{storage.StatusSuperseded, storage.StatusDeployed}},
		{"crashing upgrade, reader gone mid-rollout", []string{"--set", "greeting=piped", "--set", "image=example.com/vllm:crash"}, "deployment/" + relName + ": ", 3,
			[]storage.Status{storage.StatusSuperseded, storage.StatusFailed, storage.StatusDeployed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newRelFixture(t)
			f.faultInstall(t)

			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			cmd, _, _ := f.command(ctx, faultDeployArgs(tc.args...)...)
			r, w, err := os.Pipe()
			require.NoError(t, err)
			cmd.Stdout, cmd.Stderr = w, w
			read := make(chan string, 1)
			if tc.closeWhen == "" {
				require.NoError(t, r.Close())
				read <- ""
			} else {
				go func() {
					var seen strings.Builder
					sc := bufio.NewScanner(r)
					for sc.Scan() {
						seen.WriteString(sc.Text() + "\n")
						if strings.Contains(sc.Text(), tc.closeWhen) {
							break
						}
					}
					_ = r.Close()
					read <- seen.String()
				}()
			}
			require.NoError(t, cmd.Start())
			require.NoError(t, w.Close())
			code := exitCodeOf(t, cmd.Wait())
			seen := <-read
			t.Logf("%s: exit %d after the reader read:\n%s", tc.name, code, seen)
			if tc.closeWhen != "" {
				require.Contains(t, seen, tc.closeWhen, "the reader went away mid-rollout")
				require.NotContains(t, seen, relName+"#2 done:", "before the outcome")
			}

			assert.Equal(t, tc.code, code, "not killed by SIGPIPE (141), not 6")
			assert.Equal(t, tc.want, statuses(f.history(t)))
			assert.Empty(t, pendingRecords(t, f), "no lock left behind")
			f.assertNextDeploy(t)
		})
	}
}
