// The hints fit the chart in use: they name the vLLM flags and the values
// the failing container runs with, read from its command, args and env,
// and a chart's values paths only where the chart maps them (the built-in
// chart's Chart.yaml annotations, or a mapping a chart declares).

package vllmcause

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/internal/vllm"
)

// vllmStackChart is production-stack's vllm-stack chart, vendored
// unchanged (testdata/charts/README.md).
var vllmStackChart = filepath.Join("..", "..", "testdata", "charts", "vllm-stack")

// renderedPod renders chart ref with values files and sets, and returns
// the pod of its Deployment whose container is named container, with the
// chart's declared values mapping.
func renderedPod(t *testing.T, ref string, files []string, set []string, container string) (*corev1.Pod, vllm.ValuesMap) {
	t.Helper()
	ch, err := charts.Load(ref)
	require.NoError(t, err)
	values, err := charts.ValuesMapOf(ch)
	require.NoError(t, err)
	r, err := charts.RenderContext(context.Background(), ch, charts.RenderOptions{ReleaseName: "chat", Namespace: ns, ValueFiles: files, Set: set})
	require.NoError(t, err)
	for _, o := range r.Objects {
		if o.GetKind() != "Deployment" {
			continue
		}
		tpl, ok := o.Object["spec"].(map[string]any)["template"].(map[string]any)
		require.True(t, ok)
		var pt corev1.PodTemplateSpec
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(tpl, &pt))
		for _, c := range pt.Spec.Containers {
			if c.Name == container {
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: o.GetName() + "-abc", Namespace: ns}, Spec: pt.Spec}, values
			}
		}
	}
	t.Fatalf("chart %s rendered no Deployment with container %s", ref, container)
	return nil, nil
}

// kubectlCreatedPod is the pod of `kubectl create deployment vllm
// --image=vllm/vllm-openai:fault-kvcache -- vllm serve MODEL --max-model-len
// 8192`: a command, no resources, no chart.
func kubectlCreatedPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vllm-5d8f7c9b4-x2x7q", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "vllm-openai", Image: "vllm/vllm-openai:fault-kvcache",
			Command: []string{"vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "8192"},
		}}}}
}

// builtinPaths are the built-in chart's values paths a hint may quote.
func builtinPaths() []string {
	return []string{"model.", "resources.gpu", "extraArgs", "hfToken.", "shm.", "modelCache.", "weightsFetcher", "probes.startup", "image.tag"}
}

