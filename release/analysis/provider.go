package analysis

import (
	"context"
	"net/http"
	"time"
)

// Target is one pod an analysis reads (and loads): its name and the port
// its server listens on.
type Target struct {
	Pod  string
	Port int
}

// Targets are the pods of both sides: the canary pods and the stable
// pods they are measured against (none without a canary: the checks then
// have no baseline).
type Targets struct {
	Namespace string
	Canary    []Target
	Stable    []Target
}

// ClientFunc returns an HTTP client whose requests reach a pod's port
// (podhttp's port-forward client in vllmctl; an httptest server's in
// tests), and the function that closes its idle connections.
type ClientFunc func(pod string, port int, timeout time.Duration) (*http.Client, func())

// Sample is one measurement of one check. A nil figure is one there was
// nothing to compute from (no request on that side).
type Sample struct {
	Canary, Stable, Value *float64
	// CanaryRequests and StableRequests are the requests each side
	// finished in the interval.
	CanaryRequests, StableRequests float64
	// Inconclusive, when set, says why the sample cannot be judged (too
	// few requests, no data); the condition is not evaluated.
	Inconclusive string
	// Result is what a custom metric's conditions see (a query's values).
	Result []float64
}

// Provider measures the checks of an analysis, once per interval. The
// scrape provider reads the pods' /metrics and computes the presets from
// what changed since its previous scrape; a Prometheus provider would run
// each check's query (or the presets' PromQL) over the interval just
// ended.
type Provider interface {
	// Name is the provider's name as reports show it (scrape,
	// prometheus).
	Name() string
	// Start takes what the first measurement is measured from (the
	// scrape provider: a first scrape of every pod).
	Start(ctx context.Context) error
	// Measure returns one Sample per check (in order) for the interval
	// since the previous measurement (or Start). An error is a
	// measurement the provider could not take: every check's
	// measurement is an error (Argo's consecutiveErrorLimit counts them).
	Measure(ctx context.Context, checks []Check) ([]Sample, error)
}
