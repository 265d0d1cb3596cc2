// Tests of the sanitiser of untrusted text.

package termout

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// hostile are log lines that attack a terminal, a table or a CI summary.
var hostile = []string{
	"\x1b]0;pwned title\x07",                     // OSC 0: window title
	"\x1b[2J\x1b[H",                              // CSI: clear screen, cursor home
	"\x1b]52;c;cHduZWQ=\x07",                     // OSC 52: clipboard write
	"loading\rdone: deployed",                    // CR: overwrite the line
	"a\x9b31mred",                                // C1 CSI
	"\xff\xfe broken",                            // invalid UTF-8
	"user \u202egnp.exe",                         // bidi override
	"::error title=x::pwned",                     // a workflow command, harmless once on a line of its own
	strings.Repeat("A", 300_000),                 // a 300 KB line
	strings.Repeat("\x1b", 2*MaxLineBytes),       // escapes make it long
	strings.Repeat("é", MaxLineBytes),            // multi-byte runes
	strings.Repeat("x", MaxLineBytes-1) + "\x1b", // the escape crosses the bound
}

func TestSanitizeLine(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain text is kept", "INFO 12-01 06:00:01 [api_server.py:1839] vLLM API server", "INFO 12-01 06:00:01 [api_server.py:1839] vLLM API server"},
		{"tab is kept", "a\tb", "a\tb"},
		{"empty", "", ""},
		{"printable Unicode is kept", "modèle 模型 ✓ …", "modèle 模型 ✓ …"},
		{"OSC 0 window title", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"CSI clear screen", "\x1b[2J", `\x1b[2J`},
		{"OSC 52 clipboard", "\x1b]52;c;cHduZWQ=\x07", `\x1b]52;c;cHduZWQ=\x07`},
		{"CR then a fake line", "Loading weights\rdone: deployed", `Loading weights\rdone: deployed`},
		{"LF", "a\nb", `a\nb`},
		{"NUL, backspace, DEL", "a\x00b\x08c\x7f", `a\x00b\x08c\x7f`},
		{"C1 controls", "a\u009b31mb\u0085", `a\u009b31mb\u0085`},
		{"bidi overrides and isolates", "x\u202ey\u202a\u2066z\u2069", `x\u202ey\u202a\u2066z\u2069`},
		{"bidi marks and separators", "\u200e\u200f\u061c\u2028\u2029", `\u200e\u200f\u061c\u2028\u2029`},
		{"invalid UTF-8, one U+FFFD per byte", "a\xff\xfeb\xe2\x82", "a\uFFFD\uFFFDb\uFFFD\uFFFD"},
		{"a U+FFFD of the text is kept", "a\uFFFDb", "a\uFFFDb"},
		{"backslashes are kept", `C:\temp \x1b`, `C:\temp \x1b`},
		{"a workflow command at the start", "::error title=x::pwned", `\x3a:error title=x::pwned`},
		{"a workflow command after blanks", " \t\u00a0::add-mask::x", " \t\u00a0\\x3a:add-mask::x"},
		{"a workflow command after an escaped control", "\v::x::y", `\x0b::x::y`},
		{"a workflow command mid-line is text", "note ::error::x", "note ::error::x"},
		{"one colon", ":error:x", ":error:x"},
		{"legacy and Azure commands anywhere", "a ##[error]b ##vso[task.setvariable]c ##VSO[x] #[ok]",
			`a ##\x5berror]b ##vso\x5btask.setvariable]c ##VSO\x5bx] #[ok]`},
		{"at the bound", strings.Repeat("a", MaxLineBytes), strings.Repeat("a", MaxLineBytes)},
		{"one byte over the bound", strings.Repeat("a", MaxLineBytes+1),
			strings.Repeat("a", MaxLineBytes-len(" … (clipped, 1025 bytes)")) + " … (clipped, 1025 bytes)"},
		{"300 KB", strings.Repeat("A", 300_000),
			strings.Repeat("A", MaxLineBytes-len(" … (clipped, 300000 bytes)")) + " … (clipped, 300000 bytes)"},
		{"an escape is never cut", strings.Repeat("x", MaxLineBytes-3) + "\x1b",
			strings.Repeat("x", MaxLineBytes-len(" … (clipped, 1022 bytes)")) + " … (clipped, 1022 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SanitizeLine(tc.in)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len(got), MaxLineBytes)
			assert.Equal(t, got, SanitizeLine(got), "idempotent")
		})
	}
}