func TestHintsFitTheChart(t *testing.T) {
	stackValues := []string{filepath.Join("..", "..", "testdata", "charts", "vllm-stack-values-02-basic-config.yaml")}
	cases := []struct {
		name      string
		pod       func(t *testing.T) (*corev1.Pod, vllm.ValuesMap)
		container string
		log       string
		want      []string // substrings of the hints
		absent    []string // substrings no hint may hold
	}{
		{name: "built-in chart: flags with their values paths", container: "server", log: "kv-cache-max-model-len.log",
			pod: func(t *testing.T) (*corev1.Pod, vllm.ValuesMap) {
				return renderedPod(t, "vllm", nil, []string{"model.maxModelLen=32768"}, "server")
			},
			want: []string{"lower `--max-model-len` (model.maxModelLen, now 32768) to at most 34480",
				"raise `--gpu-memory-utilization` (model.gpuMemoryUtilization, now 0.9)",
				"raise `gpu` to 2 (resources.gpu, now 1) and `--tensor-parallel-size` to 2 (model.tensorParallelSize, now 1)",
				"`--kv-cache-dtype fp8` added to extraArgs"}},
		{name: "production-stack's vllm-stack chart, its tutorial's values: flags and the pod's values only", container: "vllm", log: "kv-cache-max-model-len.log",
			pod: func(t *testing.T) (*corev1.Pod, vllm.ValuesMap) {
				return renderedPod(t, vllmStackChart, stackValues, []string{"servingEngineSpec.modelSpec[0].tag=fault-kvcache"}, "vllm")
			},
			want: []string{"lower `--max-model-len` (now 4096) to at most 34480",
				"raise `--gpu-memory-utilization` (now 0.8)",
				"raise the container's `nvidia.com/gpu` to 2 (now 1) and `--tensor-parallel-size` to 2 (now 1)",
				"`--kv-cache-dtype fp8` added to the server's command line"},
			absent: builtinPaths()},
		{name: "vllm-stack, gpu-oom: the model of `vllm serve MODEL`", container: "vllm", log: "gpu-oom-weights.log",
			pod: func(t *testing.T) (*corev1.Pod, vllm.ValuesMap) {
				return renderedPod(t, vllmStackChart, stackValues, nil, "vllm")
			},
			want:   []string{"`--max-model-len` (now 4096)", "a quantized checkpoint (now meta-llama/Llama-3.1-8B-Instruct)"},
			absent: builtinPaths()},
		{name: "vllm-stack with a declared mapping: its own values paths", container: "vllm", log: "kv-cache-max-model-len.log",
			pod: func(t *testing.T) (*corev1.Pod, vllm.ValuesMap) {
				p, _ := renderedPod(t, vllmStackChart, stackValues, nil, "vllm")
				m, err := vllm.ParseValuesMap(map[string]string{
					"vllmctl.io/values.max-model-len": "servingEngineSpec.modelSpec[0].vllmConfig.maxModelLen",
					"vllmctl.io/values.gpu":           "servingEngineSpec.modelSpec[0].requestGPU",
					"vllmctl.io/values.extra-args":    "servingEngineSpec.modelSpec[0].vllmConfig.extraArgs",
				})
				require.NoError(t, err)
				return p, m
			},
			want: []string{"lower `--max-model-len` (servingEngineSpec.modelSpec[0].vllmConfig.maxModelLen, now 4096)",
				"raise `gpu` to 2 (servingEngineSpec.modelSpec[0].requestGPU, now 1)",
				// set in extraArgs already: no path is claimed for it
				"raise `--gpu-memory-utilization` (now 0.8)",
				// not passed yet: extraArgs is where it goes
				"`--tensor-parallel-size` to 2 (servingEngineSpec.modelSpec[0].vllmConfig.extraArgs, now 1)",
				"`--kv-cache-dtype fp8` added to servingEngineSpec.modelSpec[0].vllmConfig.extraArgs"},
			absent: []string{"model.", "resources.gpu"}},
		{name: "kubectl create deployment: flags only", container: "vllm-openai", log: "kv-cache-max-model-len.log",
			pod: func(*testing.T) (*corev1.Pod, vllm.ValuesMap) { return kubectlCreatedPod(), nil },
			want: []string{"lower `--max-model-len` (now 8192) to at most 34480",
				"raise `--gpu-memory-utilization` (not set: 0.9)",
				"raise the container's `nvidia.com/gpu` to 2 (none requested now)"},
			absent: builtinPaths()},
		{name: "kubectl create deployment, sh -c with $(VAR): the expanded flags", container: "vllm-openai", log: "kv-cache-max-model-len.log",
			pod: func(*testing.T) (*corev1.Pod, vllm.ValuesMap) {
				p := kubectlCreatedPod()
				c := &p.Spec.Containers[0]
				c.Command = []string{"/bin/sh", "-c", "exec python3 -m vllm.entrypoints.openai.api_server --model $(MODEL) --max-model-len=$(LEN) --gpu-memory-utilization 0.92"}
				c.Env = []corev1.EnvVar{{Name: "MODEL", Value: "Qwen/Qwen3-8B"}, {Name: "LEN", Value: "16384"}}
				c.Resources.Limits = corev1.ResourceList{vllm.GPUResource: resource.MustParse("1")}
				return p, nil
			},
			want: []string{"lower `--max-model-len` (now 16384)", "raise `--gpu-memory-utilization` (now 0.92)",
				"raise the container's `nvidia.com/gpu` to 2 (now 1)"},
			absent: builtinPaths()},
	}
	cls := newClassifier()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod, values := tc.pod(t)
			in := podCauseInput(pod, tc.container, nil)
			require.NotNil(t, in.spec)
			in.spec.values = values
			in.logs = [][]string{fixture(t, tc.log)}
			_, _, hints := cls.classify(in)
			all := strings.Join(hints, "\n")
			for _, w := range tc.want {
				assert.Contains(t, all, w)
			}
			for _, a := range tc.absent {
				assert.NotContains(t, all, a)
			}
		})
	}
}

// TestHintsOfEveryCauseWithoutAMapping: no hint of any cause quotes a
// built-in values path for a pod of a chart that maps none.
func TestHintsOfEveryCauseWithoutAMapping(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("testdata", "causes"))
	require.NoError(t, err)
	cls := newClassifier()
	pod := chartPod(func(p *corev1.Pod, c *corev1.Container) {
		c.VolumeMounts = c.VolumeMounts[:1]
		p.Spec.Volumes = p.Spec.Volumes[:1]
	})
	causes := map[Cause]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		in := podCauseInput(pod, "server", startupKillEvents)
		in.logs = [][]string{fixture(t, e.Name())}
		in.term = &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 137}
		cause, _, hints := cls.classify(in)
		causes[cause] = true
		all := strings.Join(hints, "\n")
		for _, a := range builtinPaths() {
			assert.NotContains(t, all, a, "%s (%s)", e.Name(), cause)
		}
		in.spec.values = builtinValues(t)
		_, _, withMap := cls.classify(in)
		if cause != CauseUnknown && cause != CauseGPUNotVisible {
			assert.NotEqual(t, hints, withMap, "%s (%s): the built-in chart's hints name its values", e.Name(), cause)
		}
	}
	assert.GreaterOrEqual(t, len(causes), 10, "the fixtures cover the causes")
}
