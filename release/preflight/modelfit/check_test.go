package modelfit

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vllmctl/vllmctl/internal/testhub"
)

func gpuNode(name string, gpus int64, memMiB string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	l := map[string]string{"kubernetes.io/hostname": name}
	if memMiB != "" {
		l[GPUMemoryLabel] = memMiB
	}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// deployment renders a built-in-chart-like Deployment of model with
// extra vLLM args and gpus GPUs.
func deployment(model string, gpus string, args ...string) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: r1}
spec:
  template:
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:v0.11.0
        args: [--model, ` + model + `, --gpu-memory-utilization, "0.9"` + extraArgs(args) + `]
        resources: {limits: {nvidia.com/gpu: ` + gpus + `}}
`
}

func extraArgs(args []string) string {
	var b strings.Builder
	for _, a := range args {
		b.WriteString(`, "` + a + `"`)
	}
	return b.String()
}

func TestCheck(t *testing.T) {
	hub := testhub.New(configsDir, testToken)
	defer hub.Close()
	nodes := []runtime.Object{
		gpuNode("a100-1", 8, "81920", nil),
		gpuNode("a100-2", 8, "81920", nil),
		gpuNode("l4", 8, "23034", map[string]string{"pool": "small"}, corev1.Taint{Key: "pool", Value: "small", Effect: corev1.TaintEffectNoSchedule}),
		gpuNode("cpu", 0, "", nil),
	}
	ctx := context.Background()
	run := func(t *testing.T, objs string, opts Options) ([]string, *Report, error) {
		t.Helper()
		var lines []string
		opts.Namespace = "ns"
		if opts.Source.Endpoint == "" {
			opts.Source.Endpoint = hub.URL
		}
		opts.Progress = func(l string, _ bool) { lines = append(lines, l) }
		rep, err := Check(ctx, fake.NewClientset(nodes...), objects(t, objs), opts)
		return lines, rep, err
	}

	t.Run("70B bf16 on one 80 GiB GPU is refused with gpu-oom and its hints", func(t *testing.T) {
		_, rep, err := run(t, deployment("meta-llama/Llama-3.3-70B-Instruct", "1"), Options{})
		var fe *Error
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, 2, fe.ExitCode())
		require.Len(t, fe.Refused, 1)
		r := fe.Refused[0]
		assert.Equal(t, "gpu-oom", r.Cause)
		assert.Contains(t, r.Message, "131.4 GiB per GPU")
		assert.Contains(t, r.GPUMemoryFrom, "81920 MiB on node a100-1, a100-2", "the tainted L4 pool is not a candidate")
		require.NotEmpty(t, r.Hints)
		assert.Contains(t, strings.Join(r.Hints, "\n"), "`--tensor-parallel-size` to 2")
		assert.Contains(t, err.Error(), "hint:")
		assert.Len(t, rep.Servers, 1)
	})
	t.Run("the same model on four GPUs fits", func(t *testing.T) {
		lines, rep, err := run(t, deployment("meta-llama/Llama-3.3-70B-Instruct", "4", "--tensor-parallel-size", "4"), Options{})
		require.NoError(t, err)
		assert.Equal(t, VerdictFits, rep.Servers[0].Fit.Verdict)
		require.Len(t, lines, 1)
		assert.Contains(t, lines[0], "fits")
	})
	t.Run("too long a max-model-len is refused with kv-cache, the longest that fits in the hint", func(t *testing.T) {
		_, _, err := run(t, deployment("meta-llama/Llama-3.3-70B-Instruct", "2", "--tensor-parallel-size", "2"), Options{})
		var fe *Error
		require.ErrorAs(t, err, &fe)
		r := fe.Refused[0]
		assert.Equal(t, "kv-cache", r.Cause)
		assert.Contains(t, r.Hints[0], "to at most ")
		assert.Contains(t, r.Hints[0], "`--max-model-len`")
	})
	t.Run("pods tolerating the small pool and selecting it get its GPUs", func(t *testing.T) {
		objs := deployment("meta-llama/Llama-3.1-8B", "1", "--max-model-len", "1024") + `      nodeSelector: {pool: small}
      tolerations: [{key: pool, operator: Equal, value: small, effect: NoSchedule}]
