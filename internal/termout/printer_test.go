// Tests of the progress printers and of the diagnosis rendering.

package termout

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/object"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

var depRef = object.Ref{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "chat"}

// progressEvents is a rollout as a RolloutWatcher reports it: progress, a
// warning about an old pod, a Service becoming Current, the end.
func progressEvents() []rollout.Event {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	p := func(updated, ready, available int32, v rollout.Verdict, warning string) *rollout.RolloutProgress {
		return &rollout.RolloutProgress{Deployment: "chat", NewReplicaSet: "chat-7d9f8c6b5", PodTemplateHash: "7d9f8c6b5", Revision: "2",
			OldReplicaSets: []string{"chat-5f4d7b9c8"}, Desired: 2, Updated: updated, Ready: ready, Available: available, Verdict: v, Warning: warning}
	}
	return []rollout.Event{
		{Time: at(0), Object: depRef, Status: rollout.StatusInProgress, Message: "1 out of 2 new replicas have been updated", Rollout: p(1, 2, 2, rollout.VerdictProgressing, "")},
		{Time: at(1), Object: depRef, Status: rollout.StatusInProgress, Message: "1 out of 2 new replicas have been updated",
			Rollout: p(1, 2, 2, rollout.VerdictProgressing, "pod chat-5f4d7b9c8-x2k4q (old ReplicaSet chat-5f4d7b9c8): Warning BackOff: Back-off restarting failed container")},
		{Time: at(2), Object: object.Ref{Version: "v1", Kind: "Service", Namespace: ns, Name: "chat"}, Status: rollout.StatusCurrent, Message: "Service is ready"},
		{Time: at(3), Object: depRef, Status: rollout.StatusInProgress, Message: "1 of 2 updated replicas are available", Rollout: p(2, 2, 1, rollout.VerdictProgressing, "")},
		{Time: at(4), Object: depRef, Status: rollout.StatusCurrent, Message: "successfully rolled out", Rollout: p(2, 2, 2, rollout.VerdictRolledOut, "")},
	}
}

func printAll(t *testing.T, p ProgressPrinter) {
	t.Helper()
	ch := make(chan rollout.Event)
	go func() {
		defer close(ch)
		for _, e := range progressEvents() {
			ch <- e
		}
	}()
	require.NoError(t, PrintProgress(p, ch))
}

func TestPlainPrinter(t *testing.T) {
	var b bytes.Buffer
	printAll(t, NewPlainPrinter(&b))
	want := `2026-11-30T01:02:03Z deployment/chat: 1/2 updated, 2 ready, 2 available (new rs chat-7d9f8c6b5; old rs chat-5f4d7b9c8)
2026-11-30T01:02:04Z deployment/chat: warning: pod chat-5f4d7b9c8-x2k4q (old ReplicaSet chat-5f4d7b9c8): Warning BackOff: Back-off restarting failed container
2026-11-30T01:02:05Z service/chat: Current: Service is ready
2026-11-30T01:02:06Z deployment/chat: 2/2 updated, 2 ready, 1 available (new rs chat-7d9f8c6b5; old rs chat-5f4d7b9c8)
2026-11-30T01:02:07Z deployment/chat: 2/2 updated, 2 ready, 2 available (new rs chat-7d9f8c6b5; old rs chat-5f4d7b9c8): rolled out
`
	assert.Equal(t, want, b.String())
}

func TestPlainPrinterFailure(t *testing.T) {
	var b bytes.Buffer
	p := NewPlainPrinter(&b)
	require.NoError(t, p.Print(rollout.Event{Time: t0, Object: depRef, Status: rollout.StatusFailed,
		Message: "OOMKilled: pod chat-7d9f8c6b5-abcde (node gpu-node-1), container vllm, exit code 137: OOMKilled, exit code 137",
		Rollout: &rollout.RolloutProgress{Deployment: "chat", NewReplicaSet: "chat-7d9f8c6b5", Desired: 2, Updated: 1, Ready: 2, Available: 2, Verdict: rollout.VerdictOOMKilled}}))
	require.NoError(t, p.Print(rollout.Event{Time: t0, Object: object.Ref{Version: "v1", Kind: "ConfigMap", Name: "cfg"}, Status: rollout.StatusNotFound, Message: "not found"}))
	assert.Equal(t, `2026-11-30T01:02:03Z deployment/chat: 1/2 updated, 2 ready, 2 available (new rs chat-7d9f8c6b5): failed: OOMKilled: pod chat-7d9f8c6b5-abcde (node gpu-node-1), container vllm, exit code 137: OOMKilled, exit code 137
2026-11-30T01:02:03Z configmap/cfg: NotFound: not found
`, b.String())
}

