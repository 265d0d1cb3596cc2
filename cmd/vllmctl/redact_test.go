package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/wait"
)

// TestSecretValuesNeverPrinted: a rollout whose watcher reports a
// rendered Secret's value (a pod logging its token, an error quoting it)
// shows it nowhere: not in progress lines (plain or JSON), not in the
// result document, not in the error.
func TestSecretValuesNeverPrinted(t *testing.T) {
	const token = "hf_CanaryTokenValue42"
	leak := func(_ context.Context, objs []wait.ObjectStatus, opts wait.Options) (wait.Result, error) {
		res := wait.Result{Outcome: wait.OutcomeFailed}
		for _, o := range objs {
			if o.Object.Kind == "Deployment" {
				o.Status, o.Message = wait.StatusFailed, "container exited: invalid token "+token
			}
			res.Objects = append(res.Objects, o)
		}
		res.Diagnosis = &wait.Diagnosis{Verdict: wait.VerdictCrashLoop, Reason: "CrashLoopBackOff", Object: "deployment/chat",
			Message: "401 Unauthorized for token " + token, Evidence: "HF_TOKEN=" + token,
			LogTail: []string{"loading model", "using token " + token[:12] + "…", "401 Unauthorized"}}
		return res, &wait.RolloutFailedError{Diagnosis: res.Diagnosis, NotReady: &wait.NotReadyError{Outcome: wait.OutcomeFailed}}
	}
	for _, progress := range []string{"plain", "json"} {
		for _, output := range []string{"json", "table"} {
			t.Run(progress+"/"+output, func(t *testing.T) {
				f := newReleaseFakes()
				f.waiter.Script = leak
				stdout, stderr, code := f.run(t, "deploy", "chat", "../../testdata/charts/diffdemo", "--set", "secret.token="+token,
					"--no-rollback", "--skip-preflight", "--progress", progress, "-o", output)
				require.Equal(t, 4, code, "stderr: %s", stderr)
				for _, s := range []string{stdout, stderr} {
					assert.NotContains(t, s, token)
					assert.NotContains(t, s, token[:12], "not even cut short")
				}
				assert.Contains(t, stdout+stderr, "(redacted)", "the lines are kept, the value replaced")
				assert.Contains(t, stdout, "401 Unauthorized", "what is not secret stays")

				// The record holds what deploy printed: status prints it.
				for _, o := range []string{"table", "json", "yaml"} {
					stdout, stderr, code := f.run(t, "status", "chat", "-o", o)
					require.Equal(t, 0, code, "status -o %s: %s", o, stderr)
					assert.NotContains(t, stdout+stderr, token, "status -o %s", o)
					assert.NotContains(t, stdout+stderr, token[:12], "status -o %s", o)
					assert.Contains(t, stdout, "401 Unauthorized", "status -o %s", o)
				}
			})
		}
	}
}
