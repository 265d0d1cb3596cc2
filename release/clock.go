package release

import "time"

// Clock tells the time. Everything in this package that stamps a record or
// measures a lock's age reads it from a Clock, so tests can fix it.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// SystemClock returns the wall clock.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// clockOr returns c, or the wall clock when c is nil.
func clockOr(c Clock) Clock {
	if c == nil {
		return systemClock{}
	}
	return c
}
