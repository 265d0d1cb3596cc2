package analysis

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// fakeProm answers /api/v1/query: the first rule (in order) whose every
// substring is in the query gives the answer's result (JSON), else an empty vector.
type fakeProm struct {
	mu      sync.Mutex
	queries []string
	auth    []string
	rules   []promRule
	srv     *httptest.Server
}

type promRule struct {
	has    []string
	result string
	status int
}

func newFakeProm(t *testing.T, rules ...promRule) *fakeProm {
	f := &fakeProm{rules: rules}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, r.ParseForm())
		q := r.PostForm.Get("query")
		f.mu.Lock()
		f.queries = append(f.queries, q)
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		for _, rule := range f.rules {
			match := true
			for _, h := range rule.has {
				match = match && strings.Contains(q, h)
			}
			if !match {
				continue
			}
			if rule.status != 0 {
				w.WriteHeader(rule.status)
				_, _ = w.Write([]byte(`{"status":"error","errorType":"bad_data","error":"parse error at char 5"}`))
				return
			}
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":` + rule.result + `}}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[]}}`))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func vec(values ...string) string {
	var parts []string
	for i, v := range values {
		parts = append(parts, `{"metric":{"i":"`+string(rune('a'+i))+`"},"value":[1700000000,"`+v+`"]}`)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestPrometheusPresets(t *testing.T) {
	canary, stable := `pod=~"c1"`, `pod=~"s1|s2\\.x"`
	prom := newFakeProm(t,
		promRule{has: []string{canary, `status=~"5.."`}, result: vec("10")},
		promRule{has: []string{stable, `status=~"5.."`}, result: vec("2")},
		promRule{has: []string{canary, "sum(increase(http_requests_total{", "[30s]"}, result: vec("100")},
		promRule{has: []string{stable, "sum(increase(http_requests_total{", "[30s]"}, result: vec("200")},
		promRule{has: []string{canary, "vllm:time_to_first_token_seconds_bucket"}, result: vec("0.3")},
		promRule{has: []string{stable, "vllm:time_to_first_token_seconds_bucket"}, result: vec("0.1")},
	)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret\n"), 0o600))
	targets := Targets{Namespace: "ns", Canary: []Target{{"c1", 8000}}, Stable: []Target{{"s1", 8000}, {"s2.x", 8000}}}
	p, err := NewPrometheus(PrometheusEndpoint{URL: prom.srv.URL + "/", TokenFile: token}, targets, 30*time.Second, 20, testingclock.NewFakeClock(time.Now()))
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background()))
	got, err := p.Measure(context.Background(), []Check{
		{Name: PresetErrorRatio, Preset: PresetErrorRatio, Max: 0.05},
		{Name: PresetTTFTP95Ratio, Preset: PresetTTFTP95Ratio, Max: 2, Baseline: true},
		{Name: PresetKVCacheUsage, Preset: PresetKVCacheUsage, Max: 0.9},
	})
	require.NoError(t, err)
	require.NotNil(t, got[0].Value)
	assert.InDelta(t, 0.1, *got[0].Value, 1e-12)
	assert.InDelta(t, 0.01, *got[0].Stable, 1e-12)
	assert.Equal(t, 100.0, got[0].CanaryRequests)
	assert.Equal(t, 200.0, got[0].StableRequests)
	assert.InDelta(t, 3, *got[1].Value, 1e-12)
	assert.Equal(t, "no data to compute kvCacheUsage from", got[2].Inconclusive, "no series: no data, not 0")
	for _, a := range prom.auth {
		assert.Equal(t, "Bearer s3cret", a)
	}
	assert.Contains(t, strings.Join(prom.queries, "\n"), `namespace="ns",pod=~"c1",handler=~"/v1/.+",handler!="/v1/models"`)
}

// TestPrometheusQueriesOnlyWhatThePresetsNeed: a measurement queries, per
// side, the requests and the figures of the presets chosen, not every
// preset's PromQL.
func TestPrometheusQueriesOnlyWhatThePresetsNeed(t *testing.T) {
	prom := newFakeProm(t,
		promRule{has: []string{"sum(increase(http_requests_total{", `status=~"5.."`}, result: vec("1")},
		promRule{has: []string{"sum(increase(http_requests_total{"}, result: vec("100")},
	)
	targets := Targets{Namespace: "ns", Canary: []Target{{"c1", 8000}}, Stable: []Target{{"s1", 8000}}}
	p, err := NewPrometheus(PrometheusEndpoint{URL: prom.srv.URL}, targets, 30*time.Second, 10, testingclock.NewFakeClock(time.Now()))
	require.NoError(t, err)
	got, err := p.Measure(context.Background(), []Check{{Name: PresetErrorRatio, Preset: PresetErrorRatio, Max: 0.05}})
	require.NoError(t, err)
	require.NotNil(t, got[0].Value)
	assert.InDelta(t, 0.01, *got[0].Value, 1e-12)
	assert.InDelta(t, 0.01, *got[0].Stable, 1e-12)
	assert.Len(t, prom.queries, 4, "requests and errors of each side: %v", prom.queries)
	for _, q := range prom.queries {
		assert.NotContains(t, q, "vllm:time_to_first_token_seconds_bucket")
		assert.NotContains(t, q, "vllm:kv_cache_usage_perc")
	}
}

