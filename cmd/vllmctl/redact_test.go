package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/wait"
)

// leakingRollout is a fake watcher's script: the rollout fails, its
// Deployment's message and diagnosis as given (they echo a Secret).
func leakingRollout(message string, d rollout.Diagnosis) func(context.Context, []rollout.ObjectStatus, wait.Options) (wait.Result, error) {
	return func(_ context.Context, objs []rollout.ObjectStatus, _ wait.Options) (wait.Result, error) {
		res := wait.Result{Outcome: wait.OutcomeFailed}
		for _, o := range objs {
			if o.Object.Kind == "Deployment" {
				o.Status, o.Message = rollout.StatusFailed, message
			}
			res.Objects = append(res.Objects, o)
		}
		diag := d
		res.Diagnosis = &diag
		return res, &wait.RolloutFailedError{Diagnosis: res.Diagnosis, NotReady: &wait.NotReadyError{Outcome: wait.OutcomeFailed}}
	}
}

// TestSecretValuesNeverPrinted: a rollout whose watcher reports a
// rendered Secret's value (a pod logging its token, an error quoting it)
// shows it nowhere: not in progress lines (plain or JSON), not in the
// result document, not in the error.
func TestSecretValuesNeverPrinted(t *testing.T) {
	const token = "hf_CanaryTokenValue42"
	leak := leakingRollout("container exited: invalid token "+token, rollout.Diagnosis{Verdict: rollout.VerdictCrashLoop,
		Reason: "CrashLoopBackOff", Object: "deployment/chat",
		Message: "401 Unauthorized for token " + token, Evidence: "HF_TOKEN=" + token,
		LogTail: []string{"loading model", "using token " + token[:12] + "…", "401 Unauthorized"}})
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

				// wait renders nothing: it learns the revision's Secrets
				// from its record.
				stdout, stderr, code = f.run(t, "wait", "chat", "--progress", progress, "-o", output)
				require.NotEqual(t, 0, code, "stderr: %s", stderr)
				assert.NotContains(t, stdout+stderr, token, "wait")
				assert.NotContains(t, stdout+stderr, token[:12], "wait")
				assert.Contains(t, stdout+stderr, "(redacted)", "wait")

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

// TestSecretValuesNotInNotes: a chart whose NOTES.txt echoes the value it
// put into a Secret prints it nowhere: not after the deploy (table: on
// stderr; json: the result's notes), not in get notes or get values.
func TestSecretValuesNotInNotes(t *testing.T) {
	const token = "hf_NotesTokenValue77"
	dir := writeChartFiles(t, map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: notesleak\nversion: 0.1.0\n",
		"values.yaml": "token: \"\"\n",
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-creds\n" +
			"stringData:\n  token: {{ .Values.token | quote }}\n",
		"templates/NOTES.txt": "Your token is {{ .Values.token }}.\nThe release {{ .Release.Name }} is ready.\nIt starts {{ trunc 12 .Values.token }}\n",
	})
	for _, output := range []string{"table", "json"} {
		t.Run(output, func(t *testing.T) {
			f := newReleaseFakes()
			stdout, stderr, code := f.run(t, "deploy", "chat", dir, "--set", "token="+token, "--skip-preflight", "-o", output)
			require.Equal(t, 0, code, "stderr: %s", stderr)
			assert.NotContains(t, stdout+stderr, token)
			assert.Contains(t, stdout+stderr, "Your token is (redacted).")
			assert.Contains(t, stdout+stderr, "The release chat is ready.", "the other lines stay")

			assert.NotContains(t, stdout+stderr, token[:12], "a line with a part of it is withheld")
			// The record keeps the notes as printed: redacted line by line.
			want := "Your token is (redacted).\nThe release chat is ready.\n" + diff.Withheld + "\n"
			assert.Equal(t, want, recordOf(t, f, 1).Notes)

			stdout, stderr, code = f.run(t, "get", "notes", "chat")
			require.Equal(t, 0, code, stderr)
			assert.Equal(t, want, stdout)
			stdout, stderr, code = f.run(t, "get", "values", "chat", "--all", "-o", "json")
			require.Equal(t, 0, code, stderr)
			assert.NotContains(t, stdout, token)
			assert.Contains(t, stdout, `"token": "(redacted)"`)
		})
	}
}

// TestSecretValuesNotInTestHookOutput: a test hook that logs a value of
// the release's own Secret (not one of the hooks') before it fails shows
// it nowhere in `vllmctl test`'s report, table or JSON.
func TestSecretValuesNotInTestHookOutput(t *testing.T) {
	const key = "sk-ReleaseApiKey0815"
	dir := writeChartFiles(t, map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: testleak\nversion: 0.1.0\n",
		"values.yaml": "apiKey: \"\"\n",
		"templates/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-key\n" +
			"stringData:\n  key: {{ .Values.apiKey | quote }}\n",
		"templates/tests/smoke.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Release.Name }}-smoke\n" +
			"  annotations:\n    helm.sh/hook: test\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n" +
			"      containers:\n      - name: curl\n        image: curlimages/curl\n",
	})
	for _, output := range []string{"table", "json"} {
		t.Run(output, func(t *testing.T) {
			f := newReleaseFakes()
			_, stderr, code := f.run(t, "deploy", "chat", dir, "--set", "apiKey="+key, "--skip-preflight")
			require.Equal(t, 0, code, "stderr: %s", stderr)
			f.waiter.Script = func(_ context.Context, objs []rollout.ObjectStatus, _ wait.Options) (wait.Result, error) {
				for _, o := range objs {
					if o.Object.Kind == "Job" {
						d := &rollout.Diagnosis{Verdict: rollout.VerdictCrashLoop, Reason: "Error", Object: "Job chat-smoke",
							Pod: "chat-smoke-x1", Container: "curl", ExitCode: 22, Message: "401 for key " + key,
							LogTail: []string{"> Authorization: Bearer " + key, "< HTTP/1.1 401 Unauthorized"}}
						o.Status = rollout.StatusFailed
						return wait.Result{Outcome: wait.OutcomeFailed, Objects: []rollout.ObjectStatus{o}, Diagnosis: d},
							&wait.NotReadyError{Outcome: wait.OutcomeFailed, Objects: []rollout.ObjectStatus{o}}
					}
				}
				return wait.Result{Outcome: wait.OutcomeCurrent, Objects: objs}, nil
			}
			stdout, stderr, code := f.run(t, "test", "chat", "-o", output)
			require.Equal(t, 4, code, "stderr: %s", stderr)
			assert.NotContains(t, stdout+stderr, key)
			assert.Contains(t, stdout+stderr, "401 Unauthorized", "what is not secret stays")
			assert.Contains(t, stdout+stderr, "(redacted)")
		})
	}
}
