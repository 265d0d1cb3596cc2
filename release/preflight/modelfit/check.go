package modelfit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/vllm"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
)

// Options tune [Check].
type Options struct {
	// Namespace is the release namespace, for objects that have none.
	Namespace string
	// Source is where configs are read from.
	Source Source
	// GPUMemoryMiB, when positive, is one GPU's memory for every server
	// (the values' modelFit.gpuMemoryMiB): the nodes' labels are not read.
	GPUMemoryMiB int64
	// Progress, when set, receives the check's one-line notes: a fit and
	// its numbers, a skip and why (warning false), a fit in the grey zone
	// or on only some of the candidate GPUs (warning true).
	Progress func(line string, warning bool)
	// Values is the chart's values mapping: a refusal's hints name its
	// values paths (nil: flags and the pod's values only).
	Values vllm.ValuesMap
}

// Report is the model-fit preflight of a release: one entry per vLLM
// server container.
type Report struct {
	Servers []ServerFit `json:"servers"`
	// Nodes are every node of the cluster when the check listed them (nil
	// when it did not, or could not): the capacity preflight of the same
	// deploy reads them instead of listing them again.
	Nodes []*corev1.Node `json:"-"`
}

// ServerFit is the check of one vLLM server container.
type ServerFit struct {
	Object    string `json:"object"`
	Container string `json:"container"`
	Model     string `json:"model,omitempty"`
	// ConfigFrom says where config.json was read; GPUMemoryFrom where the
	// GPU memory came from.
	ConfigFrom    string `json:"configFrom,omitempty"`
	GPUMemoryFrom string `json:"gpuMemoryFrom,omitempty"`
	// Skipped says why the check was not made ("" when it was).
	Skipped string `json:"skipped,omitempty"`
	Fit     *Fit   `json:"fit,omitempty"`
	// Cause is gpu-oom or kv-cache when refused, with the hints a rollout
	// that failed with that cause gives.
	Cause string   `json:"cause,omitempty"`
	Hints []string `json:"hints,omitempty"`
	// Message is the verdict in words.
	Message string `json:"message,omitempty"`
}

// Error is a model-fit refusal: nothing was applied (exit code 2).
type Error struct {
	Refused []ServerFit
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("model-fit preflight refused the rollout:")
	for _, s := range e.Refused {
		fmt.Fprintf(&b, "\n  %s container %s (model %s): %s: %s", s.Object, s.Container, s.Model, s.Cause, s.Message)
		for _, h := range s.Hints {
			fmt.Fprintf(&b, "\n    hint: %s", h)
		}
	}
	b.WriteString("\n  (--skip-preflight skips this check)")
	return b.String()
}

// ExitCode is 2: a rollout preflight refuses.
func (e *Error) ExitCode() int { return exitcode.Invalid }

// Check runs the model-fit preflight over the rendered objects: for each
// vLLM server container, the model's config (Source), its settings from
// the command line, and the GPU memory of the nodes its pods may use
// (GPU Feature Discovery's label, or opts.GPUMemoryMiB). A server whose
// config or GPU memory cannot be known is skipped with one line. The
// report is returned even with an error; a refusal is an *Error.
func Check(ctx context.Context, client kubernetes.Interface, objs []*unstructured.Unstructured, opts Options) (*Report, error) {
	servers := Servers(objs, opts.Namespace)
	rep := &Report{Servers: []ServerFit{}}
	if len(servers) == 0 {
		return rep, nil
	}
	if opts.Source.Memo == nil {
		// Servers of one model read its config once.
		opts.Source.Memo = NewMemo()
	}
	c := &checker{client: client, opts: opts}
	var refused []ServerFit
	for _, s := range servers {
		sf := c.check(ctx, s)
		rep.Servers = append(rep.Servers, sf)
		if sf.Cause != "" {
			refused = append(refused, sf)
		}
	}
	if c.nodesErr == nil {
		for i := range c.nodes {
			rep.Nodes = append(rep.Nodes, &c.nodes[i])
		}
	}
	if len(refused) > 0 {
		return rep, &Error{Refused: refused}
	}
	return rep, nil
}

// checker is one Check's state: the nodes, listed once (the configs
// read are opts.Source.Memo's).
type checker struct {
	client     kubernetes.Interface
	opts       Options
	nodes      []corev1.Node
	nodesErr   error
	nodesTaken bool
}

func (c *checker) note(format string, args ...any) {
	if c.opts.Progress != nil {
		c.opts.Progress(fmt.Sprintf(format, args...), false)
	}
}

func (c *checker) warn(format string, args ...any) {
	if c.opts.Progress != nil {
		c.opts.Progress(fmt.Sprintf(format, args...), true)
	}
}

