package analysis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/vllmctl/vllmctl/charts"
)

// PrometheusEndpoint is where the prometheus provider queries:
// --prometheus-url, with a bearer token (--prometheus-token-file) or
// basic auth (--prometheus-username and --prometheus-password-file), and
// a CA bundle (--prometheus-ca-file).
type PrometheusEndpoint struct {
	URL       string
	TokenFile string
	// Username and PasswordFile are HTTP basic auth's: both or neither,
	// and not with TokenFile.
	Username     string
	PasswordFile string
	CAFile       string
}

// maxPrometheusAnswer bounds one query's answer.
const maxPrometheusAnswer = 8 << 20

// Caps of the endpoint's files: a bearer token (a service account's is
// about a kilobyte) and a CA bundle (the system's is about 200 KB).
const (
	maxTokenFileBytes = 64 << 10
	maxCAFileBytes    = 4 << 20
)

// maxPasswordFileBytes caps a basic-auth password file.
const maxPasswordFileBytes = 4 << 10

// Check checks the endpoint before anything is applied: an absolute http
// or https URL, and the files readable (exit code 2 otherwise).
func (e *PrometheusEndpoint) Check() error {
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &InputError{Field: "--prometheus-url", Msg: fmt.Sprintf("%q: want an http or https URL", e.URL)}
	}
	if u.User != nil {
		// Credentials in the URL would be printed wherever the URL is.
		return &InputError{Field: "--prometheus-url", Msg: "the URL holds credentials: use --prometheus-username and --prometheus-password-file"}
	}
	if e.TokenFile != "" {
		if _, err := e.token(); err != nil {
			return &InputError{Field: "--prometheus-token-file", Msg: err.Error()}
		}
	}
	switch {
	case e.Username == "" && e.PasswordFile != "":
		return &InputError{Field: "--prometheus-password-file", Msg: "needs --prometheus-username"}
	case e.Username != "" && e.PasswordFile == "":
		return &InputError{Field: "--prometheus-username", Msg: "needs --prometheus-password-file"}
	case e.PasswordFile != "" && e.TokenFile != "":
		return &InputError{Field: "--prometheus-password-file", Msg: "basic auth and --prometheus-token-file exclude each other"}
	case e.PasswordFile != "":
		if strings.ContainsRune(e.Username, ':') {
			return &InputError{Field: "--prometheus-username", Msg: "a basic-auth user name has no ':'"}
		}
		if _, err := e.password(); err != nil {
			return &InputError{Field: "--prometheus-password-file", Msg: err.Error()}
		}
	}
	if e.CAFile != "" {
		if _, err := e.caPool(); err != nil {
			return &InputError{Field: "--prometheus-ca-file", Msg: err.Error()}
		}
	}
	return nil
}

// token reads the bearer token file, capped (a huge or endless file is an
// error, not read whole).
func (e *PrometheusEndpoint) token() (string, error) {
	data, err := charts.ReadFileCapped(e.TokenFile, maxTokenFileBytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", e.TokenFile, err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("%s: the file is empty", e.TokenFile)
	}
	return tok, nil
}

// password reads the basic-auth password file, capped; one trailing line
// break (as an editor or `echo` leaves) is not part of the password.
func (e *PrometheusEndpoint) password() (string, error) {
	data, err := charts.ReadFileCapped(e.PasswordFile, maxPasswordFileBytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", e.PasswordFile, err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if pw == "" {
		return "", fmt.Errorf("%s: the file is empty", e.PasswordFile)
	}
	return pw, nil
}

// caPool reads the CA bundle, capped, into a pool.
func (e *PrometheusEndpoint) caPool() (*x509.CertPool, error) {
	pem, err := charts.ReadFileCapped(e.CAFile, maxCAFileBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.CAFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", e.CAFile)
	}
	return pool, nil
}

// Prometheus is the prometheus provider: every check is a query of the
// Prometheus HTTP API (/api/v1/query) at the end of each interval, over
// that interval. The presets are vLLM's PromQL (below) on the series of
// the canary and of the stable pods, selected by the labels namespace and
// pod (what Kubernetes service discovery's usual relabelling gives);
// custom metrics are the spec's queries with the placeholders filled in.
// Prometheus unreachable or refusing a query is a measurement error:
// consecutiveErrorLimit+1 of them in a row make the analysis
// inconclusive, and the policy decides.
type Prometheus struct {
	// LearnSecret, when set, learns the bearer token at every read (a
	// redactor's AddValues): an answer or a proxy's error page that echoes
	// it is then redacted wherever it is printed or recorded.
	LearnSecret func(...string)

	endpoint    PrometheusEndpoint
	client      *http.Client
	targets     Targets
	window      time.Duration
	minRequests int
	clk         clock.PassiveClock
}

