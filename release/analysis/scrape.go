package analysis

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
)

// vLLM's metric names (vllm/v1/metrics/loggers.py, v0.11) and the HTTP
// counter of prometheus-fastapi-instrumentator that vLLM's API server
// exposes.
const (
	metricHTTPRequests = "http_requests_total"
	metricSuccess      = "vllm:request_success_total"
	metricTTFT         = "vllm:time_to_first_token_seconds"
	metricE2E          = "vllm:e2e_request_latency_seconds"
	metricPreemptions  = "vllm:num_preemptions_total"
	metricKVUsage      = "vllm:kv_cache_usage_perc"
)

// maxMetricsBytes bounds one /metrics answer.
const maxMetricsBytes = 16 << 20

// readCapped reads an answer of at most limit bytes: a longer (or
// endless) one is an error, read no further than limit+1 bytes, instead
// of a truncated answer that may parse (a /metrics cut at a line's end
// gives partial figures).
func readCapped(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("the answer is larger than its cap of %d bytes", limit)
	}
	return data, nil
}

// scrapeConcurrency bounds the pods scraped at once.
const scrapeConcurrency = 8

// sample is one series of a scrape: its labels and value.
type sample struct {
	labels map[string]string
	value  float64
}

// snapshot is one scrape of one pod, by sample name (histograms flattened
// to NAME_bucket{le}, NAME_count and NAME_sum as the text format writes
// them).
type snapshot map[string][]sample

// parseMetrics reads Prometheus' text format into a snapshot.
func parseMetrics(r io.Reader) (snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	s := snapshot{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				count := float64(h.GetSampleCount())
				if h.GetSampleCountFloat() != 0 {
					count = h.GetSampleCountFloat()
				}
				for _, b := range h.GetBucket() {
					if math.IsInf(b.GetUpperBound(), 1) {
						continue // the count, below
					}
					c := float64(b.GetCumulativeCount())
					if b.GetCumulativeCountFloat() != 0 {
						c = b.GetCumulativeCountFloat()
					}
					bl := withLabel(labels, "le", formatLe(b.GetUpperBound()))
					s[name+"_bucket"] = append(s[name+"_bucket"], sample{bl, c})
				}
				s[name+"_bucket"] = append(s[name+"_bucket"], sample{withLabel(labels, "le", "+Inf"), count})
				s[name+"_count"] = append(s[name+"_count"], sample{labels, count})
				s[name+"_sum"] = append(s[name+"_sum"], sample{labels, h.GetSampleSum()})
			default:
				s[name] = append(s[name], sample{labels, valueOf(m)})
			}
		}
	}
	return s, nil
}

func valueOf(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return math.NaN()
}

func withLabel(labels map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for a, b := range labels {
		out[a] = b
	}
	out[k] = v
	return out
}

func formatLe(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// seriesKey identifies a series within a sample name.
func seriesKey(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + labels[k] + ",")
	}
	return b.String()
}

// increase is how much the series of name matching keep grew from before
// to after, summed, as Prometheus' increase() counts a counter: a value
// lower than before is a reset (the counter restarted from 0, so all of
// the new value is increase), and a series absent before (client
// libraries create labelled series at their first increment) grew from 0.
func increase(before, after snapshot, name string, keep func(map[string]string) bool) float64 {
	prev := map[string]float64{}
	for _, s := range before[name] {
		prev[seriesKey(s.labels)] = s.value
	}
	var sum float64
	for _, s := range after[name] {
		if keep != nil && !keep(s.labels) {
			continue
		}
		p, ok := prev[seriesKey(s.labels)]
		switch {
		case !ok || s.value < p:
			sum += s.value
		default:
			sum += s.value - p
		}
	}
	return sum
}

// bucket is one cumulative histogram bucket.
type bucket struct {
	upper float64
	count float64
}

