package charts

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// renderDrain renders the built-in chart as release qwen in namespace
// inference with the values files and set.
func renderDrain(t *testing.T, files []string, set ...string) *Rendered {
	t.Helper()
	ch, err := Load("vllm")
	require.NoError(t, err)
	r, err := Render(ch, RenderOptions{ReleaseName: "qwen", Namespace: "inference", ValueFiles: files, Set: set})
	require.NoError(t, err)
	return r
}

// preStopCommand returns the server container's preStop exec command, nil
// when it has none.
func preStopCommand(t *testing.T, spec map[string]any) []string {
	t.Helper()
	c := serverContainer(t, spec)
	v, found, err := unstructured.NestedSlice(c, "lifecycle", "preStop", "exec", "command")
	require.NoError(t, err)
	if !found {
		_, hasLifecycle := c["lifecycle"]
		assert.False(t, hasLifecycle, "no lifecycle without the drain hook")
		return nil
	}
	return stringList(v)
}

func graceOf(t *testing.T, spec map[string]any) int64 {
	t.Helper()
	v, found, err := unstructured.NestedInt64(spec, "terminationGracePeriodSeconds")
	require.NoError(t, err)
	require.True(t, found, "terminationGracePeriodSeconds rendered")
	return v
}

func TestRenderDrainDeployment(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		spec := nestedMap(t, objectsOf(renderDrain(t, nil))["Deployment/qwen"].Object, "spec", "template", "spec")
		cmd := preStopCommand(t, spec)
		require.Len(t, cmd, 6)
		assert.Equal(t, []string{"python3", "-c"}, cmd[:2])
		assert.True(t, strings.HasPrefix(cmd[2], "# vllmctl drain hook"), "the first line VL017 knows the hook by: %q", cmd[2])
		assert.Contains(t, cmd[2], "vllm:num_requests_running")
		assert.Contains(t, cmd[2], "vllm:num_requests_waiting")
		assert.Equal(t, []string{"127.0.0.1", "10", "120"}, cmd[3:], "host, delaySeconds, seconds")
		assert.Equal(t, int64(180), graceOf(t, spec))
		args := stringList(serverContainer(t, spec)["args"])
		assert.NotContains(t, args, "--shutdown-timeout", "engineFlag is off by default (vLLM v0.11.0 refuses it)")
	})
	t.Run("values", func(t *testing.T) {
		spec := nestedMap(t, objectsOf(renderDrain(t, nil, "drain.delaySeconds=5", "drain.seconds=600",
			"terminationGracePeriodSeconds=700"))["Deployment/qwen"].Object, "spec", "template", "spec")
		assert.Equal(t, []string{"127.0.0.1", "5", "600"}, preStopCommand(t, spec)[3:])
		assert.Equal(t, int64(700), graceOf(t, spec))
	})
	t.Run("disabled: no hook, no engine flag", func(t *testing.T) {
		spec := nestedMap(t, objectsOf(renderDrain(t, nil, "drain.enabled=false", "drain.engineFlag=true",
			"terminationGracePeriodSeconds=30"))["Deployment/qwen"].Object, "spec", "template", "spec")
		assert.Nil(t, preStopCommand(t, spec))
		assert.NotContains(t, stringList(serverContainer(t, spec)["args"]), "--shutdown-timeout")
		assert.Equal(t, int64(30), graceOf(t, spec))
	})
	t.Run("engine flag before extraArgs", func(t *testing.T) {
		spec := nestedMap(t, objectsOf(renderDrain(t, nil, "drain.engineFlag=true", "drain.engineTimeoutSeconds=45",
			"extraArgs[0]=--enable-prefix-caching"))["Deployment/qwen"].Object, "spec", "template", "spec")
		args := stringList(serverContainer(t, spec)["args"])
		assert.Equal(t, "45", flagValue(args, "--shutdown-timeout"))
		assert.Equal(t, "--enable-prefix-caching", args[len(args)-1], "the user's extraArgs come last and win")
		assert.NotNil(t, preStopCommand(t, spec), "the hook stays")
	})
}

