package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
)

// clusterGatedChart writes a chart that renders only for a cluster that
// serves monitoring.coreos.com/v1/ServiceMonitor at Kubernetes v1.36.3
// (an offline render, Helm's defaults and v1.37.0, fails the template),
// and prints both into a ConfigMap.
func clusterGatedChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gated")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: gated\nversion: 0.1.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", "cm.yaml"), []byte(`{{- if not (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") }}{{ fail "rendered without the cluster's API versions" }}{{ end -}}
{{- if ne .Capabilities.KubeVersion.Version "v1.36.3" }}{{ fail (printf "rendered for Kubernetes %s, not the server's" .Capabilities.KubeVersion.Version) }}{{ end -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: caps
data:
  sm: {{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor" | quote }}
  kube: {{ .Capabilities.KubeVersion.Version | quote }}
  values: {{ printf "a=%v b=%v" .Values.a .Values.b | quote }}
`), 0o644))
	return dir
}

// serveMonitoring makes the fakes' discovery serve ServiceMonitors at
// server version v1.36.3.
func serveMonitoring(f *releaseFakes) *fakediscovery.FakeDiscovery {
	dc := f.cluster.Client.Discovery().(*fakediscovery.FakeDiscovery)
	dc.FakedServerVersion = &k8sversion.Info{GitVersion: "v1.36.3", Major: "1", Minor: "36"}
	dc.Resources = append(dc.Resources,
		&metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap", Namespaced: true}}},
		&metav1.APIResourceList{GroupVersion: "monitoring.coreos.com/v1", APIResources: []metav1.APIResource{{Name: "servicemonitors", Kind: "ServiceMonitor", Namespaced: true}}})
	return dc
}

// discoveryReads counts the reads of the server's version and of its API
// groups the fakes' clientset saw since the last ClearActions.
func discoveryReads(f *releaseFakes) (versions, groups int) {
	for _, a := range f.cluster.Client.Actions() {
		switch a.GetResource().Resource {
		case "version":
			versions++
		case "group":
			groups++
		}
	}
	return versions, groups
}

