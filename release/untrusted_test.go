package release

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestProgressEventStringSanitized: a plain progress line shows the
// object, status and message escaped.
func TestProgressEventStringSanitized(t *testing.T) {
	ev := ProgressEvent{Time: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), Release: "chat", Revision: 2, Phase: PhaseWait,
		Object: "apps/v1 Deployment ml/chat\x1b[2J", Status: "Failed\r", Message: "\x1b]0;t\x07back-off\rdone: deployed ##[error]x " + strings.Repeat("M", 3000)}
	// The message is one line: its line breaks and CRs are spaces.
	s := ev.String()
	assert.True(t, strings.HasPrefix(s, "2026-03-01T10:00:00Z chat#2 wait: apps/v1 Deployment ml/chat\\x1b[2J: Failed\\r: \\x1b]0;t\\x07back-off done: deployed ##\\x5berror]x MMM"), "%.200q", s)
	assert.NotContains(t, s, "\x1b")
	assert.NotContains(t, s, "\r")
	assert.LessOrEqual(t, len(s), 3*1024, "each part clipped")
}
