package release

import (
	"fmt"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
)

// The one redaction rule for what an operation records and returns: the
// text that comes from outside vllmctl (a container's log tail, events,
// messages, a canary gate's command and output, and the descriptions made
// from them) passes through the operation's Redactor, which knows the
// values of every Secret the operation rendered or read. A record is
// redacted before it is written (see storage.Rewriting), so that every reader
// (status, history, a later operation) prints what the record holds, and
// never a Secret value or its base64 form. The values and the manifest of
// a record are not text from outside: they are stored as given (the record
// is itself a Secret). What prints them (get manifest, get values) or
// runs without rendering (wait, test, uninstall's hooks) learns the
// record's Secrets first (LearnRecord).

// UseRedactor makes red the engine's Redactor: every progress line, error
// and result the caller prints passes through it, and every record the
// engine writes from now on is redacted before it is written.
func (e *Engine) UseRedactor(red *diff.Redactor) {
	e.Redactor = red
	if red == nil || e.Store == nil {
		return
	}
	e.Store = storage.Rewriting(e.Store, func(r *storage.Release) *storage.Release {
		return redactedRecord(red, r)
	})
}

// redactedRecord returns a copy of r whose text from outside passed
// through red.
func redactedRecord(red *diff.Redactor, r *storage.Release) *storage.Release {
	c := *r
	c.Description = red.Line(c.Description)
	c.Notes = red.Text(c.Notes)
	c.Failure = redactFailure(red, c.Failure)
	c.Canary = redactCanary(red, c.Canary)
	c.ServeCheck = RedactServe(red, c.ServeCheck)
	c.Analysis = RedactAnalysis(red, c.Analysis)
	return &c
}

// LearnRecord teaches red the values of the Secrets of rec's manifest and
// of its hooks. It learns from every manifest that parses and returns the
// first error of one that does not (naming the release and revision).
func LearnRecord(red *diff.Redactor, rec *storage.Release) error {
	if red == nil {
		return nil
	}
	var first error
	learn := func(what, manifest string) {
		objs, err := cluster.ParseManifest(manifest)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("release %s revision %d: %s, read for its Secrets: %w", rec.Name, rec.Revision, what, err)
			}
			return
		}
		red.AddObjects(objs...)
	}
	learn("its manifest", rec.Manifest)
	for _, h := range rec.Hooks {
		learn("hook "+h.Kind+" "+h.Name, h.Manifest)
	}
	return first
}

// RedactResult returns a copy of res whose text from outside (description,
// failure diagnosis, canary report, and the same in the rollback's result)
// passed through red.
func RedactResult(red *diff.Redactor, res *Result) *Result {
	if red == nil || res == nil {
		return res
	}
	c := *res
	c.Description = red.Line(c.Description)
	c.Notes = red.Text(c.Notes)
	c.Failure = redactFailure(red, c.Failure)
	c.Canary = redactCanary(red, c.Canary)
	c.ServeCheck = RedactServe(red, c.ServeCheck)
	c.Analysis = RedactAnalysis(red, c.Analysis)
	c.Hooks = RedactHookRuns(red, c.Hooks)
	c.Rollback = RedactResult(red, c.Rollback)
	return &c
}

// RedactHookRuns returns a copy of runs (of a deploy, rollback,
// uninstall or test) whose failures passed through red.
func RedactHookRuns(red *diff.Redactor, runs []HookRun) []HookRun {
	if red == nil || len(runs) == 0 {
		return runs
	}
	out := make([]HookRun, len(runs))
	for i, r := range runs {
		r.Failure = redactFailure(red, r.Failure)
		out[i] = r
	}
	return out
}

// redactFailure returns a redacted copy of f (nil stays nil).
func redactFailure(red *diff.Redactor, f *rollout.Diagnosis) *rollout.Diagnosis {
	if f == nil {
		return nil
	}
	c := *f
	c.Message, c.Evidence, c.LogNote = red.Line(c.Message), red.Line(c.Evidence), red.Line(c.LogNote)
	c.Events, c.LogTail, c.Hints = red.Lines(c.Events), red.Lines(c.LogTail), red.Lines(c.Hints)
	return &c
}

// redactCanary returns a redacted copy of r (nil stays nil).
func redactCanary(red *diff.Redactor, r *storage.CanaryReport) *storage.CanaryReport {
	if r == nil {
		return nil
	}
	c := *r
	c.Reason = red.Line(c.Reason)
	c.Gate = RedactGate(red, c.Gate)
	return &c
}

// RedactGate returns a copy of g (a gate's run: the canary's gate, or a
// fleet's gate between waves) whose command and output passed through
// red (nil stays nil). It is the one redaction of every gate: a gate
// command is written by the user and its output comes from outside
// vllmctl, so either may hold a Secret's value or its base64 form.
func RedactGate(red *diff.Redactor, g *storage.GateResult) *storage.GateResult {
	if g == nil || red == nil {
		return g
	}
	c := *g
	c.Command = red.Line(c.Command)
	c.OutputTail = red.Lines(c.OutputTail)
	return &c
}

// RedactServe returns a copy of r (a serve check's report) whose pods'
// messages and body excerpts, which quote what the pods answered, passed
// through red (nil stays nil).
func RedactServe(red *diff.Redactor, r *rollout.ServeReport) *rollout.ServeReport {
	if r == nil || red == nil {
		return r
	}
	c := *r
	c.Reason = red.Line(c.Reason)
	c.Pods = make([]rollout.ServePod, len(r.Pods))
	for i, p := range r.Pods {
		p.Message, p.Body = red.Line(p.Message), red.Line(p.Body)
		c.Pods[i] = p
	}
	return &c
}

// RedactAnalysis returns a copy of r (a canary analysis' report) whose
// reason and measurements' messages, which quote providers' errors and
// answers, passed through red (nil stays nil).
func RedactAnalysis(red *diff.Redactor, r *storage.AnalysisReport) *storage.AnalysisReport {
	if r == nil || red == nil {
		return r
	}
	c := *r
	c.Reason = red.Line(c.Reason)
	c.Measurements = make([]storage.AnalysisMeasurement, len(r.Measurements))
	for i, m := range r.Measurements {
		m.Message = red.Line(m.Message)
		c.Measurements[i] = m
	}
	return &c
}