func TestPrometheusCustomMetrics(t *testing.T) {
	prom := newFakeProm(t,
		promRule{has: []string{`namespace="ns"`, `pod=~"c1|c2"`, `stable=~"s1"`}, result: vec("0.5", "0.7")},
		promRule{has: []string{"bad("}, status: http.StatusBadRequest},
	)
	targets := Targets{Namespace: "ns", Canary: []Target{{"c1", 8000}, {"c2", 8000}}, Stable: []Target{{"s1", 8000}}}
	p, err := NewPrometheus(PrometheusEndpoint{URL: prom.srv.URL}, targets, time.Minute, 0, testingclock.NewFakeClock(time.Now()))
	require.NoError(t, err)
	got, err := p.Measure(context.Background(), []Check{
		{Name: "m", Query: `x{namespace="{{namespace}}", pod=~"{{ canaryPods }}", stable=~"{{stablePods}}"}`, SuccessCondition: "result[0] < 1"},
		{Name: "empty", Query: `absent_series`, SuccessCondition: "result[0] < 1"},
	})
	require.NoError(t, err)
	assert.Equal(t, []float64{0.5, 0.7}, got[0].Result)
	assert.Equal(t, 0.5, *got[0].Value)
	assert.Equal(t, "the query returned no data", got[1].Inconclusive)

	_, err = p.Measure(context.Background(), []Check{{Name: "b", Query: "bad(", SuccessCondition: "true"}})
	require.ErrorContains(t, err, "400 Bad Request")
	require.ErrorContains(t, err, "bad_data parse error at char 5")

	prom.srv.Close()
	require.Error(t, p.Start(context.Background()), "Prometheus down")
}

func TestPrometheusEndpointCheck(t *testing.T) {
	assert.NoError(t, (&PrometheusEndpoint{URL: "https://prom.example:9090/prefix"}).Check())
	for _, e := range []PrometheusEndpoint{
		{URL: "prom:9090"},
		{URL: "ftp://prom"},
		{URL: "http://prom", TokenFile: "/no/such/token"},
		{URL: "http://prom", CAFile: "/no/such/ca"},
	} {
		err := e.Check()
		require.Error(t, err, "%+v", e)
		var ie *InputError
		assert.ErrorAs(t, err, &ie)
	}
	notPEM := filepath.Join(t.TempDir(), "ca")
	require.NoError(t, os.WriteFile(notPEM, []byte("nope"), 0o600))
	require.ErrorContains(t, (&PrometheusEndpoint{URL: "http://prom", CAFile: notPEM}).Check(), "no PEM certificate")
}

// TestPrometheusEndpointFilesCapped: the token and CA files are read
// capped: a huge or endless one, a directory or an empty token is exit
// code 2, and a token file grown huge later fails the query, not the
// process.
func TestPrometheusEndpointFilesCapped(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge")
	require.NoError(t, os.WriteFile(huge, bytes.Repeat([]byte("a"), maxCAFileBytes+1), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	cases := []PrometheusEndpoint{
		{URL: "http://prom", TokenFile: huge},
		{URL: "http://prom", TokenFile: dir},
		{URL: "http://prom", TokenFile: empty},
		{URL: "http://prom", CAFile: huge},
		{URL: "http://prom", CAFile: dir},
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		cases = append(cases, PrometheusEndpoint{URL: "http://prom", TokenFile: "/dev/zero"}, PrometheusEndpoint{URL: "http://prom", CAFile: "/dev/zero"})
	}
	for _, e := range cases {
		err := e.Check()
		var ie *InputError
		require.ErrorAs(t, err, &ie, "%+v", e)
		assert.Equal(t, exitcode.Invalid, ie.ExitCode())
	}

	prom := newFakeProm(t)
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("s3cret"), 0o600))
	p, err := NewPrometheus(PrometheusEndpoint{URL: prom.srv.URL, TokenFile: token}, Targets{Namespace: "ns"}, time.Minute, 0, testingclock.NewFakeClock(time.Now()))
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background()))
	require.NoError(t, os.WriteFile(token, bytes.Repeat([]byte("a"), maxTokenFileBytes+1), 0o600))
	require.ErrorContains(t, p.Start(context.Background()), "larger than the cap")
}

// TestPrometheusLearnsItsToken: the bearer token is learnt (the engine's
// redactor) at every read, so that an answer echoing it is redacted; a
// rotated token is learnt too.
func TestPrometheusLearnsItsToken(t *testing.T) {
	prom := newFakeProm(t)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("first-token-value\n"), 0o600))
	p, err := NewPrometheus(PrometheusEndpoint{URL: prom.srv.URL, TokenFile: token}, Targets{Namespace: "ns"}, time.Minute, 0, testingclock.NewFakeClock(time.Now()))
	require.NoError(t, err)
	var learnt []string
	p.LearnSecret = func(v ...string) { learnt = append(learnt, v...) }
	require.NoError(t, p.Start(context.Background()))
	require.NoError(t, os.WriteFile(token, []byte("rotated-token-value"), 0o600))
	require.NoError(t, p.Start(context.Background()))
	assert.Equal(t, []string{"first-token-value", "rotated-token-value"}, learnt)
}

