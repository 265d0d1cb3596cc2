//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/release"
)

// craftedLog is what a hostile image logs before it crashes: OSC 0 (window
// title), CSI 2J (clear screen), OSC 52 (clipboard write), a carriage
// return before a fake result, a Markdown fence, GitHub workflow commands
// (at the start of a line, after blanks, and the legacy form mid-line),
// invalid UTF-8 and a bidi override; then a 300 KB line.
var craftedLog = []string{
	"INFO starting the server",
	"\x1b]0;pwned title\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07clipboard",
	"Loading weights\rdone: deployed",
	"```",
	"::error title=x::pwned",
	"  ::add-mask::secret",
	"tool output ##[error]legacy",
	"bad bytes \xff\xfe\xc3 and \u202egnp.exe",
	strings.Repeat("A", 300_000),
}

// craftedEvent is the message of a Warning event on the crashing pod.
const craftedEvent = "\x1b]0;event\x07 back-off\rdone: deployed\n::error::event ```"

// writeCraftedLog writes craftedLog as a container log file in the CRI
// format kwok serves (timestamp, stream, tag, line) and returns its path.
func writeCraftedLog(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for i, l := range craftedLog {
		fmt.Fprintf(&b, "2026-01-01T00:00:%02d.000000000Z stderr F %s\n", i, l)
	}
	path := filepath.Join(t.TempDir(), "crafted.log")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

// craftPods gives every new pod of the namespace whose image contains
// "crash" the crafted log (a kwok Logs object named after it, which takes
// precedence over the cluster's default logs) and a crafted Warning event,
// until the test ends. It returns a channel of the errors met.
func (f *relFixture) craftPods(t *testing.T, logPath string) <-chan error {
	t.Helper()
	dyn, err := dynamic.NewForConfig(f.cfg)
	require.NoError(t, err)
	logsRes := dyn.Resource(schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}).Namespace(f.namespace)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := f.client.CoreV1().Pods(f.namespace).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err, "watch the pods of %s", f.namespace)
	errs := make(chan error, 1)
	report := func(err error) {
		select {
		case errs <- err: // the first error is enough
		default:
		}
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added || len(pod.Spec.Containers) == 0 || !strings.Contains(pod.Spec.Containers[0].Image, "crash") {
				continue
			}
			logs := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
				"metadata": map[string]any{"name": pod.Name, "namespace": pod.Namespace,
					"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID)}}},
				"spec": map[string]any{"logs": []any{map[string]any{"logsFile": logPath, "previousLogsFile": logPath, "follow": false}}},
			}}
			if _, err := logsRes.Create(ctx, logs, metav1.CreateOptions{}); err != nil {
				report(fmt.Errorf("create Logs %s/%s: %w", pod.Namespace, pod.Name, err))
			}
			now := metav1.Now()
			event := &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{GenerateName: pod.Name + ".crafted-", Namespace: pod.Namespace},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
				Type:           corev1.EventTypeWarning, Reason: "Crafted", Message: craftedEvent, Count: 1,
				FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "e2e"},
			}
			if _, err := f.client.CoreV1().Events(pod.Namespace).Create(ctx, event, metav1.CreateOptions{}); err != nil {
				report(fmt.Errorf("create the crafted event of pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
		}
	}()
	return errs
}

// textBound bounds a line of human output: one sanitised value
// (termout.MaxLineBytes) after a timestamp, a label or an indent, or an error
// line made of a few of them.
const textBound = termout.MaxLineBytes + 512

// assertSafeText checks human output: valid UTF-8, no raw ESC, CR or
// other control character but tab, no bidi override, no line a GitHub
// runner takes for a workflow command ("::" at its start after blanks,
// "##[" anywhere), every line within textBound. allowed are lines that may
// start with "::" (the script's own stop-commands and resume lines).
func assertSafeText(t *testing.T, what, text string, allowed ...string) {
	t.Helper()
	require.True(t, utf8.ValidString(text), "%s: valid UTF-8", what)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		l := sc.Text()
		assert.LessOrEqual(t, len(l), textBound, "%s: a line within the bound: %.120q…", what, l)
		if strings.HasPrefix(strings.TrimLeft(l, " \t\u00a0"), "::") {
			isAllowed := false
			for _, a := range allowed {
				isAllowed = isAllowed || l == a
			}
			assert.True(t, isAllowed, "%s: a workflow command line: %.120q", what, l)
		}
		assert.NotContains(t, l, "##[", "%s: a legacy workflow command", what)
		for _, r := range l {
			if r < 0x20 && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
				assert.Failf(t, "raw control character", "%s: %U in line %.120q", what, r, l)
				break
			}
		}
	}
	require.NoError(t, sc.Err(), what)
}

