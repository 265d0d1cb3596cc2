package main

import (
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTightenGCLater: without GOGC in the environment the GC percent stays
// at the default until the delay passes, then becomes 50; with GOGC set,
// nothing is scheduled.
func TestTightenGCLater(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	env := func(gogc bool) func(string) (string, bool) {
		return func(key string) (string, bool) { return "200", gogc && key == "GOGC" }
	}

	assert.Nil(t, tightenGCLater(env(true), time.Millisecond), "GOGC is set: left alone")

	later := tightenGCLater(env(false), time.Hour)
	require.NotNil(t, later)
	assert.Equal(t, 100, debug.SetGCPercent(100), "before the delay: the default")
	later.Stop()

	require.NotNil(t, tightenGCLater(env(false), time.Millisecond))
	// Setting 100 back while reading is harmless: once the timer fired,
	// the first read sees 50 and the wait ends.
	assert.Eventually(t, func() bool { return debug.SetGCPercent(100) == 50 }, 5*time.Second, time.Millisecond,
		"after the delay: GOGC=50")
}
