package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kubeVersionChart writes a chart that requires Kubernetes >= 1.37.1 (the
// fake cluster's server is v1.37.2, template's default v1.37.0) and puts
// .Capabilities.KubeVersion into a ConfigMap.
func kubeVersionChart(t *testing.T) string {
	t.Helper()
	return writeChartFiles(t, map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: kv\nversion: 0.1.0\nkubeVersion: \">=1.37.1-0\"\n",
		"values.yaml": "greeting: hello\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-kv\n" +
			"data:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n  greeting: {{ .Values.greeting | quote }}\n",
	})
}

// TestDiffAndDeployRenderWithTheServerVersion: diff and deploy render a
// chart with a kubeVersion constraint against the same (the server's)
// version; template renders against --kube-version, else its default.
func TestDiffAndDeployRenderWithTheServerVersion(t *testing.T) {
	chartDir := kubeVersionChart(t)
	f := newReleaseFakes()

	stdout, stderr, code := f.run(t, "diff", "chat", chartDir)
	assert.Equal(t, 1, code, "diff: changes (all create); stderr: %s", stderr)
	assert.Contains(t, stdout, `kube: v1.37.2`, "diff renders with the server's version")

	_, stderr, code = f.run(t, "deploy", "chat", chartDir)
	require.Equal(t, 0, code, "deploy: %s", stderr)
	cm := f.cluster.Object("", "ConfigMap", "ml", "chat-kv")
	require.NotNil(t, cm)
	assert.Equal(t, "v1.37.2", cm.Object["data"].(map[string]any)["kube"], "deploy renders with the server's version")

	stdout, stderr, code = f.run(t, "diff", "chat", chartDir)
	assert.Equal(t, 0, code, "the same render: no changes; stdout: %s stderr: %s", stdout, stderr)

	_, stderr, code = runTemplateCLI(t, "template", "chat", chartDir)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "incompatible with Kubernetes v1.37.0", "template without a cluster: the default version")
	stdout, stderr, code = runTemplateCLI(t, "template", "chat", chartDir, "--kube-version", "v1.37.2")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, `kube: v1.37.2`)
}