// assertSafeJSON checks a JSON document: valid UTF-8, and every string in
// it safe as text, the failure's within termout.MaxLineBytes.
func assertSafeJSON(t *testing.T, what, doc string) {
	t.Helper()
	require.True(t, utf8.ValidString(doc), "%s: valid UTF-8", what)
	var v any
	require.NoError(t, json.Unmarshal([]byte(doc), &v), "%s:\n%.2000s", what, doc)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case string:
			assertSafeText(t, what+" "+path, v)
			if strings.Contains(path, "failure") {
				assert.LessOrEqual(t, len(v), termout.MaxLineBytes, "%s %s: clipped", what, path)
			}
		}
	}
	walk("", v)
}

// assertFenced checks that the summary's log tail block is one fenced code
// block holding the ``` line of the log and want: its fence is longer than
// any run of backticks inside, so no line of the log closes it.
func assertFenced(t *testing.T, summary string, want ...string) {
	t.Helper()
	lines := strings.Split(summary, "\n")
	start := -1
	for i, l := range lines {
		if l == "<details><summary>log tail</summary>" {
			start = i
		}
	}
	require.GreaterOrEqual(t, start, 0, "a log tail block:\n%s", summary)
	require.Greater(t, len(lines), start+3)
	fence := lines[start+2]
	require.Regexp(t, "^````+$", fence, "the fence is longer than the ``` of the log")
	end := -1
	for i := start + 3; i < len(lines); i++ {
		if strings.HasPrefix(strings.TrimLeft(lines[i], " "), "```") && strings.Trim(lines[i], " `") == "" && len(strings.TrimSpace(lines[i])) >= len(fence) {
			end = i
			break
		}
	}
	require.Greater(t, end, start+3, "the block is closed")
	assert.Equal(t, fence, lines[end], "the block is closed by its own fence")
	assert.Equal(t, "</details>", lines[end+1], "the block ends where the script ends it")
	body := strings.Join(lines[start+3:end], "\n")
	assert.Contains(t, body, "\n```\n", "the log's ``` line is inside the block")
	for _, w := range want {
		assert.Contains(t, body, w)
	}
}

// TestUntrustedTextEscaped deploys a revision whose pod crashes after
// logging crafted text (escape sequences, a CR before a fake result, a
// Markdown fence, workflow commands, invalid UTF-8, a 300 KB line), with a
// crafted event, through hack/ci-deploy.sh, and checks every output that
// quotes them: the deploy's progress (plain, the job log), its -o json
// result, the CI summary, and `vllmctl status` (table and JSON). None
// holds a raw escape, CR or invalid UTF-8, a line a CI runner runs as a
// command, or a line over the bound; the summary's code block stays
// closed by its own fence.
func TestUntrustedTextEscaped(t *testing.T) {
	shareCluster(t, 4)
	if _, err := exec.LookPath("jq"); err != nil {
		skipOrFail(t, "hack/ci-deploy.sh needs jq: %v", err)
	}
	f := newRelFixture(t)
	r1 := f.deploy(t)
	require.Equal(t, 0, r1.code, "revision 1\n%s", r1)

	errs := f.craftPods(t, writeCraftedLog(t))
	ci := f.runCIDeploy(t, "--set", "image=example.com/vllm:v2-crash", "--no-rollback")
	select {
	case err := <-errs:
		require.NoError(t, err)
	default:
	}
	t.Logf("job log:\n%s", ci.stderr)
	require.Equal(t, 4, ci.code, "a crash, not rolled back\n%s\nsummary:\n%s", ci.relRun, ci.summary)

	res := &release.Result{}
	require.NoError(t, json.Unmarshal([]byte(ci.result), res), "result.json:\n%.2000s", ci.result)
	require.NotNil(t, res.Failure)
	tail := strings.Join(res.Failure.LogTail, "\n")
	for _, want := range []string{
		`\x1b]0;pwned title\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07clipboard`,
		`Loading weights\rdone: deployed`,
		"\n```\n",
		`\x3a:error title=x::pwned`,
		`  \x3a:add-mask::secret`,
		`tool output ##\x5berror]legacy`,
		"bad bytes \uFFFD\uFFFD\uFFFD and \\u202egnp.exe",
		" … (clipped, ",
	} {
		assert.Contains(t, tail, want, "the log tail holds the crafted lines escaped")
	}
	assert.Contains(t, strings.Join(res.Failure.Events, "\n"), `Warning Crafted: \x1b]0;event\x07 back-off\rdone: deployed\n::error::event `+"```",
		"the crafted event, escaped")

	assertSafeJSON(t, "deploy -o json (result.json)", ci.result)
	assertSafeText(t, "the job log (ci-deploy.sh stderr: vllmctl's plain progress and errors, then the summary)", ci.stderr)
	assert.Contains(t, ci.stderr, `Warning Crafted: \x1b]0;event\x07 back-off\rdone: deployed\n::error::event`, "the event's warning in the progress")
	assertSafeText(t, "summary.md", ci.summary)
	assertFenced(t, ci.summary, `\x3a:error title=x::pwned`, `\x1b]0;pwned title\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07clipboard`)

	status := f.run(t, "status", relName)
	require.Equal(t, 0, status.code, "%s", status)
	t.Logf("vllmctl status:\n%s", status.stdout)
	assertSafeText(t, "vllmctl status", status.stdout)
	assert.Contains(t, status.stdout, `    \x3a:error title=x::pwned`, "the failure's log tail, escaped")
	assert.Contains(t, status.stdout, `    Loading weights\rdone: deployed`)
	statusJSON := f.run(t, "status", relName, "-o", "json")
	require.Equal(t, 0, statusJSON.code, "%s", statusJSON)
	assertSafeJSON(t, "vllmctl status -o json", statusJSON.stdout)
}

