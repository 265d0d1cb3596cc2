package main

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
	"github.com/vllmctl/vllmctl/wait"
)

// craftedText attacks a terminal and a CI log: a window title, a clear
// screen, a clipboard write, a carriage return before a fake result, a
// workflow command on a line of its own, a Markdown fence, invalid UTF-8,
// a bidi override, and a 300 KB tail.
var craftedText = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07\rdone: deployed\n::error title=x::pwned\n```\n\xff\xfe \u202eevil ##[error]x " +
	strings.Repeat("A", 300_000)

// craftedEscaped is how craftedText begins once sanitised.
const craftedEscaped = `\x1b]0;pwned\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07\rdone: deployed\n::error title=x::pwned\n` + "```" + `\n` + "\uFFFD\uFFFD \\u202eevil ##\\x5berror]x AAA"

// assertSafeOutput checks what a command printed for people: no control
// character but tab and line breaks, no bidi override, valid UTF-8, no
// line a CI runner would take for a command, and every line within bound.
func assertSafeOutput(t *testing.T, what, out string, bound int) {
	t.Helper()
	assert.True(t, utf8.ValidString(out), "%s: valid UTF-8", what)
	for _, l := range strings.Split(out, "\n") {
		assert.LessOrEqual(t, len(l), bound, "%s: a line within the bound: %.100q…", what, l)
		assert.False(t, strings.HasPrefix(strings.TrimLeft(l, " \t"), "::"), "%s: a workflow command: %.100q", what, l)
		assert.NotContains(t, l, "##[", "%s: a legacy workflow command", what)
		for _, r := range l {
			if r < 0x20 && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 {
				assert.Failf(t, "raw control character", "%s: %U in line %.100q", what, r, l)
				break
			}
		}
	}
}

// TestUntrustedFailurePrintsEscaped: a rollout whose diagnosis, events and
// object messages hold crafted text (as a Waiter that does not sanitise
// could return them) prints them escaped, valid and clipped in the deploy's
// progress, result table and error, and in the status and history tables.
func TestUntrustedFailurePrintsEscaped(t *testing.T) {
	f := newReleaseFakes()
	_, stderr, code := f.run(t, deployArgs()...)
	require.Equal(t, 0, code, "stderr: %s", stderr)

	f.waiter.Script = func(_ context.Context, objs []rollout.ObjectStatus, _ wait.Options) (wait.Result, error) {
		res := wait.Result{Outcome: wait.OutcomeFailed}
		var bad []rollout.ObjectStatus
		for _, o := range objs {
			if o.Object.Kind == "Deployment" {
				o.Status, o.Message = rollout.StatusFailed, craftedText
				bad = append(bad, o)
			}
			res.Objects = append(res.Objects, o)
		}
		res.Diagnosis = &rollout.Diagnosis{Verdict: rollout.VerdictCrashLoop, Reason: "CrashLoopBackOff", Object: "deployment/chat",
			Pod: "chat-7d9f8c6b5-x2k4q", Container: "vllm", ExitCode: 1, RestartCount: 2, Message: craftedText,
			Cause: vllmcause.CauseUnknown, Evidence: craftedText, Events: []string{"Warning BackOff: " + craftedText},
			LogTail: []string{"INFO starting", craftedText, "```", "::error title=x::pwned"}, LogNote: craftedText, Hints: []string{craftedText}}
		return res, &wait.RolloutFailedError{Diagnosis: res.Diagnosis, NotReady: &wait.NotReadyError{Outcome: wait.OutcomeFailed, Objects: bad}}
	}
	stdout, stderr, code := f.run(t, deployArgs("--set", "image.tag=v0.11.1", "--no-rollback", "--progress", "plain")...)
	require.Equal(t, 4, code, "a failed rollout, not rolled back\nstderr: %.2000s", stderr)
	// A table or progress line is a label, a timestamp or an indent
	// before one sanitised value; the error line is made of several
	// (termout.SanitizeText bounds it).
	table := termout.MaxLineBytes + 100
	assertSafeOutput(t, "deploy result table", stdout, table)
	assertSafeOutput(t, "deploy progress and error", stderr, termout.MaxTextLineBytes)
	assert.Contains(t, stdout, "    "+craftedEscaped, "the log tail, escaped")
	assert.Contains(t, stdout, "  evidence:  "+`\x1b]0;pwned\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07\rdone: deployed ::error title=x::pwned`+" ``` ",
		"a one-line field: line breaks are spaces")
	assert.Contains(t, stdout, "(clipped, 300")
	assert.Contains(t, stdout, "    \\x3a:error title=x::pwned", "a log line under the log tail")
	assert.Contains(t, stderr, craftedEscaped, "the progress line of the Deployment, escaped")
	assert.Contains(t, stderr, "Error: release chat revision 2: ")

	stdout, stderr, code = f.run(t, "status", "chat")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assertSafeOutput(t, "status table", stdout, table)
	assert.Contains(t, stdout, "FAILURE: CrashLoopBackOff")
	assert.Contains(t, stdout, "    "+craftedEscaped)

	history := func(g *GlobalOptions) *cobra.Command {
		return historyCommand(&historyOptions{g: g, loc: time.UTC})
	}
	stdout, stderr, code = runRecordCommand(t, f.factory(), history, "history", "chat")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assertSafeOutput(t, "history table", stdout, table)
}
