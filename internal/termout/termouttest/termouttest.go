package termouttest

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// HostileLog is a container log crafted against terminals and CI
// summaries.
const HostileLog = "INFO starting ##[error]pwned\n" +
	"\x1b]0;pwned title\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07\n" +
	"Loading weights\rdone: deployed\n" +
	"```\n" +
	"::error title=x::pwned\n" +
	"bad bytes \xff\xfe and \u202eevil\n"

// RequireSafe fails unless text holds only sanitised lines: no control
// character but tab (LF between lines), no bidi control, valid UTF-8, no
// CI runner command, each line at most bound bytes.
func RequireSafe(t *testing.T, what, text string, bound int) {
	t.Helper()
	require.True(t, utf8.ValidString(text), "%s: valid UTF-8:\n%q", what, text)
	for _, l := range strings.Split(text, "\n") {
		require.LessOrEqual(t, len(l), bound, "%s: a line within the bound: %.80q…", what, l)
		require.False(t, strings.HasPrefix(strings.TrimLeft(l, " \t"), "::"), "%s: a workflow command: %.80q", what, l)
		require.NotContains(t, l, "##[", "%s: a legacy workflow command", what)
		for _, r := range l {
			require.False(t, r < 0x20 && r != '\t' || r >= 0x7f && r <= 0x9f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069,
				"%s: %U in line %q", what, r, l)
		}
	}
}
