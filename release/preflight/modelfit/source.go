package modelfit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vllmctl/vllmctl/charts"
)

// DefaultEndpoint is the Hugging Face Hub, when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Bounds of a Hub request: a host that does not answer costs at most
// dialTimeout, one model's requests (config and index) at most
// DefaultTimeout together; a config.json
// larger than maxConfigBytes or an index larger than maxIndexBytes is not
// read.
const (
	DefaultTimeout = 10 * time.Second
	dialTimeout    = 3 * time.Second
	maxConfigBytes = 1 << 20
	maxIndexBytes  = 32 << 20
	maxIndexTotal  = 1e15
)

// Source says where a model's config.json is read from: File
// (--model-config) first, then a local directory named by the model, then
// the Hub.
type Source struct {
	// File is --model-config: a config.json used for every vLLM server of
	// the release ("" when not given).
	File string
	// Endpoint is HF_ENDPOINT ("" : DefaultEndpoint); Token is HF_TOKEN,
	// sent as a bearer token and never printed.
	Endpoint string
	Token    string
	// Client, when set, makes the Hub requests (tests); nil: a client with
	// Timeout and a short connect timeout.
	Client *http.Client
	// Timeout bounds one model's Hub requests together (0:
	// DefaultTimeout).
	Timeout time.Duration
	// Memo, when set, keeps each model's config as first loaded, for
	// every check that shares it: a fleet's targets serving one model
	// read it from the Hub once. nil: each check reads its own.
	Memo *Memo
}

// Memo keeps loaded configs by model and revision, safe for concurrent
// use; a concurrent load of the same model waits for the first.
type Memo struct {
	mu      sync.Mutex
	entries map[string]*memoEntry
}

type memoEntry struct {
	once sync.Once
	l    *Loaded
	err  error
}

// NewMemo is an empty Memo.
func NewMemo() *Memo { return &Memo{entries: map[string]*memoEntry{}} }

// load is s.load(ctx, model, revision) once per key of m; a load the
// context ended is not kept.
func (m *Memo) load(ctx context.Context, s Source, model, revision string) (*Loaded, error) {
	key := model + "@" + revision
	m.mu.Lock()
	e := m.entries[key]
	if e == nil {
		e = &memoEntry{}
		m.entries[key] = e
	}
	m.mu.Unlock()
	e.once.Do(func() { e.l, e.err = s.load(ctx, model, revision) })
	if e.err != nil && ctx.Err() != nil {
		m.mu.Lock()
		if m.entries[key] == e {
			delete(m.entries, key)
		}
		m.mu.Unlock()
	}
	return e.l, e.err
}

// Configured reports whether s names anywhere to read configs from: a
// file or a Hub endpoint. The zero Source is not configured: an
// operation given one runs no model-fit check.
func (s Source) Configured() bool { return s.File != "" || s.Endpoint != "" }

// Loaded is a model's config as read, with its checkpoint index's total
// size when one was found (0 when not).
type Loaded struct {
	Config *Config
	// IndexBytes is metadata.total_size of model.safetensors.index.json.
	IndexBytes int64
	// From says where the config was read: "--model-config FILE", "local
	// directory DIR", "https://.../config.json".
	From string
}

// SkipError says why a model's config could not be read: the check is
// skipped with this line, it is not an error of the deploy.
type SkipError struct {
	Reason string
	Err    error
}

func (e *SkipError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *SkipError) Unwrap() error { return e.Err }

