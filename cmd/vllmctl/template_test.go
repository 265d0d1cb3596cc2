package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/vllmctl/vllmctl/internal/owner"
)

var updateCLI = flag.Bool("update-cli", false, "rewrite the CLI golden files in testdata/cli")

// runTemplateCLI runs the root command in-process, hermetically (no
// kubeconfig, no config file, no VLLMCTL_* variables), and returns stdout,
// stderr and the exit code main would return.
func runTemplateCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runCLIWithStdin(t, "", args...)
}

// runCLIWithStdin is runTemplateCLI with stdin reading stdin.
func runCLIWithStdin(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("KUBECONFIG", filepath.Join(tmp, "no-kubeconfig"))
	t.Setenv("HOME", tmp)
	t.Setenv("XDG_CONFIG_HOME", tmp)
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "VLLMCTL_") {
			t.Setenv(name, "")
		}
	}
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}
	ctx := context.Background()
	cmd := NewRootCommand(ctx, streams)
	cmd.SetArgs(args)
	code := ExitCode(cmd.ErrOrStderr(), cmd.ExecuteContext(ctx))
	require.NoError(t, FlushStreams(cmd))
	return out.String(), errOut.String(), code
}

func TestTemplateCommand(t *testing.T) {
	const (
		handwritten = "../../charts/testdata/charts/handwritten"
		umbrella    = "../../charts/testdata/charts/umbrella"
		missingDeps = "../../charts/testdata/charts/missingdeps"
	)
	tests := []struct {
		name   string
		args   []string
		golden string // testdata/cli/<golden>.golden holds stdout; "" = stdout must be empty
		code   int
		stderr string // exact stderr
	}{
		{
			name:   "built-in chart by default",
			args:   []string{"template", "qwen", "-n", "inference"},
			golden: "template-vllm-defaults",
		},
		{
			name: "built-in chart with values, --set and --set-string",
			args: []string{"template", "qwen", "vllm", "--namespace", "inference",
				"-f", "testdata/cli/template-values-gpu2.yaml", "--set", "replicaCount=3,podAnnotations.team=ml",
				"--set-string", "image.tag=v0.11.1", "--set", `extraArgs={--max-num-seqs=128,--enable-prefix-caching}`},
			golden: "template-vllm-values",
		},
		{
			name:   "namespace defaults to default without a kubeconfig",
			args:   []string{"template", "qwen"},
			golden: "template-vllm-default-namespace",
		},
		{
			name:   "chart directory",
			args:   []string{"template", "demo", handwritten, "-n", "apps", "--set", "workers[0].name=solo,workers[0].port=9000"},
			golden: "template-handwritten",
		},
		{
			name:   "invalid release name",
			args:   []string{"template", "Qwen_1"},
			code:   ExitInvalid,
			stderr: "Error: release name: \"Qwen_1\" is invalid: it must be a DNS-1123 label of at most 53 characters (lowercase letters, digits and '-', starting and ending with a letter or digit)\n",
		},
		{
			name:   "unknown chart",
			args:   []string{"template", "qwen", "llama"},
			code:   ExitInvalid,
			stderr: "Error: chart llama: not a chart directory nor a built-in chart (built-in charts: vllm)\n",
		},
		{
			name:   "malformed values file",
			args:   []string{"template", "qwen", "-f", "testdata/cli/template-values-bad.yaml"},
			code:   ExitInvalid,
			stderr: "Error: values file testdata/cli/template-values-bad.yaml line 3: mapping values are not allowed in this context\n",
		},
		{
			name:   "schema violation",
			args:   []string{"template", "qwen", "-f", "testdata/cli/template-values-schema.yaml"},
			code:   ExitInvalid,
			stderr: "Error: values do not match the schema of chart vllm: resources.gpu: got string, want integer\n",
		},
		{
			name:   "malformed --set",
			args:   []string{"template", "qwen", "--set", "replicaCount"},
			code:   ExitInvalid,
			stderr: "Error: --set: argument 1 (keys replicaCount): key \"replicaCount\" has no value\n",
		},
		{
			name:   "failing template",
			args:   []string{"template", "demo", handwritten, "--set", "image.tag="},
			code:   ExitInvalid,
			stderr: "Error: template handwritten/templates/deployment.yaml line 26: image.tag is required\n",
		},
		{
			name:   "subcharts, CRDs first with --include-crds",
			args:   []string{"template", "shop", umbrella, "-n", "apps", "--set", "tags.backend=false", "--include-crds"},
			golden: "template-umbrella-crds",
			stderr: "warning: dependency cache ~0.1.0 (file://../umbrella-src/cache) is not in charts/ and is disabled (tags backend): rendering without it\n",
		},
		{
			name:   "CRDs left out without --include-crds",
			args:   []string{"template", "shop", umbrella, "-n", "apps", "--set", "tags.backend=false,web.enabled=false"},
			golden: "template-umbrella-no-web",
			stderr: "warning: dependency cache ~0.1.0 (file://../umbrella-src/cache) is not in charts/ and is disabled (tags backend): rendering without it\n",
		},
		{
			name:   "disabled dependencies not vendored: warnings",
			args:   []string{"template", "shop", missingDeps, "-n", "apps"},
			golden: "template-missingdeps",
			stderr: "warning: dependency redis 17.3.2 (https://charts.example.com/stable) is not in charts/ and is disabled (condition redis.enabled): rendering without it\n" +
				"warning: dependency helper ^1.0.0 (file://../missingdeps-src/helper) is not in charts/ and is disabled (tags extras): rendering without it\n" +
				"warning: dependency metrics 3.x (oci://registry.example.com/charts) is not in charts/api/charts/ and is disabled (condition api.metrics.enabled): rendering without it\n",
		},
		{
			name: "enabled dependency not vendored",
			args: []string{"template", "shop", missingDeps, "--set", "redis.enabled=true"},
			code: ExitInvalid,
			stderr: "Error: chart missingdeps: dependency redis 17.3.2 (https://charts.example.com/stable) is enabled (condition redis.enabled) " +
				"but not in charts/: vendor it with `vllmctl dependency update " + missingDeps + "`\n",
		},
		{
			name:   "subchart schema violation",
			args:   []string{"template", "shop", umbrella, "--set", "tags.backend=false", "--set", "web.replicas=zero"},
			code:   ExitInvalid,
			stderr: "Error: values do not match the schema of chart umbrella/charts/web: web.replicas: got string, want integer\n",
		},
		{
			name: "missing RELEASE",
			args: []string{"template"},
			code: ExitInvalid,
		},
		{
			name: "too many arguments",
			args: []string{"template", "a", "b", "c"},
			code: ExitInvalid,
		},
		{
			name: "unknown flag",
			args: []string{"template", "qwen", "--nope"},
			code: ExitInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runTemplateCLI(t, tt.args...)
			assert.Equal(t, tt.code, code, "exit code; stderr: %s", stderr)
			if tt.golden == "" {
				assert.Empty(t, stdout)
			} else {
				path := filepath.Join("testdata", "cli", tt.golden+".golden")
				if *updateCLI {
					require.NoError(t, os.WriteFile(path, []byte(stdout), 0o644))
				}
				want, err := os.ReadFile(path)
				require.NoError(t, err, "run `go test ./cmd/vllmctl -run TestTemplateCommand -update-cli` to create it")
				assert.Equal(t, string(want), stdout)
			}
			switch {
			case tt.stderr != "":
				assert.Equal(t, tt.stderr, stderr)
			case tt.code == ExitOK:
				assert.Empty(t, stderr)
			default:
				assert.True(t, strings.HasPrefix(stderr, "Error: "), "stderr: %q", stderr)
			}
		})
	}
}

func TestRenderFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		release string
		chart   string
		files   []string
		set     []string
		str     []string
	}{
		{"defaults", []string{"r"}, "r", "vllm", nil, nil, nil},
		{"all flags, repeatable, in order",
			[]string{"r", "./c", "-f", "a.yaml", "--values", "b.yaml,c.yaml", "--set", "a=1,b=2", "--set", `c=x\,y`, "--set-string", "d=3"},
			"r", "./c", []string{"a.yaml", "b.yaml", "c.yaml"}, []string{"a=1,b=2", `c=x\,y`}, []string{"d=3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f RenderFlags
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			f.AddFlags(fs)
			require.NoError(t, fs.Parse(tt.args))

			assert.Equal(t, tt.chart, ChartRef(fs.Args()))
			opts := f.RenderOptions(fs.Arg(0), "ns")
			assert.Equal(t, tt.release, opts.ReleaseName)
			assert.Equal(t, "ns", opts.Namespace)
			assert.Equal(t, tt.files, opts.ValueFiles)
			assert.Equal(t, tt.set, opts.Set)
			assert.Equal(t, tt.str, opts.SetString)
		})
	}
}

// vendoredUmbrella copies the umbrella test chart and packs its cache
// subchart into charts/ as a .tgz (as `helm dependency update` would).
func vendoredUmbrella(t *testing.T) string {
	t.Helper()
	const src = "../../charts/testdata/charts/"
	dir := filepath.Join(t.TempDir(), "umbrella")
	require.NoError(t, os.CopyFS(dir, os.DirFS(src+"umbrella")))
	cache, err := loader.LoadDir(src + "umbrella-src/cache")
	require.NoError(t, err)
	_, err = chartutil.Save(cache, filepath.Join(dir, "charts"))
	require.NoError(t, err)
	return dir
}

