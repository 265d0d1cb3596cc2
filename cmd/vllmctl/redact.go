package main

import (
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
)

// redactEvent returns ev with every text field passed through red: what
// a progress line or JSON line can show.
func redactEvent(red *diff.Redactor, ev release.ProgressEvent) release.ProgressEvent {
	if red == nil {
		return ev
	}
	ev.Object, ev.Status, ev.Message = red.Line(ev.Object), red.Line(ev.Status), red.Line(ev.Message)
	ev.Rollout = redactRollout(red, ev.Rollout)
	if ev.Wait != nil {
		w := *ev.Wait
		w.Message = red.Line(w.Message)
		w.Rollout = redactRollout(red, w.Rollout)
		ev.Wait = &w
	}
	if ev.Measurement != nil {
		m := *ev.Measurement
		m.Message = red.Line(m.Message)
		ev.Measurement = &m
	}
	return ev
}

func redactRollout(red *diff.Redactor, p *rollout.RolloutProgress) *rollout.RolloutProgress {
	if p == nil {
		return nil
	}
	c := *p
	c.Warning, c.Evidence = red.Line(c.Warning), red.Line(c.Evidence)
	c.Hints = red.Lines(c.Hints)
	return &c
}
