package storage

import "time"

// AnalysisReport is what a canary analysis measured and concluded: in the
// revision's record, the result document, `status` and `history`. Records
// written before analyses existed have none (the field is omitted).
type AnalysisReport struct {
	// Provider is where the figures came from: scrape (the pods' own
	// /metrics through the API server) or prometheus.
	Provider string `json:"provider"`
	// Outcome is passed, failed or inconclusive (AnalysisPassed, …), or
	// running while the analysis lasts.
	Outcome string `json:"outcome"`
	// Reason says why the analysis failed or was inconclusive.
	Reason string `json:"reason,omitempty"`
	// Interval and Count are the spec's: Count measurements, one every
	// Interval.
	Interval string `json:"interval"`
	Count    int    `json:"count"`
	// Inconclusive is the policy an inconclusive analysis followed (fail,
	// pass or hold).
	Inconclusive string `json:"inconclusive,omitempty"`
	// Load is what the synthetic load sent, when the spec asked for one.
	Load *LoadReport `json:"load,omitempty"`
	// Measurements are every measurement of every metric, in order.
	Measurements []AnalysisMeasurement `json:"measurements"`
}

// The outcomes of an analysis and of its measurements.
const (
	AnalysisRunning      = "running"
	AnalysisPassed       = "passed"
	AnalysisFailed       = "failed"
	AnalysisInconclusive = "inconclusive"
	// AnalysisError is a measurement the provider could not take (a
	// scrape that failed); an analysis never ends with it.
	AnalysisError = "error"
	// AnalysisStopped is an analysis cut short: the canary failed (or
	// the deploy was interrupted) before it ended.
	AnalysisStopped = "stopped"
)

// AnalysisMeasurement is one measurement of one metric. The figures are
// absent (null) when there was nothing to measure (no request, no
// sample).
type AnalysisMeasurement struct {
	// Metric is the preset's (errorRatio, ttftP95Ratio, …) or the custom
	// metric's name.
	Metric string `json:"metric"`
	// At is when the measurement was taken (the end of its interval).
	At time.Time `json:"at"`
	// Canary and Stable are the figure on each side (for a ratio: the
	// canary's and the stable pods' p95; for errorRatio: each side's error
	// ratio); Value is what the condition judges.
	Canary *float64 `json:"canary,omitempty"`
	Stable *float64 `json:"stable,omitempty"`
	Value  *float64 `json:"value,omitempty"`
	// Condition is what a passing measurement satisfies, e.g.
	// "value <= 2".
	Condition string `json:"condition"`
	// Outcome is passed, failed, inconclusive or error.
	Outcome string `json:"outcome"`
	// CanaryRequests and StableRequests are the requests each side
	// finished during the interval.
	CanaryRequests float64 `json:"canaryRequests"`
	StableRequests float64 `json:"stableRequests"`
	// Message says why a measurement is inconclusive or an error.
	Message string `json:"message,omitempty"`
}

// LoadReport is what the synthetic load of an analysis sent.
type LoadReport struct {
	RPS float64 `json:"rps"`
	// Sent, Failed and Dropped count requests: sent to a pod, answered
	// with an error or not at all (those the end of the analysis cut short
	// aside), not sent because the concurrency bound was reached.
	Sent    int64 `json:"sent"`
	Failed  int64 `json:"failed"`
	Dropped int64 `json:"dropped"`
}