// TestCommandsRenderForTheCluster: deploy, diff, fleet deploy and fleet
// diff render with the cluster's discovery (.Capabilities.APIVersions
// with the CRD kinds it serves, .Capabilities.KubeVersion the server's),
// read once per command (once per target for fleet). template stays
// offline, where the chart's guard fails unless -a and --kube-version say
// what the cluster would (--dry-run=server needs a real cluster: e2e
// TestDeployRendersForTheCluster).
func TestCommandsRenderForTheCluster(t *testing.T) {
	chartDir := clusterGatedChart(t)
	cases := []struct {
		name    string
		run     func(f *releaseFakes) (string, string, int)
		code    int
		reads   int // discovery reads: one per command, one per fleet target
		records map[string]int
	}{
		{name: "deploy", run: func(f *releaseFakes) (string, string, int) {
			return f.run(t, "deploy", "chat", chartDir)
		}, reads: 1, records: map[string]int{"ml": 1}},
		{name: "deploy --diff", run: func(f *releaseFakes) (string, string, int) {
			return f.run(t, "deploy", "chat", chartDir, "--diff")
		}, reads: 1, records: map[string]int{"ml": 1}},
		{name: "diff", run: func(f *releaseFakes) (string, string, int) {
			return f.run(t, "diff", "chat", chartDir)
		}, code: ExitChanges, reads: 1},
		{name: "fleet deploy", run: func(f *releaseFakes) (string, string, int) {
			return f.runFleet(t, "deploy", fleetFile(t, "chart: "+chartDir+"\n"))
		}, reads: 2, records: map[string]int{"ml": 1, "ml2": 1}},
		{name: "fleet diff", run: func(f *releaseFakes) (string, string, int) {
			return f.runFleet(t, "diff", fleetFile(t, "chart: "+chartDir+"\n"))
		}, code: ExitChanges, reads: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newReleaseFakes()
			serveMonitoring(f)
			f.cluster.Client.ClearActions()
			stdout, stderr, code := tc.run(f)
			require.Equal(t, tc.code, code, "stdout: %s\nstderr: %s", stdout, stderr)
			versions, groups := discoveryReads(f)
			assert.Equal(t, tc.reads, versions, "the server's version read once per command (per fleet target)")
			assert.Equal(t, tc.reads, groups, "the API groups read once per command (per fleet target)")
			for ns, rev := range tc.records {
				rec, err := f.store.InNamespace(ns).Get(context.Background(), "chat", rev)
				require.NoError(t, err, "namespace %s", ns)
				assert.Contains(t, rec.Manifest, `sm: "true"`, "namespace %s", ns)
				assert.Contains(t, rec.Manifest, `kube: v1.36.3`, "namespace %s", ns)
			}
		})
	}

	t.Run("--reuse-values and --reset-then-reuse-values upgrades", func(t *testing.T) {
		f := newReleaseFakes()
		serveMonitoring(f)
		_, stderr, code := f.run(t, "deploy", "chat", chartDir, "--set", "a=1")
		require.Equal(t, ExitOK, code, stderr)
		for i, flag := range []string{"--reuse-values", "--reset-then-reuse-values"} {
			f.cluster.Client.ClearActions()
			b := fmt.Sprintf("b=%d", i+2)
			_, stderr, code = f.run(t, "diff", "chat", chartDir, flag, "--set", b)
			require.Equal(t, ExitChanges, code, "%s: %s", flag, stderr)
			_, stderr, code = f.run(t, "deploy", "chat", chartDir, flag, "--set", b)
			require.Equal(t, ExitOK, code, "%s: %s", flag, stderr)
			versions, _ := discoveryReads(f)
			assert.Equal(t, 2, versions, "%s: one read by diff, one by deploy", flag)
			rec, err := f.store.InNamespace("ml").Get(context.Background(), "chat", i+2)
			require.NoError(t, err)
			assert.Contains(t, rec.Manifest, `sm: "true"`, flag)
			assert.Contains(t, rec.Manifest, fmt.Sprintf(`values: a=1 b=%d`, i+2), "%s: the previous revision's values reused", flag)
		}
	})

	t.Run("fleet deploy and diff through a post-renderer", func(t *testing.T) {
		f := newReleaseFakes()
		serveMonitoring(f)
		script := filepath.Join(t.TempDir(), "label.sh")
		require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"+`sed "s/^  name: caps$/  name: caps\n  labels: {post-rendered: \"$1\"}/"`+"\n"), 0o755))
		path := fleetFile(t, "chart: "+chartDir+"\n")
		_, stderr, code := f.runFleet(t, "deploy", path, "--post-renderer", script, "--post-renderer-args", "yes")
		require.Equal(t, ExitOK, code, stderr)
		for _, ns := range []string{"ml", "ml2"} {
			rec, err := f.store.InNamespace(ns).Get(context.Background(), "chat", 1)
			require.NoError(t, err, ns)
			require.NotNil(t, rec.PostRenderer, ns)
			assert.Equal(t, script, rec.PostRenderer.Path, ns)
			assert.Equal(t, []string{"yes"}, rec.PostRenderer.Args, ns)
			assert.Contains(t, rec.Manifest, "post-rendered: \"yes\"", ns)
			cm := f.cluster.Object("", "ConfigMap", ns, "caps")
			require.NotNil(t, cm, ns)
			assert.Equal(t, "yes", cm.GetLabels()["post-rendered"], "%s: what the post-renderer printed is applied", ns)
			assert.Equal(t, "chat", cm.GetLabels()["vllmctl.io/release"], "%s: vllmctl's keys set after it", ns)
		}
		stdout, stderr, code := f.runFleet(t, "diff", path, "--post-renderer", script, "--post-renderer-args", "no")
		assert.Equal(t, ExitChanges, code, stderr)
		assert.Contains(t, stdout, "post-rendered")
		// diff of one target: its record's post-renderer args change too,
		// a recorded change that the JSON schema knows.
		stdout, stderr, code = f.run(t, "diff", "chat", chartDir, "--post-renderer", script, "--post-renderer-args", "no", "-o", "json")
		assert.Equal(t, ExitChanges, code, stderr)
		requireValid(t, "diff", stdout)
		var rep struct {
			Recorded []map[string]any `json:"recorded"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
		require.Len(t, rep.Recorded, 1, stdout)
		assert.Equal(t, "post-renderer", rep.Recorded[0]["what"])
		assert.Equal(t, "change", rep.Recorded[0]["action"])

		// status shows it, in the table and in JSON (as the schema has it).
		stdout, stderr, code = f.run(t, "status", "chat")
		require.Equal(t, ExitOK, code, stderr)
		assert.Contains(t, stdout, "POST-RENDERER: "+script+" yes")
		stdout, stderr, code = f.run(t, "status", "chat", "-o", "json")
		require.Equal(t, ExitOK, code, stderr)
		requireValid(t, "status", stdout)
		var st struct {
			PostRenderer struct {
				Path string   `json:"path"`
				Args []string `json:"args"`
			} `json:"postRenderer"`
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &st))
		assert.Equal(t, script, st.PostRenderer.Path)
		assert.Equal(t, []string{"yes"}, st.PostRenderer.Args)

		fails := filepath.Join(t.TempDir(), "fail.sh")
		require.NoError(t, os.WriteFile(fails, []byte("#!/bin/sh\ncat >/dev/null\necho broken >&2\nexit 7\n"), 0o755))
		g := newReleaseFakes()
		serveMonitoring(g)
		_, stderr, code = g.runFleet(t, "deploy", path, "--post-renderer", fails)
		assert.Equal(t, ExitInvalid, code, stderr)
		assert.Contains(t, stderr, "post-renderer "+fails)
		assert.Empty(t, g.cluster.Refs(), "no target deployed")
		all, err := g.store.ListAll(context.Background(), "")
		require.NoError(t, err)
		assert.Empty(t, all, "nothing recorded")
	})

	t.Run("the same chart offline (template) fails its guard", func(t *testing.T) {
		_, stderr, code := runTemplateCLI(t, "template", "chat", chartDir)
		assert.Equal(t, ExitInvalid, code)
		assert.Contains(t, stderr, "rendered without the cluster's API versions")
		stdout, stderr, code := runTemplateCLI(t, "template", "chat", chartDir, "-a", "monitoring.coreos.com/v1/ServiceMonitor", "--kube-version", "v1.36.3")
		require.Equal(t, ExitOK, code, stderr)
		assert.Contains(t, stdout, `sm: "true"`)
		assert.Contains(t, stdout, `kube: v1.36.3`)
	})
}