// repoIDPattern is a Hub repository id: "org/name" or a legacy "name".
var repoIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$`)

// Load reads model's config.json (at revision, "" : main), through
// s.Memo when set. A config that cannot be read is a *SkipError.
func (s Source) Load(ctx context.Context, model, revision string) (*Loaded, error) {
	if s.Memo != nil {
		return s.Memo.load(ctx, s, model, revision)
	}
	return s.load(ctx, model, revision)
}

func (s Source) load(ctx context.Context, model, revision string) (*Loaded, error) {
	if s.File != "" {
		c, err := ReadConfigFile(s.File)
		if err != nil {
			return nil, &SkipError{Reason: "--model-config " + s.File, Err: err}
		}
		l := &Loaded{Config: c, From: "--model-config " + s.File}
		l.IndexBytes = localIndex(filepath.Join(filepath.Dir(s.File), "model.safetensors.index.json"))
		return l, nil
	}
	if model == "" {
		return nil, &SkipError{Reason: "no --model in the container's command line"}
	}
	if st, err := os.Stat(model); err == nil && st.IsDir() {
		c, err := ReadConfigFile(filepath.Join(model, "config.json"))
		if err != nil {
			return nil, &SkipError{Reason: "local directory " + model + " has no usable config.json", Err: err}
		}
		return &Loaded{Config: c, From: "local directory " + model,
			IndexBytes: localIndex(filepath.Join(model, "model.safetensors.index.json"))}, nil
	}
	if strings.HasPrefix(model, "/") || strings.HasPrefix(model, ".") || !repoIDPattern.MatchString(model) {
		return nil, &SkipError{Reason: fmt.Sprintf("model %s is a path inside the container (a volume or PVC), not readable here: give its config.json with --model-config", model)}
	}
	return s.hub(ctx, model, revision)
}

// hub reads config.json and, best effort, the checkpoint index from the
// Hub's resolve API.
func (s Source) hub(ctx context.Context, repo, revision string) (*Loaded, error) {
	if revision == "" {
		revision = "main"
	}
	endpoint := strings.TrimRight(s.Endpoint, "/")
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	client := s.Client
	if client == nil {
		client = newClient()
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// One model's requests (config and index) share one deadline: a Hub
	// that answers the first and hangs on the second costs timeout, not
	// twice it, on every deploy.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := fmt.Sprintf("%s/%s/resolve/%s/config.json", endpoint, repo, url.PathEscape(revision))
	shown := redactedURL(endpoint)
	data, err := s.get(ctx, client, u, maxConfigBytes)
	if err != nil {
		return nil, &SkipError{Reason: fmt.Sprintf("config.json of %s not read from %s", repo, shown), Err: err}
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, &SkipError{Reason: fmt.Sprintf("config.json of %s from %s", repo, shown), Err: err}
	}
	l := &Loaded{Config: c, From: redactedURL(u)}
	idx := fmt.Sprintf("%s/%s/resolve/%s/model.safetensors.index.json", endpoint, repo, url.PathEscape(revision))
	if data, err := s.get(ctx, client, idx, maxIndexBytes); err == nil {
		l.IndexBytes = indexTotal(data)
	}
	return l, nil
}

// HTTPStatusError is a Hub answer other than 200.
type HTTPStatusError struct {
	Status int
}

func (e *HTTPStatusError) Error() string {
	switch e.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Sprintf("HTTP %d: a gated or private repository (HF_TOKEN missing, or it cannot read it)", e.Status)
	case http.StatusNotFound:
		return "HTTP 404: no such repository, revision or file"
	}
	return fmt.Sprintf("HTTP %d", e.Status)
}

// redactedURL is u with the user information of its authority (an
// HF_ENDPOINT of https://user:secret@host) replaced by "xxxxx", whether u
// parses or not.
func redactedURL(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return u
	}
	rest := u[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		return u[:i+3] + "xxxxx" + rest[at:]
	}
	return u
}

// get fetches u, at most limit bytes. Errors name the URL only, its
// password redacted: the token is in a header and never in an error.
func (s Source) get(ctx context.Context, client *http.Client, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	u = redactedURL(u)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			// url.Error quotes the URL, password and all.
			err = uerr.Err
		}
		return nil, fmt.Errorf("request %s: %w", u, err)
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			// url.Error repeats the URL; keep the cause.
			err = uerr.Err
		}
		return nil, fmt.Errorf("GET %s: %w", u, &netError{err: err})
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &HTTPStatusError{Status: resp.StatusCode}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("GET %s: larger than %d bytes", u, limit)
	}
	return data, nil
}

// netError says in a stable phrase why the Hub could not be reached (no
// resolver address, no local port), the cause kept for errors.Is/As.
type netError struct{ err error }

func (e *netError) Unwrap() error { return e.err }

func (e *netError) Error() string {
	var dns *net.DNSError
	switch {
	case errors.As(e.err, &dns):
		return fmt.Sprintf("host %s not found (no network, or HF_ENDPOINT is wrong)", dns.Name)
	case errors.Is(e.err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(e.err, context.DeadlineExceeded):
		return "no answer in time"
	}
	return e.err.Error()
}

// newClient is an HTTP client that gives up connecting after dialTimeout
// (an offline machine or a blocked egress costs seconds, not minutes).
func newClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = dialTimeout
	tr.ResponseHeaderTimeout = DefaultTimeout
	return &http.Client{Transport: tr}
}

// ReadConfigFile reads and parses a config.json file (--model-config, a
// local model directory's): a regular file of at most 1 MiB.
func ReadConfigFile(path string) (*Config, error) {
	data, err := readCapped(path, maxConfigBytes)
	if err != nil {
		return nil, err
	}
	return ParseConfig(data)
}

// readCapped reads a regular file (not a directory, device or FIFO, whose
// open or read may never end) of at most limit bytes
// (charts.ReadFileCapped), naming it in the error.
func readCapped(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := charts.ReadFileCapped(path, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// localIndex is the total size of a local checkpoint index, 0 when none.
func localIndex(path string) int64 {
	data, err := readCapped(path, maxIndexBytes)
	if err != nil {
		return 0
	}
	return indexTotal(data)
}

// indexTotal reads metadata.total_size of a safetensors index.
func indexTotal(data []byte) int64 {
	var idx struct {
		Metadata struct {
			TotalSize json.Number `json:"total_size"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return 0
	}
	// A size above maxIndexTotal (a petabyte) is not a checkpoint's: it
	// is ignored rather than refusing every GPU.
	if f, err := idx.Metadata.TotalSize.Float64(); err == nil && f > 0 && f <= maxIndexTotal {
		return int64(f)
	}
	return 0
}