// bucketIncrease returns the increase of a histogram's buckets (name is
// the histogram's, without _bucket), summed by le over every series, as
// sum by (le) (increase(NAME_bucket[…])) does. A series whose count fell
// is a reset: its buckets count from 0.
func bucketIncrease(before, after snapshot, name string) map[float64]float64 {
	// A reset is judged per series (the labels without le) on its count.
	resetSeries := map[string]bool{}
	prevCount := map[string]float64{}
	for _, s := range before[name+"_count"] {
		prevCount[seriesKey(s.labels)] = s.value
	}
	for _, s := range after[name+"_count"] {
		if p, ok := prevCount[seriesKey(s.labels)]; ok && s.value < p {
			resetSeries[seriesKey(s.labels)] = true
		}
	}
	prev := map[string]float64{}
	for _, s := range before[name+"_bucket"] {
		prev[seriesKey(s.labels)] = s.value
	}
	out := map[float64]float64{}
	for _, s := range after[name+"_bucket"] {
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err != nil {
			continue
		}
		series := seriesKey(withoutLabel(s.labels, "le"))
		p, ok := prev[seriesKey(s.labels)]
		switch {
		case !ok || resetSeries[series] || s.value < p:
			out[le] += s.value
		default:
			out[le] += s.value - p
		}
	}
	return out
}

func withoutLabel(labels map[string]string, k string) map[string]string {
	out := make(map[string]string, len(labels))
	for a, b := range labels {
		if a != k {
			out[a] = b
		}
	}
	return out
}

// histogramQuantile is Prometheus' histogram_quantile(q, …) over
// cumulative buckets (by upper bound): the rank q × the +Inf bucket's
// count is found in its bucket and interpolated linearly within it (the
// first bucket's lower bound is 0 unless its upper bound is not
// positive); a rank in the +Inf bucket gives the highest finite upper
// bound. NaN when there is no observation or no +Inf bucket.
func histogramQuantile(q float64, byLe map[float64]float64) float64 {
	if len(byLe) == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	bs := make([]bucket, 0, len(byLe))
	for le, c := range byLe {
		bs = append(bs, bucket{le, c})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].upper < bs[j].upper })
	if !math.IsInf(bs[len(bs)-1].upper, 1) || len(bs) < 2 {
		return math.NaN()
	}
	// Cumulative counts must not fall (sums of increases over series can
	// be off by a scrape's skew): as Prometheus' ensureMonotonic.
	for i := 1; i < len(bs); i++ {
		bs[i].count = math.Max(bs[i].count, bs[i-1].count)
	}
	total := bs[len(bs)-1].count
	if total == 0 {
		return math.NaN()
	}
	switch {
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(1)
	}
	rank := q * total
	b := sort.Search(len(bs)-1, func(i int) bool { return bs[i].count >= rank })
	if b == len(bs)-1 {
		return bs[len(bs)-2].upper
	}
	if b == 0 && bs[0].upper <= 0 {
		return bs[0].upper
	}
	start, end, count := 0.0, bs[b].upper, bs[b].count
	if b > 0 {
		start = bs[b-1].upper
		count -= bs[b-1].count
		rank -= bs[b-1].count
	}
	return start + (end-start)*(rank/count)
}

// sideFigures are what one side's pods did during an interval.
type sideFigures struct {
	// http5xx and failedFinishes are the two counts of failed requests
	// (see failedRequests).
	requests, http5xx, failedFinishes, preemptions float64
	ttft, e2e                                      map[float64]float64
	kvMax                                          float64
	hasKV                                          bool
}

// inference is whether an http_requests_total series is an inference
// request: an OpenAI endpoint other than the model list.
func inference(labels map[string]string) bool {
	h := labels["handler"]
	return strings.HasPrefix(h, "/v1/") && h != "/v1/models"
}

