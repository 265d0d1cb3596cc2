// The sanitiser of untrusted text: what containers log, what events and
// termination messages say and what a canary gate prints come from whoever
// controls the image or the cluster, and reach terminals, tables, release
// records and CI summaries.

package termout

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLineBytes bounds a line of untrusted text once sanitised: a longer
// line is clipped, and ends with a note saying how long it was, so that
// the line with its note is at most MaxLineBytes bytes. 1 KiB keeps a
// Python traceback's longest lines whole and a 300 KB log line out of
// terminals, tables and records.
const MaxLineBytes = 1024

// MaxTextLineBytes bounds each line of a text SanitizeText sanitises (an
// error message): such a line is assembled from parts sanitised (and
// bounded) at their source, and must keep its tail ("; rolled back to
// revision 3").
const MaxTextLineBytes = 8 << 10

// SanitizeLine makes one line of untrusted text safe to print on a
// terminal, in a table, a release record or a CI summary:
//
//   - control characters are shown escaped, not interpreted: CR as `\r`,
//     LF as `\n`, ESC (so CSI and OSC sequences: title, clear screen,
//     clipboard writes) as `\x1b`, BEL as `\x07`, every other C0 control
//     and DEL as `\xNN`, and the C1 controls U+0080–U+009F as `\u009b`;
//     tab is kept;
//   - the Unicode bidirectional overrides, embeddings, isolates and marks
//     (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C), which
//     reorder what a terminal or a browser shows, and the line and
//     paragraph separators (U+2028, U+2029) are escaped as `\u202e`;
//   - invalid UTF-8 is replaced by U+FFFD, one per invalid byte;
//   - what CI runners read as commands in a job log stays text: a line
//     that starts with "::" after blanks (a GitHub Actions workflow
//     command) starts with `\x3a:` instead, and the '[' of "##[" (GitHub's
//     legacy commands and Azure Pipelines' formatting commands, honoured
//     anywhere in a line) and of "##vso[" (Azure Pipelines' logging
//     commands) is shown as `\x5b`;
//   - a line longer than MaxLineBytes once escaped is clipped at a rune
//     boundary and ends with " … (clipped, N bytes)", N the length of s.
//
// Backslashes are kept as they are: a log line that says `\x1b` shows
// the same as an escaped ESC, which is harmless. SanitizeLine is
// idempotent: sanitising its result changes nothing.
func SanitizeLine(s string) string { return sanitize(s, MaxLineBytes) }

// SanitizeLines returns lines sanitised with SanitizeLine, in a new slice
// (nil for nil).
func SanitizeLines(lines []string) []string {
	if lines == nil {
		return nil
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = SanitizeLine(l)
	}
	return out
}

// SanitizeText sanitises a text of several lines (an error message) as
// SanitizeLine does, keeping its line breaks ("\n"), each line bounded by
// MaxTextLineBytes.
func SanitizeText(s string) string {
	if !strings.Contains(s, "\n") {
		return sanitize(s, MaxTextLineBytes)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = sanitize(l, MaxTextLineBytes)
	}
	return strings.Join(lines, "\n")
}

// sanitize escapes s as SanitizeLine documents, clipped to limit bytes
// (note included).
func sanitize(s string, limit int) string {
	if len(s) <= limit && printableASCII(s) {
		return s
	}
	// Escaping never shortens: every byte of s gives at least one byte of
	// output. So a clip happens exactly when s is longer than limit or its
	// escapes make it so, and N in the note is len(s).
	note := fmt.Sprintf(" … (clipped, %d bytes)", len(s))
	keep := limit - len(note)
	out := make([]byte, 0, min(len(s), limit)+8)
	cut := 0
	// lead: only blanks so far (a CI runner trims them before "::").
	lead := true
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case lead && r == ':' && strings.HasPrefix(s[i+1:], ":"):
			out = append(out, `\x3a`...)
		case r == '[' && ciCommandPrefix(s[:i]):
			out = append(out, `\x5b`...)
		case r == utf8.RuneError && size == 1:
			out = utf8.AppendRune(out, utf8.RuneError)
		case r == '\t':
			out = append(out, '\t')
		case r == '\r':
			out = append(out, `\r`...)
		case r == '\n':
			out = append(out, `\n`...)
		case r < 0x20 || r == 0x7f:
			out = fmt.Appendf(out, `\x%02x`, r)
		case escapedRune(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, s[i:i+size]...)
		}
		// Still blanks only: a tab, or a space written as it is.
		lead = lead && (r == '\t' || r >= ' ' && r != 0x7f && unicode.IsSpace(r) && !escapedRune(r))
		i += size
		if len(out) <= keep {
			cut = len(out)
		} else if len(out) > limit {
			return string(out[:cut]) + note
		}
	}
	return string(out)
}

// printableASCII reports whether s holds only printable ASCII and tabs,
// and nothing a CI runner reads as a command.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c >= 0x7f || c == '[' && ciCommandPrefix(s[:i]) {
			return false
		}
	}
	return !strings.HasPrefix(strings.TrimLeft(s, " \t"), "::")
}

// ciCommandPrefix reports whether before, the text before a '[', ends
// with "##" or "##vso" (in any case): that '[' would open a CI runner's
// command.
func ciCommandPrefix(before string) bool {
	if strings.HasSuffix(before, "##") {
		return true
	}
	n := len(before)
	return n >= 5 && strings.EqualFold(before[n-5:], "##vso")
}

// escapedRune reports whether r, a valid rune above ASCII, is shown
// escaped: a C1 control, a bidirectional control or a line or paragraph
// separator.
func escapedRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}
