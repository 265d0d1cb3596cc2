//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The fault suite: faults on the local control plane and on the
// vllmctl process itself. Every case checks that no release record is lost
// (the history is complete and consistent: exactly one deployed revision,
// no pending record, every revision number present unless deleted on
// purpose) and that the next deploy works (exit 0, deployed, the cluster
// serving its ReplicaSet). The cases deploy the small test chart relChart
// (one replica, no GPU): they fit next to each other and next to the
// other tests on the shared cluster. The etcd case is in
// fault_etcd_stop_test.go, run last by TestDestructiveFaults
// (destructive_test.go).

// faultDeployArgs are the arguments of a deploy of relChart as relName.
func faultDeployArgs(args ...string) []string {
	return append([]string{"deploy", relName, relChart, "--progress", "plain", "--timeout", "2m"}, args...)
}

// faultInstall deploys revision 1 of relChart and returns its result.
func (f *relFixture) faultInstall(t *testing.T, args ...string) *release.Result {
	t.Helper()
	r := f.deploy(t, append(args, "-o", "json")...)
	require.Equal(t, 0, r.code, "revision 1\n%s", r)
	res := result(t, r)
	require.Equal(t, 1, res.Revision)
	require.Equal(t, storage.StatusDeployed, res.Status)
	require.Len(t, res.ReplicaSets, 1)
	return res
}

// deploymentGeneration returns the metadata.generation of the release's
// Deployment: unchanged when nothing was applied to it.
func (f *relFixture) deploymentGeneration(t *testing.T) int64 {
	t.Helper()
	d, err := f.client.AppsV1().Deployments(f.namespace).Get(context.Background(), relName, metav1.GetOptions{})
	require.NoError(t, err)
	return d.Generation
}

// assertConsistent checks the release's records after a fault: no pending
// record, exactly one deployed revision (deployed), and every revision
// number from 1 to the highest present, except gone (records deleted on
// purpose). `vllmctl history` lists them all. It returns the records.
func (f *relFixture) assertConsistent(t *testing.T, deployed int, gone ...int) []*storage.Release {
	t.Helper()
	revs := f.history(t)
	require.NotEmpty(t, revs, "records")
	have := map[int]*storage.Release{}
	var deployedRevs []int
	for _, r := range revs {
		have[r.Revision] = r
		assert.False(t, r.Status.IsPending(), "revision %d is %s: a lock left behind", r.Revision, r.Status)
		if r.Status == storage.StatusDeployed {
			deployedRevs = append(deployedRevs, r.Revision)
		}
	}
	for n := 1; n <= revs[len(revs)-1].Revision; n++ {
		if slices.Contains(gone, n) {
			assert.Nil(t, have[n], "revision %d was deleted", n)
		} else {
			assert.NotNil(t, have[n], "revision %d is recorded", n)
		}
	}
	assert.Equal(t, []int{deployed}, deployedRevs, "exactly one deployed revision; statuses %v", statuses(revs))
	h := f.run(t, "history", relName)
	assert.Equal(t, 0, h.code, "%s", h)
	assert.Equal(t, len(revs)+1, len(strings.Split(strings.TrimSpace(h.stdout), "\n")), "history lists every record:\n%s", h.stdout)
	return revs
}

// assertServes waits until the Deployment of relChart (1 replica) has
// rolled out to rs and only rs (see assertServingWith).
func (f *relFixture) assertServes(t *testing.T, rs storage.ReplicaSetRef) {
	t.Helper()
	f.assertServingWith(t, rs, 1, "app="+relName)
}

// assertNextDeploy runs a healthy deploy after a fault (a new image and
// greeting): exit 0, the revision after the highest recorded one,
// deployed, its ReplicaSet serving, its ConfigMap applied, and the records
// consistent (gone: revisions deleted on purpose). It returns the result.
func (f *relFixture) assertNextDeploy(t *testing.T, gone ...int) *release.Result {
	t.Helper()
	before := f.history(t)
	next := 1
	if len(before) > 0 {
		next = before[len(before)-1].Revision + 1
	}
	tag := "next-" + rand.String(5)
	r := f.deploy(t, "--set", "image=example.com/vllm:"+tag, "--set", "greeting="+tag, "-o", "json")
	require.Equal(t, 0, r.code, "the next deploy works\n%s", r)
	res := result(t, r)
	assert.Equal(t, next, res.Revision)
	assert.Equal(t, storage.StatusDeployed, res.Status)
	require.Len(t, res.ReplicaSets, 1)
	f.assertServes(t, res.ReplicaSets[0])
	assert.Equal(t, tag, f.configMapData(t, relName+"-config")["greeting"])
	f.assertConsistent(t, res.Revision, gone...)
	return res
}