func TestLivePrinter(t *testing.T) {
	var b bytes.Buffer
	printAll(t, NewLivePrinter(&b))
	const clear = "\r\x1b[2K"
	dep1 := "deployment/chat: 1/2 updated, 2 ready, 2 available (new rs chat-7d9f8c6b5; old rs chat-5f4d7b9c8)"
	dep2 := "deployment/chat: 2/2 updated, 2 ready, 1 available (new rs chat-7d9f8c6b5; old rs chat-5f4d7b9c8)"
	dep3 := "deployment/chat: 2/2 updated, 2 ready, 2 available (new rs chat-7d9f8c6b5; old rs chat-5f4d7b9c8): rolled out"
	svc := "service/chat: Current: Service is ready"
	warning := "2026-11-30T01:02:04Z deployment/chat: warning: pod chat-5f4d7b9c8-x2k4q (old ReplicaSet chat-5f4d7b9c8): Warning BackOff: Back-off restarting failed container"
	want := clear + dep1 + "\n" +
		"\x1b[1A" + clear + warning + "\n" + clear + dep1 + "\n" +
		"\x1b[1A" + clear + dep1 + "\n" + clear + svc + "\n" +
		"\x1b[2A" + clear + dep2 + "\n" + clear + svc + "\n" +
		"\x1b[2A" + clear + dep3 + "\n" + clear + svc + "\n"
	assert.Equal(t, want, b.String())
}

func TestJSONPrinter(t *testing.T) {
	var b bytes.Buffer
	printAll(t, NewJSONPrinter(&b))
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 5, "one object per line")
	var got rollout.Event
	require.NoError(t, json.Unmarshal([]byte(lines[4]), &got))
	assert.Equal(t, progressEvents()[4].Rollout, got.Rollout)
	assert.JSONEq(t, `{"time":"2026-11-30T01:02:07Z","object":{"group":"apps","version":"v1","kind":"Deployment","namespace":"llm","name":"chat"},
		"status":"Current","message":"successfully rolled out",
		"rollout":{"deployment":"chat","newReplicaSet":"chat-7d9f8c6b5","podTemplateHash":"7d9f8c6b5","revision":"2","oldReplicaSets":["chat-5f4d7b9c8"],
		"desired":2,"updated":2,"ready":2,"available":2,"verdict":"RolledOut"}}`, lines[4])
	assert.NotContains(t, lines[2], "rollout", "no rollout for other objects")
}

func TestNewProgressPrinter(t *testing.T) {
	var b bytes.Buffer
	p, err := NewProgressPrinter(&b, ProgressAuto)
	require.NoError(t, err)
	assert.IsType(t, &PlainPrinter{}, p, "a buffer is not a terminal")
	p, err = NewProgressPrinter(&b, ProgressJSON)
	require.NoError(t, err)
	assert.IsType(t, &JSONPrinter{}, p)
	f, err := os.CreateTemp(t.TempDir(), "progress")
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, IsTerminal(f), "a file is not a terminal")
	p, err = NewProgressPrinter(f, "")
	require.NoError(t, err)
	assert.IsType(t, &PlainPrinter{}, p)
	_, err = NewProgressPrinter(&b, "yaml")
	require.ErrorContains(t, err, `unknown progress format "yaml"`)
}

func TestWriteDiagnosis(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteDiagnosis(&b, &rollout.Diagnosis{
		Verdict: rollout.VerdictOOMKilled, Reason: "OOMKilled", Object: "deployment/chat", Pod: "chat-7d9f8c6b5-abcde", Node: "gpu-node-1",
		Container: "vllm", ExitCode: 137, Message: "OOMKilled, exit code 137",
		Events:  []string{"Warning BackOff: Back-off restarting failed container"},
		LogTail: []string{"RuntimeError: Engine core initialization failed. See root cause above."},
		Hints:   []string{"raise the memory limit"},
	}))
	assert.Equal(t, `rollout failed: OOMKilled
  verdict:   OOMKilled
  object:    deployment/chat
  pod:       chat-7d9f8c6b5-abcde (node gpu-node-1)
  container: vllm (exit code 137, 0 restarts)
  message:   OOMKilled, exit code 137
  events:
    Warning BackOff: Back-off restarting failed container
  log tail:
    RuntimeError: Engine core initialization failed. See root cause above.
  hints:
    - raise the memory limit
`, b.String())
}

func TestDiagnosisJSONMatchesTheRecordsFailure(t *testing.T) {
	d := rollout.Diagnosis{Verdict: rollout.VerdictCrashLoop, Reason: "CrashLoopBackOff", Object: "deployment/chat", Pod: "p", Node: "n", Container: "c",
		ExitCode: 1, RestartCount: 2, Message: "m", Events: []string{"e"}, LogTail: []string{"l"}, Hints: []string{"h"}}
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	for _, k := range []string{"reason", "object", "pod", "container", "exitCode", "restartCount", "message", "events", "logTail", "node", "verdict", "hints"} {
		assert.Contains(t, m, k)
	}
	assert.Equal(t, "CrashLoopBackOff: pod p (node n), container c, exit code 1, 2 restarts: m", d.Summary())
}

