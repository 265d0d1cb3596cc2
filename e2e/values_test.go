//go:build e2e

package e2e

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/testregistry"
)

// --reuse-values and --reset-then-reuse-values against Helm 4 itself: the
// same install and upgrades, by vllmctl in one namespace and by helm in
// another, give the same user-supplied and computed values (`get values`,
// `get values --all`) and the same ConfigMap.
func TestReuseValuesMatchHelmUpgrade(t *testing.T) {
	shareCluster(t, 4)
	_, helmBin := testregistry.Bins(t)
	f := newRelFixture(t)
	other := newEnv(t)
	helm := testregistry.Helm(t, helmBin, []string{"KUBECONFIG=" + f.kubeconfig, "HOME=" + t.TempDir()})
	chartDir, err := filepath.Abs(relChart)
	require.NoError(t, err)

	steps := [][]string{
		{"--set", "greeting=hi", "--set", "readyDelay=500ms"},
		{"--reuse-values", "--set", "image=example.com/vllm:v2"},
		{"--reset-then-reuse-values", "--set", "greeting=yo"},
		{"--set", "extraConfig=true"},
	}
	for i, args := range steps {
		r := f.deploy(t, append([]string{"-o", "json"}, args...)...)
		require.Equal(t, exitcode.OK, r.code, "step %d: %s", i, r)
		verb := "upgrade"
		if i == 0 {
			verb = "install"
		}
		helm("", append([]string{verb, relName, chartDir, "-n", other.namespace, "--wait", "--timeout", "2m"}, args...)...)

		for _, all := range []bool{false, true} {
			vArgs := []string{"get", "values", relName, "-o", "json"}
			hArgs := []string{"get", "values", relName, "-n", other.namespace, "-o", "json"}
			if all {
				vArgs, hArgs = append(vArgs, "--all"), append(hArgs, "--all")
			}
			got := f.run(t, vArgs...)
			require.Equal(t, exitcode.OK, got.code, "%s", got)
			var ours, theirs map[string]any
			require.NoError(t, json.Unmarshal([]byte(got.stdout), &ours))
			require.NoError(t, json.Unmarshal([]byte(helm("", hArgs...)), &theirs))
			if theirs == nil {
				theirs = map[string]any{}
			}
			assert.Equal(t, theirs, ours, "step %d (%v), --all=%v", i, args, all)
		}
		assert.Equal(t, other.configMapData(t, relName+"-config"), f.configMapData(t, relName+"-config"), "step %d", i)
	}
}