// figures adds one pod's interval to f.
func (f *sideFigures) add(before, after snapshot) {
	f.requests += increase(before, after, metricHTTPRequests, inference)
	f.http5xx += increase(before, after, metricHTTPRequests, func(l map[string]string) bool {
		return inference(l) && strings.HasPrefix(l["status"], "5")
	})
	f.failedFinishes += increase(before, after, metricSuccess, func(l map[string]string) bool {
		r := l["finished_reason"]
		return r == "error" || r == "abort"
	})
	f.preemptions += increase(before, after, metricPreemptions, nil)
	if f.ttft == nil {
		f.ttft, f.e2e = map[float64]float64{}, map[float64]float64{}
	}
	for le, c := range bucketIncrease(before, after, metricTTFT) {
		f.ttft[le] += c
	}
	for le, c := range bucketIncrease(before, after, metricE2E) {
		f.e2e[le] += c
	}
	for _, s := range after[metricKVUsage] {
		if !f.hasKV || s.value > f.kvMax {
			f.kvMax, f.hasKV = s.value, true
		}
	}
}

// failedRequests is a side's failed requests from its two counts: the
// inference requests answered 5xx, and the requests vLLM finished with
// reason error or abort. One failure the engine reports is often both (a
// request the engine fails is finished "abort" and answered 500), and a
// client's abort is only the second: the larger count, not their sum,
// which would count an engine failure twice.
func failedRequests(http5xx, failedFinishes float64) float64 {
	return max(http5xx, failedFinishes)
}

// sideValues are one side's figures over an interval, however a provider
// obtained them (NaN: none).
type sideValues struct {
	requests, errors, preemptions float64
	ttftP95, e2eP95               float64
	kv                            float64 // NaN: no gauge
}

// values computes a side's figures from what its pods did.
func (f *sideFigures) values() sideValues {
	v := sideValues{requests: f.requests, errors: failedRequests(f.http5xx, f.failedFinishes), preemptions: f.preemptions,
		ttftP95: histogramQuantile(0.95, f.ttft), e2eP95: histogramQuantile(0.95, f.e2e), kv: math.NaN()}
	if f.hasKV {
		v.kv = f.kvMax
	}
	return v
}

// presetSample computes a preset's sample from both sides' figures.
// baseline says whether there is a stable side.
func presetSample(preset string, c, s sideValues, baseline bool, minRequests int) Sample {
	out := Sample{CanaryRequests: c.requests}
	if baseline {
		out.StableRequests = s.requests
	}
	ratio := func(num, den float64) *float64 {
		if den <= 0 || math.IsNaN(num) || math.IsNaN(den) {
			return nil
		}
		v := num / den
		return &v
	}
	num := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	switch preset {
	case PresetErrorRatio:
		out.Canary = ratio(c.errors, c.requests)
		if baseline {
			out.Stable = ratio(s.errors, s.requests)
		}
		out.Value = out.Canary
	case PresetTTFTP95Ratio, PresetE2ELatencyP95Ratio:
		cv, sv := c.ttftP95, s.ttftP95
		if preset == PresetE2ELatencyP95Ratio {
			cv, sv = c.e2eP95, s.e2eP95
		}
		out.Canary, out.Stable = num(cv), num(sv)
		if out.Canary != nil && out.Stable != nil {
			out.Value = ratio(*out.Canary, *out.Stable)
		}
	case PresetPreemptionRate:
		out.Canary = ratio(c.preemptions, c.requests)
		if baseline {
			out.Stable = ratio(s.preemptions, s.requests)
		}
		out.Value = out.Canary
	case PresetKVCacheUsage:
		out.Canary = num(c.kv)
		if baseline {
			out.Stable = num(s.kv)
		}
		out.Value = out.Canary
	}
	switch {
	case c.requests < float64(minRequests) || math.IsNaN(c.requests):
		out.Inconclusive = fmt.Sprintf("the canary pods finished %s request(s), fewer than minRequests %d", formatFloat(c.requests), minRequests)
	case baseline && (s.requests < float64(minRequests) || math.IsNaN(s.requests)):
		out.Inconclusive = fmt.Sprintf("the stable pods finished %s request(s), fewer than minRequests %d", formatFloat(s.requests), minRequests)
	case out.Value == nil:
		out.Inconclusive = "no data to compute " + preset + " from"
	}
	return out
}

