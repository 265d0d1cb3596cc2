package canary

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestGateOutputTailSanitized: the canary gate's output is untrusted text
// bound for the record, the result document and terminals: its tail holds
// its lines escaped, valid and clipped.
func TestGateOutputTailSanitized(t *testing.T) {
	b := &tailBuffer{limit: gateOutputLimit}
	_, _ = b.Write([]byte("ok\n\x1b]0;pwned\x07\x1b[2J\n50% done\rdone: deployed\r\n::error::x\n\xff\xfe\n" + strings.Repeat("Z", 5000) + "\n"))
	got := b.lines(gateTailLines)
	assert.Equal(t, []string{"ok", `\x1b]0;pwned\x07\x1b[2J`, `50% done\rdone: deployed`, `\x3a:error::x`, "\uFFFD\uFFFD"}, got[:5])
	assert.Len(t, got, 6)
	assert.True(t, strings.HasSuffix(got[5], " … (clipped, 5000 bytes)"), "%.80q", got[5])
}
