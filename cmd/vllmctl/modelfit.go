package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/vllmcause"
	"github.com/vllmctl/vllmctl/release/preflight/modelfit"
)

// modelFitFlags select where the model-fit preflight reads the models'
// config.json: --model-config, else HF_ENDPOINT (default the Hugging Face
// Hub) with HF_TOKEN, or a local directory named by --model.
type modelFitFlags struct {
	file string
	// memo keeps the configs read for every operation of the command (a
	// fleet's targets read a model from the Hub once).
	memo *modelfit.Memo
}

// AddFlags registers --model-config on fs.
func (m *modelFitFlags) AddFlags(fs *pflag.FlagSet) {
	m.memo = modelfit.NewMemo()
	fs.StringVar(&m.file, "model-config", "",
		"the model's config.json for the model-fit preflight (default: from the Hugging Face Hub at $HF_ENDPOINT with $HF_TOKEN, or the local directory --model names)")
}

// Validate refuses a --model-config (flag, VLLMCTL_MODEL_CONFIG or the
// config file) that is not a readable config.json this check knows: a
// missing file, a directory, a device, an oversized or binary file is a
// usage error naming the flag, not a preflight skipped on every deploy.
func (m *modelFitFlags) Validate() error {
	if m.file == "" {
		return nil
	}
	if _, err := modelfit.ReadConfigFile(m.file); err != nil {
		return newUsageError("--model-config %s: %v", m.file, err)
	}
	return nil
}

// source is where the check reads configs: the flag, and the Hub's
// endpoint (HF_ENDPOINT, default the Hugging Face Hub) and token
// (HF_TOKEN: only sent, never printed) from the environment.
func (m *modelFitFlags) source() modelfit.Source {
	endpoint := os.Getenv("HF_ENDPOINT")
	if endpoint == "" {
		endpoint = modelfit.DefaultEndpoint
	}
	return modelfit.Source{File: m.file, Endpoint: endpoint, Token: os.Getenv("HF_TOKEN"), Memo: m.memo}
}

// modelFitHint is what the model-fit arithmetic says of the failed
// container of a gpu-oom or kv-cache diagnosis, as one more hint: the
// pod's own flags, its model's config (read as deploy reads it) and its
// node's GPU memory. Best effort: "" when the pod, the config or the GPU
// memory cannot be read.
func modelFitHint(ctx context.Context, client kubernetes.Interface, d *rollout.Diagnosis, src modelfit.Source) string {
	if d == nil || (d.Cause != vllmcause.CauseGPUOOM && d.Cause != vllmcause.CauseKVCache) || d.Pod == "" || client == nil {
		return ""
	}
	pod, err := client.CoreV1().Pods(d.Namespace).Get(ctx, d.Pod, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		return ""
	}
	obj := &unstructured.Unstructured{Object: m}
	obj.SetAPIVersion("v1")
	obj.SetKind("Pod")
	rep, _ := modelfit.Check(ctx, client, []*unstructured.Unstructured{obj}, modelfit.Options{Namespace: d.Namespace, Source: src})
	if rep == nil {
		return ""
	}
	for _, s := range rep.Servers {
		if s.Container != d.Container || s.Fit == nil {
			continue
		}
		switch {
		case s.Cause != "":
			return fmt.Sprintf("vllmctl's model-fit arithmetic (docs/model-fit.md) finds the same for these flags (%s): %s", s.Cause, s.Message)
		case s.Fit.Verdict == modelfit.VerdictTight:
			return fmt.Sprintf("vllmctl's model-fit arithmetic (docs/model-fit.md) finds these flags in its grey zone: %s", s.Message)
		default:
			return fmt.Sprintf("vllmctl's model-fit arithmetic (docs/model-fit.md) finds room for these flags (%s): look for what else holds GPU memory (another process, CUDA graphs: --enforce-eager)", s.Message)
		}
	}
	return ""
}
