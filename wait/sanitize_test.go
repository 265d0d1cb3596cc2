// The rollout watcher's diagnosis of hostile text: sanitised at its
// source.

package wait

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout"
	"github.com/vllmctl/vllmctl/internal/termout/termouttest"
)

// TestRolloutWatcherSanitizesDiagnosis: the diagnosis of a crash whose
// log, events and termination message are hostile holds them escaped,
// valid and clipped, as do the events, the result's statuses and the
// error, so that the record, the JSON outputs and every printer get safe
// text.
func TestRolloutWatcherSanitizesDiagnosis(t *testing.T) {
	huge := strings.Repeat("A", 300_000)
	h := startHarness(t, harnessOptions{logs: func(*corev1.PodLogOptions) (string, error) {
		return termouttest.HostileLog + huge + "\n", nil
	}})
	p := testPod(h.newRS, "a", running("vllm", 0))
	h.createPod(p)
	h.progressed()
	h.createEvent(testEvent("ev1", "Pod", p.Name, p.UID, "Warning", "BackOff", "\x1b]52;c;cHduZWQ=\x07back-off\r::error::x", t0))
	h.await("the BackOff event", h.warned("Warning BackOff: "))
	last := terminated("Error", 1, "sim://c/2")
	last.Message = "\x1b[2Jboom\rdone: deployed " + huge
	p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("vllm", "CrashLoopBackOff", 2, last)}
	h.updatePod(p)
	res, err := h.result()
	d := requireFailure(t, res, err, rollout.VerdictCrashLoop)

	require.Len(t, d.LogTail, 7)
	assert.Equal(t, []string{
		`INFO starting ##\x5berror]pwned`,
		`\x1b]0;pwned title\x07\x1b[2J\x1b]52;c;cHduZWQ=\x07`,
		`Loading weights\rdone: deployed`,
		"```",
		`\x3a:error title=x::pwned`,
		"bad bytes \uFFFD\uFFFD and \\u202eevil",
	}, d.LogTail[:6])
	assert.True(t, d.LogTail[6] == termout.SanitizeLine(huge), "the 300 KB line is clipped: %.100q", d.LogTail[6])
	assert.Equal(t, []string{`Warning BackOff: \x1b]52;c;cHduZWQ=\x07back-off\r::error::x`}, d.Events)
	assert.True(t, strings.Contains(d.Message, `last termination: Error, exit code 1: \x1b[2Jboom\rdone: deployed AAA`), "%.200q", d.Message)
	assert.True(t, regexp.MustCompile(` … \(clipped, 3000\d\d bytes\)$`).MatchString(d.Message) && len(d.Message) <= termout.MaxLineBytes, "%.200q", d.Message)

	b, jerr := json.Marshal(d)
	require.NoError(t, jerr)
	termouttest.RequireSafe(t, "the diagnosis as JSON", string(b), 1<<20)
	for _, s := range append(append(append([]string{d.Reason, d.Message, d.Evidence, d.LogNote, err.Error()}, d.Events...), d.LogTail...), d.Hints...) {
		termouttest.RequireSafe(t, "a diagnosis field", s, termout.MaxTextLineBytes)
	}
	for _, o := range res.Objects {
		termouttest.RequireSafe(t, "an object's message", o.Message, termout.MaxLineBytes)
	}
	for _, e := range h.eventsCopy() {
		termouttest.RequireSafe(t, "an event's message", e.Message, termout.MaxLineBytes)
		if e.Rollout != nil {
			termouttest.RequireSafe(t, "an event's warning", e.Rollout.Warning, termout.MaxLineBytes)
		}
	}
}