`
		_, rep, err := run(t, objs, Options{})
		require.NoError(t, err)
		assert.Contains(t, rep.Servers[0].GPUMemoryFrom, "23034 MiB on node l4")
	})
	t.Run("a gated model without a token is skipped with one line", func(t *testing.T) {
		hub.Gate("meta-llama/Llama-3.1-8B")
		lines, rep, err := run(t, deployment("meta-llama/Llama-3.1-8B", "1"), Options{})
		require.NoError(t, err)
		require.Len(t, lines, 1)
		assert.Contains(t, lines[0], "skipped")
		assert.Contains(t, lines[0], "HTTP 401")
		assert.NotEmpty(t, rep.Servers[0].Skipped)
		_, rep, err = run(t, deployment("meta-llama/Llama-3.1-8B", "1"), Options{Source: Source{Endpoint: hub.URL, Token: testToken}})
		require.NoError(t, err)
		require.NotNil(t, rep.Servers[0].Fit, "with HF_TOKEN the gated config is read")
		assert.Equal(t, VerdictFits, rep.Servers[0].Fit.Verdict)
	})
	t.Run("no labelled node: the values' override, else a skip", func(t *testing.T) {
		var lines []string
		bare := fake.NewClientset(gpuNode("n", 8, "", nil))
		opts := Options{Namespace: "ns", Source: Source{Endpoint: hub.URL}, Progress: func(l string, _ bool) { lines = append(lines, l) }}
		rep, err := Check(ctx, bare, objects(t, deployment("Qwen/Qwen3-8B", "1")), opts)
		require.NoError(t, err)
		assert.Contains(t, rep.Servers[0].Skipped, "modelFit.gpuMemoryMiB")
		opts.GPUMemoryMiB = 16384
		_, err = Check(ctx, bare, objects(t, deployment("Qwen/Qwen3-8B", "1")), opts)
		var fe *Error
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "gpu-oom", fe.Refused[0].Cause)
		assert.Equal(t, "modelFit.gpuMemoryMiB 16384", fe.Refused[0].GPUMemoryFrom)
	})
	t.Run("nodes that may not be read: skipped", func(t *testing.T) {
		cs := fake.NewClientset()
		cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, assert.AnError
		})
		rep, err := Check(ctx, cs, objects(t, deployment("Qwen/Qwen3-8B", "1")), Options{Source: Source{Endpoint: hub.URL}})
		require.NoError(t, err)
		assert.Contains(t, rep.Servers[0].Skipped, "nodes cannot be read")
	})
	t.Run("a config is read once for every server of the model", func(t *testing.T) {
		before := hub.Requests("/Qwen/Qwen3-4B/resolve/main/config.json")
		var lines []string
		rep, err := Check(ctx, fake.NewClientset(nodes...), objects(t, deployment("Qwen/Qwen3-4B", "1"), strings.Replace(deployment("Qwen/Qwen3-4B", "1"), "name: r1", "name: r2", 1)),
			Options{Source: Source{Endpoint: hub.URL}, Progress: func(l string, _ bool) { lines = append(lines, l) }})
		require.NoError(t, err)
		assert.Len(t, rep.Servers, 2)
		assert.Equal(t, before+1, hub.Requests("/Qwen/Qwen3-4B/resolve/main/config.json"))
	})
	t.Run("no vLLM server: nothing read", func(t *testing.T) {
		rep, err := Check(ctx, nil, objects(t, notVLLM), Options{})
		require.NoError(t, err)
		assert.Empty(t, rep.Servers)
	})
}

// TestMemoSharedByChecks: checks sharing a Source's Memo (a fleet's
// targets) read a model's config from the Hub once, concurrent or not.
func TestMemoSharedByChecks(t *testing.T) {
	hub := testhub.New(configsDir, testToken)
	defer hub.Close()
	client := fake.NewClientset(gpuNode("a100-1", 8, "81920", nil))
	src := Source{Endpoint: hub.URL, Memo: NewMemo()}
	var wg sync.WaitGroup
	for range 4 {
		objs := objects(t, deployment("Qwen/Qwen3-8B", "1"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := Check(context.Background(), client, objs, Options{Namespace: "ns", Source: src})
			assert.NoError(t, err)
			assert.Equal(t, VerdictFits, rep.Servers[0].Fit.Verdict)
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, hub.Requests("/Qwen/Qwen3-8B/resolve/main/config.json"))
}
