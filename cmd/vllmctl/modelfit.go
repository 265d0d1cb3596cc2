package main

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/vllmctl/vllmctl/release/preflight/modelfit"
)

// modelFitFlags select where the model-fit preflight reads the models'
// config.json: --model-config, else HF_ENDPOINT (default the Hugging Face
// Hub) with HF_TOKEN, or a local directory named by --model.
type modelFitFlags struct {
	file string
}

// AddFlags registers --model-config on fs.
func (m *modelFitFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&m.file, "model-config", "",
		"the model's config.json for the model-fit preflight (default: from the Hugging Face Hub at $HF_ENDPOINT with $HF_TOKEN, or the local directory --model names)")
}

// source is where the check reads configs: the flag, and the Hub's
// endpoint (HF_ENDPOINT, default the Hugging Face Hub) and token
// (HF_TOKEN: only sent, never printed) from the environment.
func (m *modelFitFlags) source() modelfit.Source {
	endpoint := os.Getenv("HF_ENDPOINT")
	if endpoint == "" {
		endpoint = modelfit.DefaultEndpoint
	}
	return modelfit.Source{File: m.file, Endpoint: endpoint, Token: os.Getenv("HF_TOKEN")}
}