func TestRenderDrainMultiNode(t *testing.T) {
	multinode := []string{"testdata/values/multinode.yaml"}
	t.Run("statefulset: every pod carries the hook, workers wait for their leader", func(t *testing.T) {
		objs := objectsOf(renderDrain(t, multinode, "drain.engineFlag=true"))
		for _, g := range []string{"0", "1"} {
			spec := nestedMap(t, objs["StatefulSet/qwen-g"+g].Object, "spec", "template", "spec")
			cmd := preStopCommand(t, spec)
			require.Len(t, cmd, 6)
			assert.Equal(t, []string{"qwen-g" + g + "-0.qwen-nodes.inference.svc", "10", "120"}, cmd[3:])
			assert.Contains(t, cmd[2], `os.environ.get("VLLM_NODE_RANK", "0") == "0"`, "rank 0 asks itself")
			assert.Equal(t, int64(180), graceOf(t, spec))
			assert.Equal(t, "30", flagValue(stringList(serverContainer(t, spec)["args"]), "--shutdown-timeout"))
		}
	})
	t.Run("leaderworkerset: leader asks itself, workers their leader, same grace", func(t *testing.T) {
		lws := objectsOf(renderDrain(t, multinode, "multiNode.controller=leaderworkerset"))["LeaderWorkerSet/qwen"]
		require.NotNil(t, lws)
		leader := nestedMap(t, lws.Object, "spec", "leaderWorkerTemplate", "leaderTemplate", "spec")
		worker := nestedMap(t, lws.Object, "spec", "leaderWorkerTemplate", "workerTemplate", "spec")
		assert.Equal(t, []string{"127.0.0.1", "10", "120"}, preStopCommand(t, leader)[3:])
		assert.Equal(t, []string{"$LWS_LEADER_ADDRESS", "10", "120"}, preStopCommand(t, worker)[3:])
		assert.Equal(t, graceOf(t, leader), graceOf(t, worker))
	})
	t.Run("disabled", func(t *testing.T) {
		objs := objectsOf(renderDrain(t, multinode, "drain.enabled=false"))
		assert.Nil(t, preStopCommand(t, nestedMap(t, objs["StatefulSet/qwen-g0"].Object, "spec", "template", "spec")))
	})
}

