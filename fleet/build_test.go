package fleet

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// kubeconfig has the contexts ml (namespace ml) and bare (none).
func kubeconfig() clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443"}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["ml"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: "ml"}
	cfg.Contexts["bare"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	return *cfg
}

// loaders returns the kubeconfig loader of a context on cfg.
func loaders(cfg clientcmdapi.Config) func(string) clientcmd.ClientConfig {
	return func(kubeContext string) clientcmd.ClientConfig {
		return clientcmd.NewNonInteractiveClientConfig(cfg, kubeContext, &clientcmd.ConfigOverrides{}, nil)
	}
}

func parseFleet(t *testing.T, dir, text string) *File {
	t.Helper()
	f, err := Parse(filepath.Join(dir, "fleet.yaml"), []byte(text))
	require.NoError(t, err)
	return f
}

func TestResolveTargets(t *testing.T) {
	tests := []struct {
		name    string
		targets string
		waves   string
		// namespaces are the resolved namespaces, in target order.
		namespaces []string
		// problems are the file's problems (line: field: message).
		problems []Problem
	}{
		{
			name:       "the context's namespace",
			targets:    "  - {name: a, context: ml}\n",
			waves:      "[[a]]",
			namespaces: []string{"ml"},
		},
		{
			name:       "the file's namespace wins",
			targets:    "  - {name: a, context: ml, namespace: other}\n",
			waves:      "[[a]]",
			namespaces: []string{"other"},
		},
		{
			name:       "a context without one: default",
			targets:    "  - {name: a, context: bare}\n",
			waves:      "[[a]]",
			namespaces: []string{DefaultNamespace},
		},
		{
			name:    "unknown contexts: every one, with its line",
			targets: "  - {name: a, context: nope}\n  - {name: b, context: ml}\n  - {name: c, context: gone}\n",
			waves:   "[[a, b, c]]",
			problems: []Problem{
				{Line: 3, Field: "targets[0].context", Message: `"nope": no such context in the kubeconfig`},
				{Line: 5, Field: "targets[2].context", Message: `"gone": no such context in the kubeconfig`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := parseFleet(t, t.TempDir(), "release: chat\ntargets:\n"+tt.targets+"waves: "+tt.waves+"\n")
			err := f.ResolveTargets(loaders(kubeconfig()))
			if tt.problems != nil {
				var fe *FileError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tt.problems, fe.Problems)
				assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
				return
			}
			require.NoError(t, err)
			var got []string
			for _, tg := range f.Targets {
				got = append(got, tg.Namespace)
			}
			assert.Equal(t, tt.namespaces, got)
		})
	}
}

// TestResolveTargetsUnreadableKubeconfig: a kubeconfig that cannot be
// read names the fleet file and the target, exit code 2.
func TestResolveTargetsUnreadableKubeconfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte("contexts: [not: {a: list"), 0o600))
	f := parseFleet(t, dir, "release: chat\ntargets:\n  - {name: a, context: ml}\nwaves: [[a]]\n")
	err := f.ResolveTargets(func(kubeContext string) clientcmd.ClientConfig {
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
			&clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	})
	var ke *KubeconfigError
	require.ErrorAs(t, err, &ke)
	assert.Equal(t, "a", ke.Target)
	assert.Contains(t, err.Error(), "fleet file "+filepath.Join(dir, "fleet.yaml")+": target a: kubeconfig: ")
	assert.Equal(t, exitcode.Invalid, exitcode.Of(err))
}

func TestChartRef(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "mychart"), 0o755))
	tests := []struct{ chart, want string }{
		{"", ""}, // the built-in chart
		{"mychart", filepath.Join(dir, "mychart")},                     // next to the fleet file
		{"./mychart", filepath.Join(dir, "mychart")},                   // the same, written as a path
		{"repo/chat", "repo/chat"},                                     // no such file: a repository chart
		{"/abs/chart", "/abs/chart"},                                   // absolute: as written
		{"oci://r.example/charts/chat", "oci://r.example/charts/chat"}, // a URL
	}
	for _, tt := range tests {
		t.Run(tt.chart, func(t *testing.T) {
			f := &File{Path: filepath.Join(dir, "fleet.yaml"), Chart: tt.chart}
			assert.Equal(t, tt.want, f.ChartRef())
		})
	}
}

