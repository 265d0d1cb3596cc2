// Package termout is vllmctl's terminal output of a rollout, and the
// sanitiser every text from outside goes through before it is printed or
// recorded.
//
// The progress printers ([NewProgressPrinter]: a live view on a terminal,
// plain timestamped lines, JSON lines) print the [rollout.Event] values a
// wait sends; [WriteDiagnosis] and [WriteDiagnosisOnDemand] render a
// [rollout.Diagnosis] for people. [SanitizeLine], [SanitizeLines] and
// [SanitizeText] make untrusted text (container logs, events, termination
// messages, a canary gate's output) safe for terminals, tables, CI
// summaries and release records: controls escaped, valid UTF-8, CI runner
// commands defused, clipped. The watcher (package wait) sanitises every
// diagnosis it returns with them; the command layer's tables use them too.
//
// It imports only internal/rollout and internal/object of the module, and
// sits below the watcher.
package termout