// decodeStream decodes a YAML stream into objects keyed by "Kind name",
// without the keys vllmctl marks objects with (owner.Mark's) and the
// chart's managed-by label, which vllmctl sets.
func decodeStream(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if obj == nil {
			continue
		}
		if md, ok := obj["metadata"].(map[string]any); ok {
			if labels, ok := md["labels"].(map[string]any); ok {
				delete(labels, owner.LabelManagedBy)
				delete(labels, owner.LabelRelease)
				if len(labels) == 0 {
					delete(md, "labels")
				}
			}
			if annotations, ok := md["annotations"].(map[string]any); ok {
				delete(annotations, owner.AnnotationNamespace)
				if len(annotations) == 0 {
					delete(md, "annotations")
				}
			}
			out[fmt.Sprint(obj["kind"], " ", md["name"])] = obj
		}
	}
}

// TestTemplateIncludeCRDsMatchesHelm compares `vllmctl template
// --include-crds` with `helm template --include-crds` on a chart whose
// subcharts (a directory, a .tgz, a nested one) bring CRDs: the same
// objects, CRDs first in both.
func TestTemplateIncludeCRDsMatchesHelm(t *testing.T) {
	bin := os.Getenv("HELM_BIN")
	if bin == "" {
		t.Skip("HELM_BIN is not set: run with HELM_BIN=$(hack/install-helm.sh)")
	}
	dir := vendoredUmbrella(t)
	for _, set := range []string{"web.replicas=3", "web.enabled=false"} {
		t.Run(set, func(t *testing.T) {
			ours, stderr, code := runTemplateCLI(t, "template", "shop", dir, "-n", "apps", "--include-crds", "--set", set)
			require.Equal(t, ExitOK, code, stderr)
			assert.Empty(t, stderr)

			home := t.TempDir()
			cmd := exec.Command(bin, "template", "shop", dir, "-n", "apps", "--include-crds", "--set", set)
			cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home,
				"KUBECONFIG="+filepath.Join(home, "kubeconfig"))
			theirs, err := cmd.Output()
			require.NoError(t, err)

			want, got := decodeStream(t, string(theirs)), decodeStream(t, ours)
			assert.Equal(t, want, got)
			assert.True(t, strings.HasPrefix(ours, "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"))
			firstOther := strings.Index(ours, "kind: ConfigMap")
			assert.Greater(t, firstOther, strings.LastIndex(ours, "kind: CustomResourceDefinition"), "CRDs come first")
		})
	}
}

// TestTemplatePackagedChartMatchesHelm: a chart packaged by `helm
// package` (a .tgz with its subcharts) renders as `helm template` renders
// the same file, and as its directory does.
func TestTemplatePackagedChartMatchesHelm(t *testing.T) {
	bin := os.Getenv("HELM_BIN")
	if bin == "" {
		t.Skip("HELM_BIN is not set: run with HELM_BIN=$(hack/install-helm.sh)")
	}
	dir := vendoredUmbrella(t)
	home := t.TempDir()
	helm := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home,
			"KUBECONFIG="+filepath.Join(home, "kubeconfig"))
		out, err := cmd.Output()
		require.NoError(t, err, "helm %s", strings.Join(args, " "))
		return string(out)
	}
	dest := t.TempDir()
	helm("package", dir, "-d", dest)
	tgzs, err := filepath.Glob(filepath.Join(dest, "*.tgz"))
	require.NoError(t, err)
	require.Len(t, tgzs, 1)

	fromTgz, stderr, code := runTemplateCLI(t, "template", "shop", tgzs[0], "-n", "apps", "--include-crds", "--set", "web.replicas=3")
	require.Equal(t, ExitOK, code, stderr)
	theirs := helm("template", "shop", tgzs[0], "-n", "apps", "--include-crds", "--set", "web.replicas=3")
	assert.Equal(t, decodeStream(t, theirs), decodeStream(t, fromTgz), "the same objects as helm template of the .tgz")

	fromDir, stderr, code := runTemplateCLI(t, "template", "shop", dir, "-n", "apps", "--include-crds", "--set", "web.replicas=3")
	require.Equal(t, ExitOK, code, stderr)
	assert.Equal(t, fromDir, fromTgz, "the .tgz renders as its directory")

	broken := filepath.Join(dest, "broken-0.1.0.tgz")
	require.NoError(t, os.WriteFile(broken, []byte("not a chart"), 0o644))
	_, stderr, code = runTemplateCLI(t, "template", "shop", broken)
	assert.Equal(t, ExitInvalid, code)
	assert.Contains(t, stderr, broken)
	assert.Contains(t, stderr, "not a chart directory nor a packaged chart (.tgz)")
}
