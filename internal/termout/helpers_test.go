package termout

import (
	"time"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/internal/termout/termouttest"
)

// PrintProgress prints the events received on events with p until the
// channel is closed, then closes p. It keeps receiving after a write error
// (so the producer never blocks) and returns the first error.
func PrintProgress(p ProgressPrinter, events <-chan rollout.Event) error {
	var first error
	for ev := range events {
		if first != nil {
			continue
		}
		first = p.Print(ev)
	}
	if err := p.Close(); first == nil {
		first = err
	}
	return first
}

// ns is the namespace of the tests' objects.
const ns = "llm"

// t0 is the tests' clock at the start.
var t0 = time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)

// The shared helpers, by the names the tests use.
const hostileLog = termouttest.HostileLog

var requireSafe = termouttest.RequireSafe