func TestWriteDiagnosisNeverStarted(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteDiagnosis(&b, &rollout.Diagnosis{
		Verdict: rollout.VerdictTimeout, Reason: "Timeout", Object: "deployment/chat", Pod: "chat-x", Container: "vllm",
		Message: "waiting for rollout to finish: 0 of 2 updated replicas are available", LogNote: "container vllm never started: there are no logs",
	}))
	assert.Equal(t, `rollout timed out: Timeout
  verdict:   Timeout
  object:    deployment/chat
  pod:       chat-x
  container: vllm
  message:   waiting for rollout to finish: 0 of 2 updated replicas are available
  logs:      container vllm never started: there are no logs
`, b.String())
}

func TestPhasesLine(t *testing.T) {
	phases := []rollout.PodPhase{
		{Pod: "a", Phase: rollout.PhaseReady},
		{Pod: "b", Phase: rollout.PhaseLoading, StartupDeadline: t0.Add(30 * time.Minute)},
		{Pod: "c", Phase: rollout.PhaseLoading, StartupDeadline: t0.Add(20 * time.Minute)},
		{Pod: "d", Phase: "ErrImagePull"},
		{Pod: "e", Phase: rollout.PhasePulling},
	}
	assert.Equal(t, "pods: 1 Pulling, 2 Loading (startup probe: 19m50s left), 1 Ready, 1 ErrImagePull", phasesLine(phases, t0.Add(10*time.Second)))
	assert.Equal(t, "pods: 1 Pulling, 2 Loading (startup probe budget spent), 1 Ready, 1 ErrImagePull", phasesLine(phases, t0.Add(time.Hour)))
}

func TestFailureProgressLines(t *testing.T) {
	ev := rollout.Event{Time: t0, Object: depRef, Status: rollout.StatusFailed,
		Message: "CrashLoopBackOff (cause gpu-oom): pod chat-7d9f8c6b5-abcde",
		Rollout: &rollout.RolloutProgress{Deployment: "chat", NewReplicaSet: "chat-7d9f8c6b5", Desired: 2, Updated: 1, Ready: 2, Available: 2,
			Verdict: rollout.VerdictCrashLoop, Cause: vllmcause.CauseGPUOOM, Evidence: "torch.OutOfMemoryError: CUDA out of memory.",
			Hints: []string{"lower `--gpu-memory-utilization`", "or shard"}}}
	var b bytes.Buffer
	require.NoError(t, NewPlainPrinter(&b).Print(ev))
	assert.Equal(t, `2026-11-30T01:02:03Z deployment/chat: 1/2 updated, 2 ready, 2 available (new rs chat-7d9f8c6b5): failed: CrashLoopBackOff (cause gpu-oom): pod chat-7d9f8c6b5-abcde
2026-11-30T01:02:03Z deployment/chat: cause: gpu-oom: torch.OutOfMemoryError: CUDA out of memory.
2026-11-30T01:02:03Z deployment/chat: hint: lower `+"`--gpu-memory-utilization`"+`
2026-11-30T01:02:03Z deployment/chat: hint: or shard
`, b.String())

	b.Reset()
	require.NoError(t, NewLivePrinter(&b).Print(ev))
	assert.Contains(t, b.String(), "deployment/chat: cause: gpu-oom: torch.OutOfMemoryError")

	b.Reset()
	require.NoError(t, WriteDiagnosis(&b, &rollout.Diagnosis{Verdict: rollout.VerdictCrashLoop, Reason: "CrashLoopBackOff", Cause: vllmcause.CauseGPUOOM, Evidence: "torch.OutOfMemoryError: CUDA out of memory."}))
	assert.Contains(t, b.String(), "  cause:     gpu-oom\n  evidence:  torch.OutOfMemoryError: CUDA out of memory.\n")

	progressing := rollout.Event{Time: t0, Object: depRef, Status: rollout.StatusInProgress, Rollout: &rollout.RolloutProgress{Deployment: "chat", Desired: 1,
		Verdict: rollout.VerdictProgressing, Pods: []rollout.PodPhase{{Pod: "a", Phase: rollout.PhaseLoading, StartupDeadline: t0.Add(time.Minute)}}}}
	assert.True(t, strings.HasSuffix(eventLine(progressing), ": 0/1 updated, 0 ready, 0 available, new pods: 1 Loading (startup probe: 1m0s left)"), eventLine(progressing))
}
