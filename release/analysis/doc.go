// Package analysis owns the canary analysis of a deploy: the analysis
// spec (the --analysis file, or the built-in chart's analysis values) and
// its checks, the providers that measure the canary pods against the
// stable pods (scrape: the pods' own /metrics read through the API
// server's port-forward; the Prometheus HTTP API is designed to slot in
// as another Provider), the Argo Rollouts semantics that turn
// measurements into an outcome (failureLimit, inconclusiveLimit,
// consecutiveErrorLimit, minRequests), and the optional synthetic load
// (OpenAI /v1/completions requests to both sides) that gives the metrics
// something to measure; which analysis a deploy or a wait runs (Of,
// OfWait), one analysis run with its load and progress (Session), and
// what its outcome decides (Verdict: go on, fail, or hold). What the
// analysis concluded is a storage.AnalysisReport; release wires it into
// the canary hold (or, without a canary, into a bake of the new pods
// after the rollout).
package analysis
