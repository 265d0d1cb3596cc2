package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMain keeps the model-fit preflight of the commands under test off
// the network: the Hub endpoint is a closed local port (the check is
// skipped with its one line, the same on every machine) unless the
// environment names one.
func TestMain(m *testing.M) {
	if os.Getenv("HF_ENDPOINT") == "" {
		os.Setenv("HF_ENDPOINT", closedHub)
	}
	os.Unsetenv("HF_TOKEN")
	os.Exit(m.Run())
}

// closedHub is an endpoint where nothing listens.
const closedHub = "http://127.0.0.1:1"

func TestModelFitSource(t *testing.T) {
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("HF_TOKEN", "hf_x")
	m := modelFitFlags{file: "c.json"}
	s := m.source()
	assert.Equal(t, "https://huggingface.co", s.Endpoint, "the Hub by default")
	assert.Equal(t, "hf_x", s.Token)
	assert.Equal(t, "c.json", s.File)
	t.Setenv("HF_ENDPOINT", "http://mirror")
	assert.Equal(t, "http://mirror", m.source().Endpoint)
}
