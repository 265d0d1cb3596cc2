package podhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// Forwarder opens HTTP clients to pods' ports through the API server.
type Forwarder struct {
	cfg    *rest.Config
	client kubernetes.Interface
}

// New returns a Forwarder over cfg (the caller's identity: it needs
// create on pods/portforward in the pod's namespace).
func New(cfg *rest.Config, client kubernetes.Interface) *Forwarder {
	return &Forwarder{cfg: cfg, client: client}
}

// Client returns an HTTP client whose every connection is a stream of the
// API server's port-forward to port of namespace/pod: a request to any
// host ("http://pod/v1/models") reaches the pod. Each connection opens
// its own port-forward session, closed with the connection; the
// transport keeps idle connections for reuse as any HTTP client does.
// timeout bounds each request (0: none; the request's context bounds it
// as well). CloseIdleConnections (or the returned close) ends the
// sessions kept idle.
func (f *Forwarder) Client(namespace, pod string, port int, timeout time.Duration) (*http.Client, func()) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return f.Dial(ctx, namespace, pod, port)
		},
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 0,
		DisableCompression:    true,
	}
	return &http.Client{Transport: tr, Timeout: timeout}, tr.CloseIdleConnections
}

// Dial opens one connection to port of namespace/pod through the API
// server's port-forward (SPDY, the protocol every kubelet serves).
func (f *Forwarder) Dial(ctx context.Context, namespace, pod string, port int) (net.Conn, error) {
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("port-forward to pod %s/%s: port %d out of range", namespace, pod, port)
	}
	req := f.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward")
	transport, upgrader, err := spdy.RoundTripperFor(f.cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s/%s: %w", namespace, pod, err)
	}
	type dialed struct {
		conn httpstream.Connection
		err  error
	}
	done := make(chan dialed, 1)
	go func() {
		c, err := negotiate(ctx, transport, upgrader, req.URL().String())
		done <- dialed{c, err}
	}()
	var conn httpstream.Connection
	select {
	case d := <-done:
		if d.err != nil {
			return nil, fmt.Errorf("port-forward to pod %s/%s: %w", namespace, pod, d.err)
		}
		conn = d.conn
	case <-ctx.Done():
		go func() {
			if d := <-done; d.conn != nil {
				d.conn.Close()
			}
		}()
		return nil, fmt.Errorf("port-forward to pod %s/%s: %w", namespace, pod, ctx.Err())
	}
	c, err := openStreams(conn, port)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("port-forward to pod %s/%s port %d: %w", namespace, pod, port, err)
	}
	c.addr = fmt.Sprintf("%s/%s:%d", namespace, pod, port)
	return c, nil
}

// negotiate upgrades a POST to url to a SPDY connection speaking the
// port-forward protocol, as spdy.Negotiate does, but an answer other than
// 101 Switching Protocols is the API server's error as a typed
// *apierrors.StatusError (a Forbidden port-forward is
// apierrors.IsForbidden), not text.
func negotiate(ctx context.Context, rt http.RoundTripper, upgrader spdy.Upgrader, url string) (httpstream.Connection, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Add(httpstream.HeaderProtocolVersion, portforward.PortForwardProtocolV1Name)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= http.StatusBadRequest {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var status metav1.Status
		if json.Unmarshal(body, &status) == nil && status.Kind == "Status" {
			return nil, &apierrors.StatusError{ErrStatus: status}
		}
		return nil, apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodPost, schema.GroupResource{Resource: "pods/portforward"}, "", strings.TrimSpace(string(body)), 0, false)
	}
	return upgrader.NewConnection(resp)
}

// openStreams opens the error and data streams of one forwarded
// connection, as kubectl's port-forward does for each local connection.
func openStreams(conn httpstream.Connection, port int) (*streamConn, error) {
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(port))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errorStream, err := conn.CreateStream(headers)
	if err != nil {
		return nil, fmt.Errorf("create error stream: %w", err)
	}
	errorStream.Close() // nothing is written to it
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		return nil, fmt.Errorf("create data stream: %w", err)
	}
	c := &streamConn{conn: conn, data: data, errDone: make(chan struct{})}
	go func() {
		defer close(c.errDone)
		msg, _ := io.ReadAll(errorStream)
		if s := strings.TrimSpace(string(msg)); s != "" {
			c.mu.Lock()
			c.err = errors.New(s)
			c.mu.Unlock()
			// The kubelet could not connect to the pod's port: end the
			// data stream so that a read waiting on it returns.
			_ = data.Reset()
		}
	}()
	return c, nil
}

// streamConn is a net.Conn over a port-forward data stream.
type streamConn struct {
	conn      httpstream.Connection
	data      httpstream.Stream
	addr      string
	mu        sync.Mutex
	err       error         // the error stream's message
	errDone   chan struct{} // closed once the error stream ended
	closeOnce sync.Once
}

func (c *streamConn) remote(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return fmt.Errorf("port-forward to %s: %w", c.addr, c.err)
	}
	return err
}

func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.data.Read(p)
	if err != nil && err != io.EOF {
		return n, c.remote(err)
	}
	if err == io.EOF {
		// The data stream ends before the error stream says why (the
		// kubelet could not reach the port): wait a moment for it.
		select {
		case <-c.errDone:
		case <-time.After(time.Second):
		}
		return n, c.remote(err)
	}
	return n, err
}

func (c *streamConn) Write(p []byte) (int, error) {
	n, err := c.data.Write(p)
	if err != nil {
		return n, c.remote(err)
	}
	return n, nil
}

func (c *streamConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.data.Reset()
		c.conn.RemoveStreams(c.data)
		_ = c.conn.Close()
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr                { return addr("vllmctl") }
func (c *streamConn) RemoteAddr() net.Addr               { return addr(c.addr) }
func (c *streamConn) SetDeadline(t time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(t time.Time) error { return nil }

type addr string

func (a addr) Network() string { return "portforward" }
func (a addr) String() string  { return string(a) }