// TestCIDeployScriptNeutralisesText runs hack/ci-deploy.sh on a stand-in
// for vllmctl (no cluster) whose result document holds raw hostile text,
// as a vllmctl that does not escape it would write, on GitHub Actions: the
// summary escapes Markdown in its one-line fields, fences the log tail so
// that no line closes it, drops control characters and neutralises
// workflow commands; the step's job log sits between ::stop-commands:: and
// its resume token.
func TestCIDeployScriptNeutralisesText(t *testing.T) {
	shareCluster(t, 4)
	if _, err := exec.LookPath("jq"); err != nil {
		skipOrFail(t, "hack/ci-deploy.sh needs jq: %v", err)
	}
	dir := t.TempDir()
	hostile := "\x1b]0;t\x07 ```` [link](http://x) ![img](http://x/i.png) <img src=x> | *em* &amp; ##[error]legacy \r::error::cr"
	doc, err := json.Marshal(map[string]any{"release": "chat", "namespace": "ml", "revision": 2, "status": "failed",
		"description": "Upgrade failed: " + hostile, "rolledBackTo": 1,
		"failure": map[string]any{"reason": "CrashLoopBackOff", "cause": "unknown", "evidence": hostile, "pod": "chat-x", "message": hostile,
			"hints": []string{hostile, "::warning::hint"}, "events": []string{"Warning BackOff: " + hostile},
			"logTail": []string{"INFO ok", "```", "`````", "::error title=x::pwned", "  ::notice::n", hostile}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "result.json"), doc, 0o644))
	fake := filepath.Join(dir, "vllmctl")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\ncat \""+filepath.Join(dir, "result.json")+"\"\n"+
		"printf '%s\\n' '2026-01-01T00:00:00Z chat#2 wait: deployment/chat: failed' '::error::from the progress' 'x ##[warning]mid-line' >&2\n"+
		"echo 'Error: release chat revision 2: rollout failed: ```' >&2\nexit 3\n"), 0o755))
	script, err := filepath.Abs(filepath.Join("..", "hack", "ci-deploy.sh"))
	require.NoError(t, err)
	out := filepath.Join(dir, "out")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "chat")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VLLMCTL") && !strings.HasPrefix(kv, "GITHUB_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "VLLMCTL="+fake, "CI_DEPLOY_OUT="+out, "GITHUB_ACTIONS=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.Equal(t, 3, exitCodeOf(t, cmd.Run()), "stderr:\n%s", stderr.String())
	summary, err := os.ReadFile(filepath.Join(out, "summary.md"))
	require.NoError(t, err)
	t.Logf("summary:\n%s", summary)

	// The job log as the runner reads it: between ::stop-commands::TOKEN
	// and ::TOKEN:: no command runs; the token is random.
	log := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	require.GreaterOrEqual(t, len(log), 2)
	stop := regexp.MustCompile(`^::stop-commands::([0-9a-f]{32})$`).FindStringSubmatch(log[0])
	if assert.NotNil(t, stop, "the job log starts by stopping commands: %q", log[0]) {
		assert.Equal(t, "::"+stop[1]+"::", log[len(log)-1], "and ends by resuming them")
		for _, l := range log[1 : len(log)-1] {
			assert.NotEqual(t, "::"+stop[1]+"::", l, "nothing else resumes them")
		}
	}

	assertSafeText(t, "summary.md", string(summary))
	assertFenced(t, string(summary), "\n`````\n", `\x3a:error title=x::pwned`, "\n  \\x3a:notice::n\n", `##\x5berror]legacy`)
	for _, want := range []string{
		`\[link\](http://x)`, `\!\[img\](http://x/i.png)`, `\<img src=x\>`, `\| \*em\* \&amp;`, // no link, image, HTML, cell end, emphasis or entity
		"| evidence | ````` ",    // a code span longer than the ```` inside
		`- \\x3a:warning::hint`,  // a hint is no workflow command
		`\#\#\\x5berror\]legacy`, // nor a legacy one
	} {
		assert.Contains(t, string(summary), want)
	}
}