// holdProxy is a reverse proxy in front of the API server for one vllmctl
// process (its kubeconfig: plain HTTP, no credentials; the proxy adds the
// test's). It holds the first request that matches, before forwarding it
// or once the API server has answered it, until the client gives up on it
// (or holdMax passes), and closes held when it starts holding.
type holdProxy struct {
	kubeconfig string
	held       chan struct{}
}

const holdMax = 30 * time.Second

type heldRequest struct{}

func (f *relFixture) startHoldProxy(t *testing.T, match func(*http.Request) bool, answered bool) *holdProxy {
	t.Helper()
	target, err := url.Parse(f.cfg.Host)
	require.NoError(t, err)
	transport, err := rest.TransportFor(f.cfg)
	require.NoError(t, err)
	p := &holdProxy{held: make(chan struct{})}
	var taken atomic.Bool
	hold := func(ctx context.Context) {
		close(p.held)
		select {
		case <-ctx.Done():
		case <-time.After(holdMax):
		}
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del("Authorization")
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Context().Value(heldRequest{}) != nil {
				hold(resp.Request.Context())
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if match(r) && taken.CompareAndSwap(false, true) {
			if !answered {
				hold(r.Context())
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), heldRequest{}, true))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.kubeconfig = filepath.Join(t.TempDir(), "proxy-kubeconfig")
	require.NoError(t, os.WriteFile(p.kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster:
    server: %s
users:
- name: proxy
  user: {}
contexts:
- name: proxy
  context:
    cluster: proxy
    user: proxy
current-context: proxy
`, srv.URL)), 0o600))
	return p
}

// via returns the fixture with vllmctl talking to the API server through p.
func (f *relFixture) via(p *holdProxy) *relFixture {
	g := *f
	g.kubeconfig = p.kubeconfig
	return &g
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// signalPhase is a phase of a deploy (an upgrade of revision 1) in which
// the deploy is sent SIGTERM, SIGINT or SIGHUP.
type signalPhase struct {
	name string
	// install are revision 1's values.
	install []string
	// args are the signalled deploy's (besides -o json).
	args []string
	// match, when set, selects the API request during which the signal is
	// sent, held by a proxy: before it is forwarded, or (answered) once the
	// API server answered it, before the answer reaches vllmctl.
	match    func(*http.Request) bool
	answered bool
	// marks are the progress lines after which the signal is sent
	// (without match).
	marks []string
	// notYet is a progress line that must not have been printed when the
	// signal is sent (the phase is still under way).
	notYet string
	// check checks the signalled deploy and the records; it returns the
	// deployed revision.
	check func(t *testing.T, f *relFixture, rev1 *release.Result, gen1 int64, r relRun) int
}

// nothingApplied checks a deploy interrupted before it applied anything:
// no result, revision 1 still deployed and serving, its Deployment and
// ConfigMap untouched.
func nothingApplied(t *testing.T, f *relFixture, rev1 *release.Result, gen1 int64, r relRun) {
	t.Helper()
	assert.NotContains(t, []int{0, 3, 4, 5}, r.code, "an interrupted deploy that applied nothing: %s", r)
	assert.Empty(t, r.stdout, "no result document")
	assert.NotContains(t, r.stderr, relName+"#2 apply:")
	assert.Equal(t, gen1, f.deploymentGeneration(t), "the Deployment was not changed")
	assert.Equal(t, "hello", f.configMapData(t, relName+"-config")["greeting"], "the ConfigMap was not changed")
	f.assertServes(t, rev1.ReplicaSets[0])
}

// interruptedRolledBack checks a deploy interrupted after its apply: the
// new revision recorded failed (Interrupted) and rolled back to revision
// 1, which serves: exit 3.
func interruptedRolledBack(reason string) func(t *testing.T, f *relFixture, rev1 *release.Result, _ int64, r relRun) int {
	return func(t *testing.T, f *relFixture, rev1 *release.Result, _ int64, r relRun) int {
		t.Helper()
		require.Equal(t, 3, r.code, "%s", r)
		res := result(t, r)
		assert.Equal(t, 2, res.Revision)
		assert.Equal(t, storage.StatusFailed, res.Status)
		assert.Equal(t, 1, res.RolledBackTo)
		if assert.NotNil(t, res.Failure) {
			assert.Equal(t, reason, res.Failure.Reason)
		}
		assert.Contains(t, r.stderr, relName+"#3 done: deployed: Rollback to 1")
		f.assertRolledBack(t, rev1, reason)
		f.assertServes(t, rev1.ReplicaSets[0])
		return 3
	}
}

var signalPhases = []signalPhase{
	{
		// Right after the start, before any "lock:" line (reading the
		// records, render, preflight, dry-run diff): the first API request
		// the deploy makes is held until the signal ends it.
		name:  "render",
		args:  []string{"--set", "greeting=interrupted", "--set", "readyDelay=2s"},
		match: func(*http.Request) bool { return true },
		check: func(t *testing.T, f *relFixture, rev1 *release.Result, gen1 int64, r relRun) int {
			nothingApplied(t, f, rev1, gen1, r)
			assert.NotContains(t, r.stderr, "lock:")
			assert.Equal(t, []storage.Status{storage.StatusDeployed}, statuses(f.history(t)), "no record written")
			return 1
		},
	},
	{
		// While the lock is taken: the pending record's create reached the
		// API server, its answer is held until the signal ends the request.
		name: "lock",
		args: []string{"--set", "greeting=interrupted", "--set", "readyDelay=2s"},
		match: func(r *http.Request) bool {
			return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/secrets")
		},
		answered: true,
		check: func(t *testing.T, f *relFixture, rev1 *release.Result, gen1 int64, r relRun) int {
			nothingApplied(t, f, rev1, gen1, r)
			assert.Empty(t, pendingRecords(t, f), "an interrupted deploy leaves no lock behind")
			return 1
		},
	},
	{
		// At the first "apply:" line (the objects are applied; the
		// ReplicaSet not yet recorded), the rollout slow.
		name:   "apply",
		args:   []string{"--set", "greeting=interrupted", "--set", "readyDelay=60s"},
		marks:  []string{relName + "#2 apply:"},
		notYet: relName + "#2 done:",
		check:  interruptedRolledBack("Interrupted"),
	},
	{
		// While the ReplicaSet is recorded (between the apply and the
		// wait): the first update of revision 2's record reached the API
		// server, its answer is held until the signal ends the request.
		// The apply phase above lands here now and then.
		name: "record",
		args: []string{"--set", "greeting=interrupted", "--set", "readyDelay=60s"},
		match: func(r *http.Request) bool {
			return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/secrets/"+storage.SecretName(relName, 2))
		},
		answered: true,
		check:    interruptedRolledBack("Interrupted"),
	},
	{
		// Waiting on a slow rollout: after the ReplicaSet is recorded and
		// the watcher reports.
		name:   "wait",
		args:   []string{"--set", "greeting=interrupted", "--set", "readyDelay=60s"},
		marks:  []string{relName + "#2 replicaset:", "deployment/" + relName + ": "},
		notYet: relName + "#2 done:",
		check:  interruptedRolledBack("Interrupted"),
	},
	{
		// During the automatic rollback of a crash-looping upgrade. The
		// upgrade replaces the pod (maxSurge 0, maxUnavailable 1), so the
		// rescue waits for a new pod of revision 1 (ready delay 5s): the
		// signal lands while it runs, and must not stop it.
		name:    "rollback",
		install: []string{"--set", "readyDelay=5s"},
		args: []string{"--set", "image=example.com/vllm:crash", "--set", "readyDelay=5s",
			"--max-surge", "0", "--max-unavailable", "1"},
		marks:  []string{relName + "#2 rollback: started"},
		notYet: relName + "#3 done:",
		check:  interruptedRolledBack("CrashLoopBackOff"),
	},
}

// TestFaultSignals: SIGTERM, SIGINT and SIGHUP in each phase of an upgrade. Before
// the apply nothing is applied and no lock is left; from the apply on the
// upgrade is rolled back (exit 3, revision 1 serving), also when the
// signal comes during the rollback itself. The next deploy works.
func TestFaultSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		for _, ph := range signalPhases {
			t.Run(fmt.Sprintf("%s/%s", ph.name, sig), func(t *testing.T) {
				t.Parallel()
				f := newRelFixture(t)
				rev1 := f.faultInstall(t, ph.install...)
				gen1 := f.deploymentGeneration(t)

				args := faultDeployArgs(append(ph.args, "-o", "json")...)
				var p *running
				if ph.match != nil {
					proxy := f.startHoldProxy(t, ph.match, ph.answered)
					p = f.via(proxy).start(t, args...)
					select {
					case <-proxy.held:
					case <-time.After(60 * time.Second):
						require.FailNow(t, "the proxy held no request", "stderr:\n%s", p.stderr.String())
					}
				} else {
					p = f.start(t, args...)
					p.waitProgress(t, ph.marks...)
				}
				if ph.notYet != "" {
					require.NotContains(t, p.stderr.String(), ph.notYet, "the %s phase is under way when the signal is sent", ph.name)
				}
				require.NoError(t, p.cmd.Process.Signal(sig))
				r := p.wait(t)
				t.Logf("FAULT %s %s: exit %d: %s", ph.name, sig, r.code, lastLine(r.stderr))
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("the signalled deploy: %s", r)
					}
				})

				deployed := ph.check(t, f, rev1, gen1, r)
				f.assertConsistent(t, deployed)
				f.assertNextDeploy(t)
			})
		}
	}
}

// TestFaultKilledMidApply: a deploy killed (SIGKILL) at its first "apply:"
// line leaves its pending record, which holds the lock: a new deploy is
// refused (exit 5, naming it) until the record went unrenewed for its
// lease (6s) as watched by the new deploy, which then takes the lock over
// (exit 0) and records the killed revision failed.
func TestFaultKilledMidApply(t *testing.T) {
	shareCluster(t, 4)
	f := newRelFixture(t)
	f.faultInstall(t)

	p := f.start(t, faultDeployArgs("--set", "greeting=killed", "--set", "readyDelay=60s", "--lock-lease", "6s")...)
	p.waitProgress(t, relName+"#2 apply:")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	killed := p.wait(t)
	require.Equal(t, -int(syscall.SIGKILL), killed.code, "%s", killed)
	t.Logf("FAULT SIGKILL mid-apply: exit %d", killed.code)

	ctx := context.Background()
	rec, err := f.store.Get(ctx, relName, 2)
	require.NoError(t, err)
	require.Equal(t, storage.StatusPendingUpgrade, rec.Status, "the killed deploy's record holds the lock")
	require.Equal(t, 6*time.Second, rec.Lease)

	r := f.deploy(t, "--set", "greeting=next")
	assert.Equal(t, 5, r.code, "%s", r)
	assert.Contains(t, r.stderr, "is locked by another operation: revision 2 is pending-upgrade")
	assert.Contains(t, r.stderr, rec.Holder, "names the holder")
	assert.Equal(t, []storage.Status{storage.StatusDeployed, storage.StatusPendingUpgrade}, statuses(f.history(t)), "the refused deploy wrote nothing")
	t.Logf("FAULT SIGKILL mid-apply, next deploy within the lease: exit %d", r.code)

	// Once older than its lease, the record is watched for a whole lease
	// more, then taken over.
	rec, err = f.store.Get(ctx, relName, 2)
	require.NoError(t, err)
	time.Sleep(time.Until(rec.Updated.Add(rec.Lease + time.Second)))
	res := f.assertNextDeploy(t)
	assert.Equal(t, 3, res.Revision)
	t.Logf("FAULT SIGKILL mid-apply, next deploy after the lease: exit 0")

	rec, err = f.store.Get(ctx, relName, 2)
	require.NoError(t, err)
	assert.Equal(t, storage.StatusFailed, rec.Status, "the killed revision is recorded failed")
	assert.Contains(t, rec.Description, "interrupted: lock taken over")
	assert.Contains(t, rec.Description, "lease 6s")
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusFailed, storage.StatusDeployed}, statuses(f.history(t)))
}

// TestFaultConcurrentDeploys: five deploys of one release started together
// after its install: exactly one takes the lock and deploys (exit 0), the
// other four are refused (exit 5) and write nothing.
func TestFaultConcurrentDeploys(t *testing.T) {
	shareCluster(t, 4)
	const n = 5
	f := newRelFixture(t)
	f.faultInstall(t)

	// Each a different greeting, each rollout slow enough (8 s) that the
	// winner holds the lock until every other one has looked.
	procs := make([]*running, n)
	for i := range procs {
		procs[i] = f.start(t, faultDeployArgs("--set", fmt.Sprintf("greeting=c%d", i), "--set", "readyDelay=8s", "-o", "json")...)
	}
	// They run together; collect them in order.
	runs := make([]relRun, n)
	for i, p := range procs {
		runs[i] = p.wait(t)
	}

	var winners []int
	var codes []int
	for i, r := range runs {
		codes = append(codes, r.code)
		switch r.code {
		case 0:
			winners = append(winners, i)
		default:
			assert.Equal(t, 5, r.code, "deploy %d: %s", i, r)
			assert.Contains(t, r.stderr, "is locked by another operation: revision 2 is pending-upgrade", "deploy %d", i)
			assert.Empty(t, r.stdout, "deploy %d", i)
		}
	}
	t.Logf("FAULT 5 concurrent deploys: exit codes %v", codes)
	require.Len(t, winners, 1, "exactly one deploy proceeds: exit codes %v", codes)
	w := winners[0]
	res := result(t, runs[w])
	assert.Equal(t, 2, res.Revision)
	assert.Equal(t, storage.StatusDeployed, res.Status)

	revs := f.assertConsistent(t, 2)
	require.Len(t, revs, 2, "exactly one new revision")
	assert.Equal(t, fmt.Sprintf("c%d", w), revs[1].Values["greeting"], "the winner's values are recorded")
	assert.Equal(t, fmt.Sprintf("c%d", w), f.configMapData(t, relName+"-config")["greeting"], "the winner's objects are applied")
	f.assertServes(t, res.ReplicaSets[0])
	f.assertNextDeploy(t)
}

// TestFaultRecordDeleted: a record Secret deleted by hand (kubectl delete
// secret vllmctl.release.v1.chat.vN).
func TestFaultRecordDeleted(t *testing.T) {
	shareCluster(t, 4)
	ctx := context.Background()
	deleteRecord := func(t *testing.T, f *relFixture, rev int) {
		t.Helper()
		require.NoError(t, f.client.CoreV1().Secrets(f.namespace).Delete(ctx, storage.SecretName(relName, rev), metav1.DeleteOptions{}))
	}
	// deployN deploys revisions 1..n, image and greeting rN.
	deployN := func(t *testing.T, f *relFixture, n int) []*release.Result {
		t.Helper()
		var out []*release.Result
		for i := 1; i <= n; i++ {
			tag := fmt.Sprintf("r%d", i)
			r := f.deploy(t, "--set", "image=example.com/vllm:"+tag, "--set", "greeting="+tag, "-o", "json")
			require.Equal(t, 0, r.code, "revision %d\n%s", i, r)
			res := result(t, r)
			require.Equal(t, i, res.Revision)
			require.Len(t, res.ReplicaSets, 1)
			out = append(out, res)
		}
		return out
	}

	t.Run("superseded", func(t *testing.T) {
		f := newRelFixture(t)
		res := deployN(t, f, 3)
		deleteRecord(t, f, 1)

		revs := f.assertConsistent(t, 3, 1)
		assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusDeployed}, statuses(revs), "the other records")

		f.assertNextDeploy(t, 1) // revision 4

		rb := f.run(t, "rollback", relName, "--to-revision", "2", "-o", "json", "--progress", "plain", "--timeout", "2m")
		require.Equal(t, 0, rb.code, "rollback to a remaining revision\n%s", rb)
		rbRes := result(t, rb)
		assert.Equal(t, 5, rbRes.Revision)
		assert.Equal(t, 2, rbRes.RolledBackTo)
		require.Len(t, rbRes.ReplicaSets, 1)
		assert.Equal(t, res[1].ReplicaSets[0].PodTemplateHash, rbRes.ReplicaSets[0].PodTemplateHash, "revision 2's pod template is back")
		f.assertServes(t, rbRes.ReplicaSets[0])
		assert.Equal(t, "r2", f.configMapData(t, relName+"-config")["greeting"])

		gone := f.run(t, "rollback", relName, "--to-revision", "1")
		assert.Equal(t, 2, gone.code, "the deleted revision is unknown: %s", gone)
		f.assertConsistent(t, 5, 1)
		t.Logf("FAULT record of superseded revision deleted: next deploy exit 0, rollback --to-revision 2 exit %d, --to-revision 1 exit %d", rb.code, gone.code)
	})

	t.Run("deployed", func(t *testing.T) {
		f := newRelFixture(t)
		deployN(t, f, 2)
		deleteRecord(t, f, 2)
		assert.Equal(t, []storage.Status{storage.StatusSuperseded}, statuses(f.history(t)))

		tag := "after-delete"
		r := f.deploy(t, "--set", "image=example.com/vllm:"+tag, "--set", "greeting="+tag, "-o", "json")
		t.Logf("FAULT record of deployed revision deleted, next deploy: exit %d\n%s", r.code, r.stderr)
		require.Equal(t, 0, r.code, "the next deploy works\n%s", r)
		res := result(t, r)
		assert.Equal(t, storage.StatusDeployed, res.Status)
		require.Len(t, res.ReplicaSets, 1)
		f.assertServes(t, res.ReplicaSets[0])
		assert.Equal(t, tag, f.configMapData(t, relName+"-config")["greeting"])
		revs := f.assertConsistent(t, res.Revision)
		for _, rec := range revs {
			t.Logf("after the deploy: revision %d %s %q", rec.Revision, rec.Status, rec.Description)
		}
		f.assertNextDeploy(t)
	})
}
