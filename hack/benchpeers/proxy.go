// proxy.go holds the counting TLS reverse proxy in front of the API server.

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// ---------------------------------------------------------------------------
// The counting proxy.

// proxy is a TLS reverse proxy in front of the API server that counts the
// requests passing through it. The tools talk to it without credentials
// (their kubeconfig skips TLS verification of its self-signed certificate);
// it reaches the API server with the cluster kubeconfig's own client
// certificate (rest.TransportFor).
type proxy struct {
	addr     string
	server   *http.Server
	requests atomic.Int64
	watches  atomic.Int64
	// bytes counts the response bytes sent to the tools (bodies as the
	// API server encoded them: protobuf or JSON, and watch streams).
	bytes atomic.Int64
	mu    sync.Mutex
	byKey map[string]int
}

func startProxy(cfg *rest.Config) (*proxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("transport to the API server: %w", err)
	}
	// Upgrades (the port-forward of the serve check and of the analysis,
	// SPDY) need HTTP/1.1 to the API server: over the HTTP/2 connection
	// the transport would pick, Go refuses the Upgrade header.
	h1 := rest.CopyConfig(cfg)
	h1.NextProtos = []string{"http/1.1"}
	upgrades, err := rest.TransportFor(h1)
	if err != nil {
		return nil, fmt.Errorf("HTTP/1.1 transport to the API server: %w", err)
	}
	cert, err := selfSignedCert()
	if err != nil {
		return nil, err
	}
	p := &proxy{byKey: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del("Authorization")
		},
		Transport:     upgradeSplit{plain: transport, upgrades: upgrades},
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(os.Stderr, "proxy: ", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				progress("proxy: %s %s: %v", r.Method, r.URL.Path, err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.addr = ln.Addr().String()
	p.server = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.count(r)
			rp.ServeHTTP(&countingWriter{ResponseWriter: w, n: &p.bytes}, r)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		ErrorLog:  log.New(os.Stderr, "proxy: ", 0),
	}
	go func() { _ = p.server.ServeTLS(ln, "", "") }()
	return p, nil
}

// upgradeSplit sends requests that upgrade the connection over
// upgrades, the others over plain.
type upgradeSplit struct{ plain, upgrades http.RoundTripper }

func (u upgradeSplit) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Upgrade") != "" {
		return u.upgrades.RoundTrip(r)
	}
	return u.plain.RoundTrip(r)
}

// isWatch reports whether r starts a watch.
func isWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1" || strings.Contains(r.URL.Path, "/watch/")
}

var namespacePath = regexp.MustCompile(`/namespaces/[^/]+`)

func (p *proxy) count(r *http.Request) {
	p.requests.Add(1)
	key := r.Method + " " + namespacePath.ReplaceAllString(r.URL.Path, "/namespaces/NS")
	if isWatch(r) {
		p.watches.Add(1)
		key += " (watch)"
	}
	p.mu.Lock()
	p.byKey[key]++
	p.mu.Unlock()
}

// countingWriter counts the bytes of a response body. It keeps the
// streaming of watches: Flush is passed on (httputil.ReverseProxy flushes
// through http.NewResponseController, which finds it by Unwrap).
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// counts are the requests the proxy saw since the last reset.
type counts struct {
	requests, watches, bytes int64
	byKey                    map[string]int
}

func (p *proxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests.Store(0)
	p.watches.Store(0)
	p.bytes.Store(0)
	p.byKey = map[string]int{}
}

func (p *proxy) take() counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := counts{requests: p.requests.Load(), watches: p.watches.Load(), bytes: p.bytes.Load(), byKey: p.byKey}
	p.byKey = map[string]int{}
	return c
}

func selfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "benchpeers proxy"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