// NewPrometheus returns the prometheus provider of targets; window is
// the analysis' interval (each query's range).
func NewPrometheus(e PrometheusEndpoint, targets Targets, window time.Duration, minRequests int, clk clock.PassiveClock) (*Prometheus, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if e.CAFile != "" {
		pool, err := e.caPool()
		if err != nil {
			return nil, fmt.Errorf("prometheus CA file %w", err)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &Prometheus{endpoint: e, client: &http.Client{Transport: tr, Timeout: ScrapeTimeout(window)}, targets: targets,
		window: window, minRequests: minRequests, clk: clk}, nil
}

// Name is "prometheus".
func (p *Prometheus) Name() string { return ProviderPrometheus }

// Start checks that Prometheus answers a query.
func (p *Prometheus) Start(ctx context.Context) error {
	_, err := p.query(ctx, "vector(1)")
	return err
}

// Measure runs every check's queries for the interval just ended.
func (p *Prometheus) Measure(ctx context.Context, checks []Check) ([]Sample, error) {
	out := make([]Sample, len(checks))
	sides := map[string]sideValues{}
	need := presetFigures(checks)
	side := func(name string, pods []Target) (sideValues, error) {
		if v, ok := sides[name]; ok {
			return v, nil
		}
		v, err := p.sideValues(ctx, pods, need)
		sides[name] = v
		return v, err
	}
	baseline := len(p.targets.Stable) > 0
	for i, ch := range checks {
		if ch.Preset == "" {
			vals, err := p.query(ctx, p.fill(ch.Query))
			if err != nil {
				return nil, err
			}
			out[i] = Sample{Result: vals}
			if len(vals) == 0 {
				out[i].Inconclusive = "the query returned no data"
				continue
			}
			v := vals[0]
			out[i].Value = &v
			continue
		}
		c, err := side("canary", p.targets.Canary)
		if err != nil {
			return nil, err
		}
		s := noValues()
		if baseline {
			if s, err = side("stable", p.targets.Stable); err != nil {
				return nil, err
			}
		}
		out[i] = presetSample(ch.Preset, c, s, baseline, p.minRequests)
	}
	return out, nil
}

// PresetQueries are the PromQL of a side's figures: sel is the label
// matchers of its pods, window the range.
func PresetQueries(sel, window string) map[string]string {
	inference := `handler=~"/v1/.+",handler!="/v1/models"`
	return map[string]string{
		"requests": fmt.Sprintf(`sum(increase(http_requests_total{%s,%s}[%s]))`, sel, inference, window),
		// The larger of the two counts of failed requests, as the scrape
		// provider takes it (failedRequests): (a >= b) or b.
		"errors": fmt.Sprintf(`((sum(increase(http_requests_total{%[1]s,%[2]s,status=~"5.."}[%[3]s])) or vector(0)) >= (sum(increase(vllm:request_success_total{%[1]s,finished_reason=~"error|abort"}[%[3]s])) or vector(0))) or (sum(increase(vllm:request_success_total{%[1]s,finished_reason=~"error|abort"}[%[3]s])) or vector(0))`,
			sel, inference, window),
		"preemptions": fmt.Sprintf(`sum(increase(vllm:num_preemptions_total{%s}[%s]))`, sel, window),
		"ttftP95":     fmt.Sprintf(`histogram_quantile(0.95, sum by (le) (increase(vllm:time_to_first_token_seconds_bucket{%s}[%s])))`, sel, window),
		"e2eP95":      fmt.Sprintf(`histogram_quantile(0.95, sum by (le) (increase(vllm:e2e_request_latency_seconds_bucket{%s}[%s])))`, sel, window),
		"kv":          fmt.Sprintf(`max(vllm:kv_cache_usage_perc{%s})`, sel),
	}
}

// noValues is a side with no figure (NaN: no data).
func noValues() sideValues {
	return sideValues{requests: math.NaN(), errors: math.NaN(), preemptions: math.NaN(), ttftP95: math.NaN(), e2eP95: math.NaN(), kv: math.NaN()}
}

// presetFigures are the figures (PresetQueries' keys) the presets among
// checks are computed from: the requests always (minRequests), and each
// preset's own.
func presetFigures(checks []Check) map[string]bool {
	need := map[string]bool{"requests": true}
	for _, ch := range checks {
		switch ch.Preset {
		case PresetErrorRatio:
			need["errors"] = true
		case PresetTTFTP95Ratio:
			need["ttftP95"] = true
		case PresetE2ELatencyP95Ratio:
			need["e2eP95"] = true
		case PresetPreemptionRate:
			need["preemptions"] = true
		case PresetKVCacheUsage:
			need["kv"] = true
		}
	}
	return need
}

// sideValues queries the figures of one side that need names (the others
// stay NaN: no data).
func (p *Prometheus) sideValues(ctx context.Context, pods []Target, need map[string]bool) (sideValues, error) {
	qs := PresetQueries(fmt.Sprintf(`namespace=%q,pod=~"%s"`, p.targets.Namespace, podRegexp(pods)), promDuration(p.window))
	v := noValues()
	for name, dst := range map[string]*float64{"requests": &v.requests, "errors": &v.errors, "preemptions": &v.preemptions,
		"ttftP95": &v.ttftP95, "e2eP95": &v.e2eP95, "kv": &v.kv} {
		if !need[name] {
			continue
		}
		vals, err := p.query(ctx, qs[name])
		if err != nil {
			return v, err
		}
		*dst = math.NaN()
		if len(vals) > 0 {
			*dst = vals[0]
		}
	}
	if math.IsNaN(v.requests) {
		v.requests = 0
	}
	return v, nil
}

// fill replaces a custom query's placeholders.
func (p *Prometheus) fill(q string) string {
	return placeholderRE.ReplaceAllStringFunc(q, func(m string) string {
		switch "{{" + strings.TrimSpace(strings.Trim(m, "{}")) + "}}" {
		case PlaceholderNamespace:
			return p.targets.Namespace
		case PlaceholderCanaryPods:
			return podRegexp(p.targets.Canary)
		case PlaceholderStablePods:
			return podRegexp(p.targets.Stable)
		}
		return m
	})
}

// podRegexp is the pods as a regular-expression alternation, escaped for
// a PromQL double-quoted string.
func podRegexp(pods []Target) string {
	names := make([]string, len(pods))
	for i, t := range pods {
		names[i] = strings.ReplaceAll(regexp.QuoteMeta(t.Pod), `\`, `\\`)
	}
	return strings.Join(names, "|")
}

// promDuration is d as a PromQL duration (whole seconds, at least 1s).
func promDuration(d time.Duration) string {
	return strconv.FormatInt(max(int64(d/time.Second), 1), 10) + "s"
}

// promAnswer is the Prometheus HTTP API's answer to a query.
type promAnswer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// query runs an instant query now and returns its values: a vector's,
// its series sorted by their labels, or a scalar's.
func (p *Prometheus) query(ctx context.Context, q string) ([]float64, error) {
	form := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(p.clk.Now().UnixMilli())/1000, 'f', 3, 64)}}
	u := strings.TrimRight(p.endpoint.URL, "/") + "/api/v1/query"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", p.endpoint.URL, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if p.endpoint.TokenFile != "" {
		// Read at every query: a projected token is rotated.
		tok, err := p.endpoint.token()
		if err != nil {
			return nil, fmt.Errorf("prometheus token file %w", err)
		}
		if p.LearnSecret != nil {
			p.LearnSecret(tok)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if p.endpoint.PasswordFile != "" {
		// Read at every query, as the token: a mounted Secret changes.
		pw, err := p.endpoint.password()
		if err != nil {
			return nil, fmt.Errorf("prometheus password file %w", err)
		}
		req.SetBasicAuth(p.endpoint.Username, pw)
		if p.LearnSecret != nil {
			// The password, and the header's encoding of it, which a
			// proxy's error page may echo.
			p.LearnSecret(pw, strings.TrimPrefix(req.Header.Get("Authorization"), "Basic "))
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", p.endpoint.URL, err)
	}
	defer resp.Body.Close()
	body, err := readCapped(resp.Body, maxPrometheusAnswer)
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: read the answer: %w", p.endpoint.URL, err)
	}
	var a promAnswer
	if err := json.Unmarshal(body, &a); err != nil || a.Status != "success" {
		msg := a.Error
		if msg == "" {
			msg = firstLine(strings.TrimSpace(string(body)))
			if len(msg) > 200 {
				msg = msg[:200]
			}
		}
		return nil, fmt.Errorf("prometheus %s answered %s to %q: %s %s", p.endpoint.URL, resp.Status, q, a.ErrorType, msg)
	}
	switch a.Data.ResultType {
	case "vector":
		var series []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(a.Data.Result, &series); err != nil {
			return nil, fmt.Errorf("prometheus %s: query %q: %w", p.endpoint.URL, q, err)
		}
		sort.Slice(series, func(i, j int) bool { return seriesKey(series[i].Metric) < seriesKey(series[j].Metric) })
		out := make([]float64, 0, len(series))
		for _, s := range series {
			if v, ok := sampleValue(s.Value); ok {
				out = append(out, v)
			}
		}
		return out, nil
	case "scalar":
		var s [2]any
		if err := json.Unmarshal(a.Data.Result, &s); err != nil {
			return nil, fmt.Errorf("prometheus %s: query %q: %w", p.endpoint.URL, q, err)
		}
		if v, ok := sampleValue(s); ok {
			return []float64{v}, nil
		}
		return nil, nil
	default:
		return nil, fmt.Errorf("prometheus %s: query %q gave a %s, want a vector or a scalar", p.endpoint.URL, q, a.Data.ResultType)
	}
}

// sampleValue is a [time, "value"] pair's value (NaN is no value).
func sampleValue(s [2]any) (float64, bool) {
	str, ok := s[1].(string)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(str, 64)
	if err != nil || math.IsNaN(v) {
		return 0, false
	}
	return v, true
}
