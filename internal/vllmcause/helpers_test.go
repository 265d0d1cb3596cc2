package vllmcause

import "github.com/vllmctl/vllmctl/internal/vllmcause/vllmcausetest"

// The shared test helpers, by the names the tests use.
var (
	chartPod = vllmcausetest.ChartPod
	setArg   = vllmcausetest.SetArg
	fixture  = vllmcausetest.Fixture

	builtinValues = vllmcausetest.BuiltinValues
)

// lastLines splits a log into lines; every log of these tests is read
// whole.
func lastLines(data []byte, _ int) []string { return vllmcausetest.Lines(data) }

// ns is the namespace of the tests' pods.
const ns = "llm"
