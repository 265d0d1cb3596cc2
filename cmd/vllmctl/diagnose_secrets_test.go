package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/internal/owner"
	"github.com/vllmctl/vllmctl/release/storage"
)

// TestDiagnoseReleasePodWithholdsItsSecrets: a pod of a vllmctl release
// whose log echoes the release's Secret (a token printed at start-up):
// diagnose learns the release's Secrets from its records and withholds
// them, in the table and in JSON; a pod of no release prints its log as
// it is.
func TestDiagnoseReleasePodWithholdsItsSecrets(t *testing.T) {
	const token = "hf_DiagnoseTokenValue_7731"
	log := []byte("INFO starting\nusing HF_TOKEN=" + token + "\n" +
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
	for _, owned := range []bool{true, false} {
		c := diagnoseCluster(log)
		ctx := context.Background()
		if owned {
			pod, err := c.CoreV1().Pods("ml").Get(ctx, "chat-0", metav1.GetOptions{})
			require.NoError(t, err)
			pod.Labels = map[string]string{owner.LabelManagedBy: owner.ManagedByVllmctl, owner.LabelRelease: "chat"}
			_, err = c.CoreV1().Pods("ml").Update(ctx, pod, metav1.UpdateOptions{})
			require.NoError(t, err)
			rec := &storage.Release{Name: "chat", Namespace: "ml", Revision: 1, Status: storage.StatusDeployed,
				Manifest: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: chat-hf\n  namespace: ml\nstringData:\n  token: " + token + "\n",
				Created:  time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)}
			rec.Updated = rec.Created
			require.NoError(t, storage.NewSecrets(c, "ml").Create(ctx, rec))
		}
		for _, o := range []string{"table", "json"} {
			stdout, stderr, code := runDiagnose(t, c, "", "chat-0", "-n", "ml", "-o", o)
			require.Equal(t, ExitOK, code, "stderr: %s", stderr)
			assert.Contains(t, stdout, "gpu-oom")
			if owned {
				assert.NotContains(t, stdout+stderr, token, o)
				assert.Contains(t, stdout, "HF_TOKEN=(redacted)", o)
			} else {
				assert.Contains(t, stdout, token, "%s: no release, nothing known to withhold", o)
			}
		}
	}
}
