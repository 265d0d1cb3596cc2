package vllmcause

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCauseDecisive(t *testing.T) {
	for _, c := range []Cause{CauseGPUOOM, CauseKVCache, CauseModelAuth, CauseModelNotFound, CauseDtypeUnsupported, CauseTensorParallel, CauseGPUNotVisible, CauseCUDADriver} {
		assert.True(t, c.Decisive(), c)
	}
	for _, c := range []Cause{CauseShm, CauseNCCL, CauseStartupProbe, CauseUnknown, "", "new-cause"} {
		assert.False(t, c.Decisive(), c)
	}
}