// TestPrometheusBasicAuth: with --prometheus-username and
// --prometheus-password-file every query carries basic auth, read from
// the file at every query (a changed Secret is used at once); a server
// that refuses the credentials is a measurement error that names its
// answer, never the password; the password (and the header's encoding of
// it) is learnt by the redactor.
func TestPrometheusBasicAuth(t *testing.T) {
	const user, good = "vllmctl", "pa:ss w0rd"
	var mu sync.Mutex
	var refused int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != good {
			mu.Lock()
			refused++
			mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="prometheus"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":` + vec("1") + `}}`))
	}))
	t.Cleanup(srv.Close)
	pwFile := filepath.Join(t.TempDir(), "password")
	for _, tc := range []struct {
		name, user, password string
		ok                   bool
	}{
		{"right credentials", user, good + "\n", true},
		{"right credentials, no line break", user, good, true},
		{"wrong password", user, "wrong-password", false},
		{"wrong user", "someone", good, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(pwFile, []byte(tc.password), 0o600))
			e := PrometheusEndpoint{URL: srv.URL, Username: tc.user, PasswordFile: pwFile}
			require.NoError(t, e.Check())
			p, err := NewPrometheus(e, Targets{Namespace: "ns", Canary: []Target{{"c1", 8000}}}, time.Minute, 0, testingclock.NewFakeClock(time.Now()))
			require.NoError(t, err)
			var learnt []string
			p.LearnSecret = func(v ...string) { learnt = append(learnt, v...) }
			err = p.Start(context.Background())
			if tc.ok {
				require.NoError(t, err)
				got, err := p.Measure(context.Background(), []Check{{Name: PresetKVCacheUsage, Preset: PresetKVCacheUsage, Max: 0.9}})
				require.NoError(t, err)
				require.NotNil(t, got[0].Value)
				assert.Equal(t, 1.0, *got[0].Value)
				assert.Contains(t, learnt, good)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "401 Unauthorized")
			assert.NotContains(t, err.Error(), strings.TrimSpace(tc.password))
			assert.Contains(t, learnt, strings.TrimSpace(tc.password), "learnt, so that an echo of it is redacted")
		})
	}
	assert.Equal(t, 2, refused, "the server saw the two wrong credentials, and refused nothing else")
}

// TestPrometheusEndpointBasicAuthCheck: basic auth needs both the user
// name and a readable, non-empty password file, excludes the bearer
// token, and the URL may not carry credentials of its own: each is an
// input error (exit code 2) naming the flag, never the password.
func TestPrometheusEndpointBasicAuthCheck(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "password")
	require.NoError(t, os.WriteFile(pw, []byte("secret-password\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	huge := filepath.Join(dir, "huge")
	require.NoError(t, os.WriteFile(huge, bytes.Repeat([]byte("a"), maxPasswordFileBytes+1), 0o600))
	assert.NoError(t, (&PrometheusEndpoint{URL: "http://prom", Username: "u", PasswordFile: pw}).Check())
	for _, tc := range []struct {
		e     PrometheusEndpoint
		field string
		want  string
	}{
		{PrometheusEndpoint{URL: "http://prom", Username: "u"}, "--prometheus-username", "needs --prometheus-password-file"},
		{PrometheusEndpoint{URL: "http://prom", PasswordFile: pw}, "--prometheus-password-file", "needs --prometheus-username"},
		{PrometheusEndpoint{URL: "http://prom", Username: "u", PasswordFile: pw, TokenFile: pw}, "--prometheus-password-file", "exclude each other"},
		{PrometheusEndpoint{URL: "http://prom", Username: "u:v", PasswordFile: pw}, "--prometheus-username", "no ':'"},
		{PrometheusEndpoint{URL: "http://prom", Username: "u", PasswordFile: empty}, "--prometheus-password-file", "the file is empty"},
		{PrometheusEndpoint{URL: "http://prom", Username: "u", PasswordFile: huge}, "--prometheus-password-file", "larger than the cap"},
		{PrometheusEndpoint{URL: "http://prom", Username: "u", PasswordFile: dir}, "--prometheus-password-file", dir},
		{PrometheusEndpoint{URL: "http://prom", Username: "u", PasswordFile: "/no/such/password"}, "--prometheus-password-file", "/no/such/password"},
		{PrometheusEndpoint{URL: "http://u:secret-password@prom"}, "--prometheus-url", "the URL holds credentials"},
	} {
		err := tc.e.Check()
		var ie *InputError
		require.ErrorAs(t, err, &ie, "%+v", tc.e)
		assert.Equal(t, exitcode.Invalid, ie.ExitCode())
		assert.Equal(t, tc.field, ie.Field)
		assert.Contains(t, err.Error(), tc.want)
		assert.NotContains(t, err.Error(), "secret-password")
	}
}