// TestSanitizeLineHostile checks the properties every printer relies on,
// over hostile lines.
func TestSanitizeLineHostile(t *testing.T) {
	for _, in := range hostile {
		got := SanitizeLine(in)
		name := in
		if len(name) > 40 {
			name = name[:40]
		}
		assert.True(t, utf8.ValidString(got), "%q: valid UTF-8", name)
		assert.LessOrEqual(t, len(got), MaxLineBytes, "%q: bounded", name)
		for _, r := range got {
			assert.False(t, r < 0x20 && r != '\t' || r >= 0x7f && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069,
				"%q: no control or bidi rune left (%U in %q)", name, r, got)
		}
		if len(in) > MaxLineBytes {
			assert.True(t, strings.HasSuffix(got, " (clipped, "+strconv.Itoa(len(in))+" bytes)"), "%q: clip note in %q", name, got)
		}
		assert.Equal(t, got, SanitizeLine(got), "%q: idempotent", name)
	}
}

func TestSanitizeLines(t *testing.T) {
	assert.Nil(t, SanitizeLines(nil))
	in := []string{"ok", "\x1b[2J", "a\rb"}
	got := SanitizeLines(in)
	assert.Equal(t, []string{"ok", `\x1b[2J`, `a\rb`}, got)
	assert.Equal(t, []string{"ok", "\x1b[2J", "a\rb"}, in, "the input is not changed")
}

func TestSanitizeText(t *testing.T) {
	assert.Equal(t, "release chat: rollout failed\n  \\x1b]0;x\\x07: bad\\r::error::x", SanitizeText("release chat: rollout failed\n  \x1b]0;x\x07: bad\r::error::x"))
	long := strings.Repeat("m", MaxLineBytes+100) + "; rolled back to revision 3"
	assert.Equal(t, long, SanitizeText(long), "an error line keeps its tail up to MaxTextLineBytes")
	got := SanitizeText("a\n" + strings.Repeat("z", 100_000))
	lines := strings.Split(got, "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, "a", lines[0])
	assert.LessOrEqual(t, len(lines[1]), MaxTextLineBytes)
	assert.True(t, strings.HasSuffix(lines[1], " … (clipped, 100000 bytes)"))
}

// TestPrintersSanitize: the plain and live progress printers and
// WriteDiagnosis print hostile text escaped, even when it did not come
// through a RolloutWatcher.
func TestPrintersSanitize(t *testing.T) {
	bad := "\x1b]0;t\x07\x1b[2J\rdone: deployed\n::error::x \xff ##[error]x " + strings.Repeat("B", 5000)
	events := []rollout.Event{
		{Time: t0, Object: depRef, Status: rollout.StatusInProgress, Message: bad,
			Rollout: &rollout.RolloutProgress{Deployment: "chat", NewReplicaSet: "chat-new", Desired: 1, Verdict: rollout.VerdictProgressing, Warning: bad}},
		{Time: t0, Object: depRef, Status: rollout.StatusFailed, Message: bad,
			Rollout: &rollout.RolloutProgress{Deployment: "chat", NewReplicaSet: "chat-new", Desired: 1, Verdict: rollout.VerdictCrashLoop,
				Cause: vllmcause.CauseUnknown, Evidence: bad, Hints: []string{bad}}},
		{Time: t0, Object: object.Ref{Version: "v1", Kind: "Service", Namespace: ns, Name: "chat"}, Status: rollout.StatusUnknown, Message: bad},
	}
	// A progress line is a timestamp and an object before the sanitised
	// text.
	bound := MaxLineBytes + 100

	var plain bytes.Buffer
	pp := NewPlainPrinter(&plain)
	for _, ev := range events {
		require.NoError(t, pp.Print(ev))
	}
	requireSafe(t, "plain progress", plain.String(), bound)
	assert.Contains(t, plain.String(), `\x1b]0;t\x07\x1b[2J\rdone: deployed\n::error::x `+"\uFFFD")

	var live bytes.Buffer
	lp := NewLivePrinter(&live)
	for _, ev := range events {
		require.NoError(t, lp.Print(ev))
	}
	// The live view's own cursor movements are its only controls.
	own := strings.NewReplacer("\r\x1b[2K", "", "\x1b[1A", "", "\x1b[2A", "").Replace(live.String())
	requireSafe(t, "live progress", own, bound)
	assert.Contains(t, own, `\x1b]0;t\x07\x1b[2J\rdone: deployed`)

	var diag bytes.Buffer
	require.NoError(t, WriteDiagnosis(&diag, &rollout.Diagnosis{Verdict: rollout.VerdictCrashLoop, Reason: bad, Object: "deployment/chat", Message: bad,
		Evidence: bad, Events: []string{bad}, LogTail: []string{bad, "```", "::error::x"}, LogNote: bad, Hints: []string{bad}}))
	requireSafe(t, "WriteDiagnosis", diag.String(), bound)
}