// TestDrainScriptRuns runs the rendered hook's program with python3 (when
// there is one) against a stand-in /metrics: it ends as soon as no request
// runs or waits, waits while some do (at most its bound), and ends at once
// when nothing answers.
func TestDrainScriptRuns(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	spec := nestedMap(t, objectsOf(renderDrain(t, nil))["Deployment/qwen"].Object, "spec", "template", "spec")
	script := preStopCommand(t, spec)[2]
	// The stand-in reads the number of requests from a file, so the test
	// can change it; it listens where a worker's hook is sent (HOST, rank
	// 1) on a port of its own: the program's port 8000 is rewritten.
	dir := t.TempDir()
	busyFile := filepath.Join(dir, "busy")
	require.NoError(t, os.WriteFile(busyFile, []byte("2"), 0o644))
	server := exec.Command(python, "-c", `
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        n = open(sys.argv[1]).read().strip()
        body = ("# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} %s.0\n"
                "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0.0\n"
                "vllm:num_requests_running_total_other 7.0\n" % n).encode()
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
`, busyFile)
	out, err := server.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, server.Start())
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	buf := make([]byte, 16)
	n, err := out.Read(buf)
	require.NoError(t, err)
	port := strings.TrimSpace(string(buf[:n]))
	hook := strings.Replace(script, ":8000/metrics", ":"+port+"/metrics", 1)
	require.NotEqual(t, script, hook)

	run := func(host, delay, seconds string) float64 {
		t.Helper()
		cmd := exec.Command(python, "-c", hook, host, delay, seconds)
		// A proxy that would refuse: the hook must not go through it.
		cmd.Env = append(os.Environ(), "VLLM_NODE_RANK=1", "LEADER=127.0.0.1",
			"http_proxy=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "no_proxy=", "NO_PROXY=")
		start := nowSeconds()
		outErr, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", outErr)
		return nowSeconds() - start
	}
	// Busy (2 running) all along: the hook waits its whole bound, 0 + 2 s
	// (through a proxy it would have found nothing listening, and ended).
	// The lower bounds are the behaviour; the upper ones are far from the
	// other outcome (the 30 s bound), so that a loaded machine's slow
	// python start does not fail them.
	took := run("127.0.0.1", "0", "2")
	assert.GreaterOrEqual(t, took, 2.0, "waits the bound while requests run")
	assert.Less(t, took, 12.0, "and not much longer")
	// Idle: it ends at once, after the delay (1 s); the host from $LEADER.
	require.NoError(t, os.WriteFile(busyFile, []byte("0"), 0o644))
	took = run("$LEADER", "1", "30")
	assert.GreaterOrEqual(t, took, 1.0, "waits the delay")
	assert.Less(t, took, 15.0, "ends when idle, long before its bound")
	// Nothing listening: ends at once.
	took = run("127.0.0.2", "0", "30")
	assert.Less(t, took, 15.0, "a server that does not answer ends the hook, long before its bound")

	// A server that accepts but never answers (loaded): busy, the hook
	// waits its bound (0 + 6 s) and no longer (it used to end at once, as
	// for a server gone, letting the kubelet stop a busy server).
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = silent.Close() })
	go func() {
		var held []net.Conn // kept open, never answered
		for {
			c, err := silent.Accept()
			if err != nil {
				for _, c := range held {
					_ = c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	hook = strings.Replace(script, ":8000/metrics", ":"+strconv.Itoa(silent.Addr().(*net.TCPAddr).Port)+"/metrics", 1)
	// The bound exceeds one poll's timeout (5 s): ending at the first
	// timeout would take 5 s.
	took = run("127.0.0.1", "0", "6")
	assert.GreaterOrEqual(t, took, 5.9, "a server that accepts and never answers is busy, waited for")
	assert.Less(t, took, 16.0, "and not much longer")
}

func nowSeconds() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// TestRenderDrainRefusals: the schema refuses drain values that make no
// sense, naming the field (an InputError: exit 2).
func TestRenderDrainRefusals(t *testing.T) {
	tests := []struct {
		name string
		set  []string
		want []string // substrings of the error
	}{
		{"negative seconds", []string{"drain.seconds=-1"}, []string{"drain.seconds", "minimum: got -1, want 0"}},
		{"huge seconds", []string{"drain.seconds=1000000000"}, []string{"drain.seconds", "maximum", "want 3,600"}},
		{"seconds a string", []string{"drain.seconds=soon"}, []string{"drain.seconds", "got string, want integer"}},
		{"seconds a fraction", []string{"drain.seconds=1.5"}, []string{"drain.seconds", "integer"}},
		{"negative delay", []string{"drain.delaySeconds=-5"}, []string{"drain.delaySeconds", "minimum"}},
		{"huge delay", []string{"drain.delaySeconds=301"}, []string{"drain.delaySeconds", "maximum"}},
		{"enabled a string", []string{"drain.enabled=maybe"}, []string{"drain.enabled", "got string, want boolean"}},
		{"engineFlag a number", []string{"drain.engineFlag=1"}, []string{"drain.engineFlag", "want boolean"}},
		{"engine timeout 0", []string{"drain.engineTimeoutSeconds=0"}, []string{"drain.engineTimeoutSeconds", "minimum"}},
		{"engine timeout huge", []string{"drain.engineTimeoutSeconds=99999"}, []string{"drain.engineTimeoutSeconds", "maximum"}},
		{"unknown key", []string{"drain.timeout=30"}, []string{"drain", "additional properties 'timeout' not allowed"}},
		{"drain not an object", []string{"drain=true"}, []string{"drain", "want object"}},
		{"negative grace", []string{"terminationGracePeriodSeconds=-1"}, []string{"terminationGracePeriodSeconds", "minimum"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := Load("vllm")
			require.NoError(t, err)
			_, err = Render(ch, RenderOptions{ReleaseName: "qwen", Namespace: "inference", Set: tt.set})
			require.Error(t, err)
			var ie *InputError
			require.ErrorAs(t, err, &ie, "invalid input: exit 2")
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
