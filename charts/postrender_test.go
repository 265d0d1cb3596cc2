package charts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/owner"
)

// postRenderChart has an object, a hook and a Secret.
var postRenderChart = map[string]string{
	"templates/deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {team: a}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "nginx:1"}]
`,
	"templates/hook.yaml": `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations: {"helm.sh/hook": pre-upgrade}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: m, image: "nginx:1"}]
`,
	"templates/secret.yaml": `apiVersion: v1
kind: Secret
metadata: {name: key}
stringData: {token: "POSTRENDERSECRET42"}
`,
}

// script writes an executable shell script and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	return p
}

// helmPlugin installs script as a Helm 4 postrenderer/v1 plugin named
// name under plugins and returns the plugins directory.
func helmPlugin(t *testing.T, plugins, name, scriptPath string) {
	t.Helper()
	dir := filepath.Join(plugins, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "plugin.yaml"), []byte(
		"name: "+name+"\nversion: 0.1.0\ntype: postrenderer/v1\napiVersion: v1\nruntime: subprocess\n"+
			"runtimeConfig:\n  platformCommand:\n    - command: "+scriptPath+"\n"), 0o644))
}

func TestPostRenderer(t *testing.T) {
	dir := writeChart(t, postRenderChart)
	ch, err := loader.LoadDir(dir)
	require.NoError(t, err)
	bin := t.TempDir()
	cases := []struct {
		name   string
		body   string
		args   []string
		check  func(t *testing.T, r *Rendered)
		errHas string // the error names the post-renderer and this
		learns bool   // the error quotes the post-renderer, so the Secrets are learned
	}{
		{name: "rewrites objects and hooks; args passed", body: `sed "s/nginx:1/nginx:$1/g"`, args: []string{"2"},
			check: func(t *testing.T, r *Rendered) {
				assert.Contains(t, r.Manifest, "image: nginx:2")
				assert.NotContains(t, r.Manifest, "postrender-filename")
				require.Len(t, r.Hooks, 1)
				img, _, _ := unstructured.NestedSlice(r.Hooks[0].Object.Object, "spec", "template", "spec", "containers")
				assert.Equal(t, "nginx:2", img[0].(map[string]any)["image"], "hooks go through the post-renderer")
				assert.Equal(t, "c/templates/deploy.yaml", r.Sources[SourceKey(r.Objects[len(r.Objects)-1])], "templates kept")
			}},
		{name: "cannot strip the ownership keys", body: `grep -v "labels:\|team:"`,
			check: func(t *testing.T, r *Rendered) {
				for _, o := range append(r.Objects, HookObjects(r.Hooks)...) {
					assert.Equal(t, "vllmctl", o.GetLabels()[owner.LabelManagedBy], o.GetName())
					assert.Equal(t, "r", o.GetLabels()[owner.LabelRelease], o.GetName())
				}
			}},
		{name: "an object it adds", body: `cat; printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: added}\n'`,
			check: func(t *testing.T, r *Rendered) {
				assert.Contains(t, r.Manifest, "name: added")
				var added *unstructured.Unstructured
				for _, o := range r.Objects {
					if o.GetName() == "added" {
						added = o
					}
				}
				require.NotNil(t, added)
				assert.Equal(t, "generated-by-postrender-3.yaml", r.Sources[SourceKey(added)])
			}},
		{name: "fails", body: `cat >/dev/null; echo "cannot patch POSTRENDERSECRET42" >&2; exit 3`, errHas: "cannot patch POSTRENDERSECRET42", learns: true},
		{name: "prints nothing", body: `cat >/dev/null`, errHas: "printed nothing"},
		{name: "prints garbage", body: `cat >/dev/null; echo '{{{ not yaml'`, errHas: "not a YAML stream", learns: true},
		{name: "prints a document that is not an object", body: `cat >/dev/null; echo 'just: a map'`, errHas: "generated-by-postrender-0.yaml"},
		{name: "prints too much", body: `cat >/dev/null; head -c 70000000 /dev/zero | tr '\0' 'a'`, errHas: "more than 64 MiB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &PostRenderer{Path: script(t, bin, strings.ReplaceAll(tc.name, " ", "-")+".sh", tc.body), Args: tc.args}
			var learned []string
			learn := func(v ...string) { learned = append(learned, v...) }
			r, err := Render(ch, RenderOptions{ReleaseName: "r", Namespace: "ns", PostRenderer: p, LearnSecrets: learn})
			if tc.errHas == "" {
				require.NoError(t, err)
				tc.check(t, r)
				return
			}
			require.Error(t, err)
			assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
			assert.Contains(t, err.Error(), p.Path)
			assert.Contains(t, err.Error(), tc.errHas)
			assert.Less(t, len(err.Error()), 1000, "the error stays short")
			// What the post-renderer printed is quoted as is; the
			// caller's one redaction learned the Secrets' values first.
			if tc.learns {
				assert.Contains(t, learned, "POSTRENDERSECRET42", "the rendered Secret's value is learned before it is quoted")
			}
		})
	}
	t.Run("an executable that cannot run", func(t *testing.T) {
		_, err := Render(ch, RenderOptions{ReleaseName: "r", Namespace: "ns", PostRenderer: &PostRenderer{Path: filepath.Join(bin, "missing")}})
		require.Error(t, err)
		assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
	})
}

// TestPostRendererMatchesHelm runs the same script through vllmctl's
// --post-renderer and Helm 4's (a postrenderer/v1 plugin: Helm 4 takes
// plugins only): the same objects and hooks, or both refuse.
func TestPostRendererMatchesHelm(t *testing.T) {
	helm := helmBin(t)
	dir := writeChart(t, postRenderChart)
	ch, err := loader.LoadDir(dir)
	require.NoError(t, err)
	scripts, plugins := t.TempDir(), t.TempDir()
	t.Setenv("HELM_PLUGINS", plugins)
	cases := []struct {
		name, body string
		fails      bool
	}{
		{name: "rewrite", body: `sed "s/nginx:1/nginx:2/g"`},
		{name: "add", body: `cat; printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: added}\n'`},
		{name: "strip", body: `grep -v "team:"`},
		{name: "fail", body: `cat >/dev/null; exit 3`, fails: true},
		{name: "empty", body: `cat >/dev/null`, fails: true},
		{name: "garbage", body: `cat >/dev/null; echo '{{{ not yaml'`, fails: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := script(t, scripts, tc.name+".sh", tc.body)
			helmPlugin(t, plugins, "pr-"+tc.name, path)
			opts := RenderOptions{ReleaseName: "r", Namespace: "ns", PostRenderer: &PostRenderer{Path: path}}
			ours, ourErr := Render(ch, opts)
			stdout, stderr, helmErr := runHelmTemplate(t, helm, dir, opts, "--post-renderer", "pr-"+tc.name)
			if tc.fails {
				assert.Error(t, ourErr)
				assert.Error(t, helmErr, "helm refuses too")
				return
			}
			require.NoError(t, ourErr)
			require.NoError(t, helmErr, stderr)
			theirs, err := parseObjects(map[string]string{"helm": stdout})
			require.NoError(t, err)
			assert.Equal(t, comparable(t, theirs), comparable(t, withHooks(ours)))
		})
	}
}
