package wait

// PrintProgress prints the events received on events with p until the
// channel is closed, then closes p. It keeps receiving after a write error
// (so the producer never blocks) and returns the first error.
func PrintProgress(p ProgressPrinter, events <-chan Event) error {
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