func (c *checker) listNodes(ctx context.Context) ([]corev1.Node, error) {
	if !c.nodesTaken {
		c.nodesTaken = true
		if c.client == nil {
			c.nodesErr = errors.New("no cluster")
		} else {
			list, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				c.nodesErr = err
			} else {
				c.nodes = list.Items
			}
		}
	}
	return c.nodes, c.nodesErr
}

// check fits one server.
func (c *checker) check(ctx context.Context, s Server) ServerFit {
	sf := ServerFit{Object: s.Object, Container: s.Container, Model: s.Model}
	skip := func(why string) ServerFit {
		sf.Skipped = why
		c.note("%s (container %s) skipped: %s", s.Object, s.Container, why)
		return sf
	}
	l, err := c.opts.Source.Load(ctx, s.Model, s.Revision)
	if err != nil {
		if ctx.Err() != nil {
			return skip("interrupted")
		}
		return skip(err.Error())
	}
	sf.ConfigFrom = l.From
	gpuMiB := c.opts.GPUMemoryMiB
	sf.GPUMemoryFrom = fmt.Sprintf("modelFit.gpuMemoryMiB %d", gpuMiB)
	var smallest int64
	if gpuMiB <= 0 {
		nodes, err := c.listNodes(ctx)
		if err != nil {
			return skip(fmt.Sprintf("the nodes cannot be read (%v): set modelFit.gpuMemoryMiB in the values", err))
		}
		g := candidateGPUMemory(nodes, s.Pod, s.GPUs)
		if g.MiB <= 0 {
			return skip(g.Unknown)
		}
		gpuMiB, smallest, sf.GPUMemoryFrom = g.MiB, g.Smallest, g.From
	}
	weights, from := l.Config.WeightBytes(s.Engine.Dtype, s.Engine.Quantization), "parameter count and dtype of config.json"
	if l.IndexBytes > 0 {
		weights, from = l.Config.IndexWeightBytes(l.IndexBytes, s.Engine.Dtype, s.Engine.Quantization), fromIndex
	}
	f := Compute(l.Config, s.Engine, weights, from, gpuMiB)
	sf.Fit = &f
	switch f.Verdict {
	case VerdictGPUOOM:
		sf.Cause = string(vllmcause.CauseGPUOOM)
		sf.Message = fmt.Sprintf("the weights alone exceed what vLLM may use of one GPU: %s%s", f.Summary(), minGPUs(f))
		sf.Hints = vllmcause.FitHints(vllmcause.CauseGPUOOM, s.Pod, s.Container, 0, c.opts.Values)
	case VerdictKVCache:
		sf.Cause = string(vllmcause.CauseKVCache)
		fits := fmt.Sprintf("at most %d tokens do", f.MaxLenFits)
		if f.MaxLenFits <= 0 {
			fits = "no memory is left for it"
		}
		sf.Message = fmt.Sprintf("one sequence of --max-model-len %d tokens does not fit the memory left for the KV cache (%s): %s", f.MaxModelLen, fits, f.Summary())
		sf.Hints = vllmcause.FitHints(vllmcause.CauseKVCache, s.Pod, s.Container, f.MaxLenFits, c.opts.Values)
	case VerdictTight:
		sf.Message = "fits only if activations and CUDA graphs take less than the estimate (grey zone): " + f.Summary()
		c.warn("model fit of %s (container %s, %s): %s", s.Object, s.Container, s.Model, sf.Message)
	default:
		sf.Message = "fits: " + f.Summary()
		c.note("%s (container %s, %s) %s", s.Object, s.Container, s.Model, sf.Message)
	}
	if sf.Cause != "" {
		sf.Message += "; one GPU: " + sf.GPUMemoryFrom
	}
	if smallest > 0 && smallest < gpuMiB && !f.Verdict.Refuses() {
		if g := Compute(l.Config, s.Engine, weights, from, smallest); g.Verdict != VerdictFits {
			c.warn("model fit of %s (container %s): on the candidate nodes with %d MiB GPUs it is %s (%s); a nodeSelector on %s keeps the pods off them",
				s.Object, s.Container, smallest, g.Verdict, g.Summary(), GPUMemoryLabel)
		}
	}
	return sf
}

// minGPUs says how many GPUs of this size the weights need at least
// (tensor × pipeline parallel), "" when it cannot say.
func minGPUs(f Fit) string {
	if f.BudgetGiB <= 0 {
		return ""
	}
	all := f.WeightsGiB * float64(f.TensorParallel*f.PipelineParallel)
	n := int64(1)
	for float64(n)*f.BudgetGiB < all && n < 1024 {
		n *= 2
	}
	return fmt.Sprintf("; the weights need at least %d such GPUs (tensor × pipeline parallel), before any KV cache", n)
}