// Scraper is the scrape provider: it reads every canary and stable pod's
// /metrics (through the API server's port-forward: no Prometheus needed)
// at the start and at the end of every interval and computes the presets
// from what the counters and histograms gained in between, summed per
// side.
type Scraper struct {
	targets     Targets
	client      ClientFunc
	timeout     time.Duration
	minRequests int

	mu   sync.Mutex
	last map[string]snapshot // by pod
}

// NewScraper returns the scrape provider of targets; timeout bounds each
// scrape.
func NewScraper(targets Targets, client ClientFunc, timeout time.Duration, minRequests int) *Scraper {
	return &Scraper{targets: targets, client: client, timeout: timeout, minRequests: minRequests, last: map[string]snapshot{}}
}

// Name is "scrape".
func (s *Scraper) Name() string { return ProviderScrape }

// Start scrapes every pod once: what the first measurement counts from.
func (s *Scraper) Start(ctx context.Context) error {
	snaps, err := s.scrapeAll(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	for pod, snap := range snaps {
		s.last[pod] = snap
	}
	return err
}

// Measure scrapes every pod and computes the checks (presets only) over
// what changed since the previous scrape. When a scrape fails nothing is
// kept of this round (the next measurement spans both intervals, as a
// rate over a missed scrape does), except a first scrape of a pod that
// had none.
func (s *Scraper) Measure(ctx context.Context, checks []Check) ([]Sample, error) {
	snaps, err := s.scrapeAll(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	for _, t := range append(append([]Target{}, s.targets.Canary...), s.targets.Stable...) {
		if _, ok := s.last[t.Pod]; !ok {
			missing = append(missing, t.Pod)
			if snap, ok := snaps[t.Pod]; ok {
				s.last[t.Pod] = snap
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no earlier scrape of pod(s) %s to measure from (taken now)", strings.Join(missing, ", "))
	}
	var canary, stable sideFigures
	for _, t := range s.targets.Canary {
		canary.add(s.last[t.Pod], snaps[t.Pod])
	}
	for _, t := range s.targets.Stable {
		stable.add(s.last[t.Pod], snaps[t.Pod])
	}
	for pod, snap := range snaps {
		s.last[pod] = snap
	}
	out := make([]Sample, len(checks))
	for i, ch := range checks {
		if ch.Preset == "" {
			out[i] = Sample{Inconclusive: "the scrape provider computes presets only"}
			continue
		}
		out[i] = presetSample(ch.Preset, canary.values(), stable.values(), len(s.targets.Stable) > 0, s.minRequests)
	}
	return out, nil
}

// scrapeAll scrapes every pod, a few at a time; the snapshots it got are
// returned with the first error.
func (s *Scraper) scrapeAll(ctx context.Context) (map[string]snapshot, error) {
	all := append(append([]Target{}, s.targets.Canary...), s.targets.Stable...)
	var mu sync.Mutex
	out := map[string]snapshot{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(scrapeConcurrency)
	for _, t := range all {
		g.Go(func() error {
			snap, err := s.scrape(gctx, t)
			if err != nil {
				return err
			}
			mu.Lock()
			out[t.Pod] = snap
			mu.Unlock()
			return nil
		})
	}
	return out, g.Wait()
}

// scrape reads one pod's /metrics.
func (s *Scraper) scrape(ctx context.Context, t Target) (snapshot, error) {
	client, done := s.client(t.Pod, t.Port, s.timeout)
	defer done()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+t.Pod+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("scrape pod %s/%s: %w", s.targets.Namespace, t.Pod, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape pod %s/%s: %w", s.targets.Namespace, t.Pod, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape pod %s/%s: /metrics answered %s", s.targets.Namespace, t.Pod, resp.Status)
	}
	body, err := readCapped(resp.Body, maxMetricsBytes)
	if err != nil {
		return nil, fmt.Errorf("scrape pod %s/%s: read /metrics: %w", s.targets.Namespace, t.Pod, err)
	}
	snap, err := parseMetrics(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("scrape pod %s/%s: parse /metrics: %w", s.targets.Namespace, t.Pod, err)
	}
	return snap, nil
}
