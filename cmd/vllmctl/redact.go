package main

import (
	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/wait"
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
	return ev
}

func redactRollout(red *diff.Redactor, p *wait.RolloutProgress) *wait.RolloutProgress {
	if p == nil {
		return nil
	}
	c := *p
	c.Warning, c.Evidence = red.Line(c.Warning), red.Line(c.Evidence)
	c.Hints = red.Lines(c.Hints)
	return &c
}

// redactResult returns a copy of res whose failure diagnosis, description
// and canary gate output passed through red.
func redactResult(red *diff.Redactor, res *release.Result) *release.Result {
	if red == nil || res == nil {
		return res
	}
	c := *res
	c.Description = red.Line(c.Description)
	c.Failure = redactFailure(red, c.Failure)
	if c.Canary != nil {
		cn := *c.Canary
		cn.Reason = red.Line(cn.Reason)
		if cn.Gate != nil {
			g := *cn.Gate
			g.OutputTail = red.Lines(g.OutputTail)
			cn.Gate = &g
		}
		c.Canary = &cn
	}
	if c.Rollback != nil {
		c.Rollback = redactResult(red, c.Rollback)
	}
	return &c
}

func redactFailure(red *diff.Redactor, f *release.Failure) *release.Failure {
	if f == nil {
		return nil
	}
	c := *f
	c.Message, c.Evidence, c.LogNote = red.Line(c.Message), red.Line(c.Evidence), red.Line(c.LogNote)
	c.Events, c.LogTail, c.Hints = red.Lines(c.Events), red.Lines(c.LogTail), red.Lines(c.Hints)
	return &c
}