func TestBuildTargets(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"shared.yaml", "a.yaml"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("{}\n"), 0o600))
	}
	f := parseFleet(t, dir, `release: chat
values: [shared.yaml]
set: [image.tag=v1, shm.enabled=false]
targets:
  - {name: a, context: ml, values: [a.yaml], set: [image.tag=v2]}
  - {name: b, context: bare, namespace: ml2}
waves: [[a], [b]]
`)
	require.NoError(t, f.ResolveTargets(loaders(kubeconfig())))
	deploy := release.DeployOptions{
		Name:    "ignored", // the fleet file's release wins
		Timeout: time.Minute,
		Render:  release.RenderInput{Options: charts.RenderOptions{ReleaseName: "chat"}, Builtin: true},
	}
	var opened []TargetSpec
	engines := map[string]*release.Engine{}
	targets, err := BuildTargets(f, deploy, func(t TargetSpec) (*release.Engine, error) {
		opened = append(opened, t)
		e := &release.Engine{Store: storage.NewMemory(t.Namespace)}
		engines[t.Name] = e
		return e, nil
	})
	require.NoError(t, err)
	require.Len(t, opened, 2)
	assert.Equal(t, []string{"ml", "ml2"}, []string{opened[0].Namespace, opened[1].Namespace}, "each engine is opened in its target's resolved namespace")

	tests := []struct {
		target      string
		namespace   string
		values, set []string
	}{
		{"a", "ml", []string{filepath.Join(dir, "shared.yaml"), filepath.Join(dir, "a.yaml")}, []string{"image.tag=v1", "shm.enabled=false", "image.tag=v2"}},
		{"b", "ml2", []string{filepath.Join(dir, "shared.yaml")}, []string{"image.tag=v1", "shm.enabled=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			rt, ok := targets[tt.target].(*ReleaseTarget)
			require.True(t, ok)
			assert.Same(t, engines[tt.target], rt.Engine)
			assert.Equal(t, "chat", rt.Options.Name)
			assert.True(t, rt.Options.RollbackOnFailure, "a fleet always restores a target that fails")
			assert.Equal(t, time.Minute, rt.Options.Timeout, "the shared options")
			assert.True(t, rt.Options.Render.Builtin)
			assert.Equal(t, tt.namespace, rt.Options.Render.Options.Namespace)
			assert.Equal(t, tt.values, rt.Options.Render.Options.ValueFiles, "the shared values, then the target's")
			assert.Equal(t, tt.set, rt.Options.Render.Options.Set, "the shared --set values, then the target's")
		})
	}
	// The targets' slices are their own: one target's do not alias the
	// file's nor another's.
	a := targets["a"].(*ReleaseTarget)
	a.Options.Render.Options.Set[0] = "changed"
	assert.Equal(t, "image.tag=v1", f.Set[0])
	assert.Equal(t, "image.tag=v1", targets["b"].(*ReleaseTarget).Options.Render.Options.Set[0])
}

// TestBuildTargetsEngineError: a target whose engine cannot be opened
// stops the building, its error naming the target and its context.
func TestBuildTargetsEngineError(t *testing.T) {
	f := parseFleet(t, t.TempDir(), "release: chat\ntargets:\n  - {name: a, context: ml}\n  - {name: b, context: bare}\nwaves: [[a, b]]\n")
	refused := errors.New("kubeconfig: no server")
	targets, err := BuildTargets(f, release.DeployOptions{}, func(t TargetSpec) (*release.Engine, error) {
		if t.Name == "b" {
			return nil, refused
		}
		return &release.Engine{}, nil
	})
	require.ErrorIs(t, err, refused)
	assert.EqualError(t, err, "fleet target b (context bare): kubeconfig: no server")
	assert.Nil(t, targets)
}
