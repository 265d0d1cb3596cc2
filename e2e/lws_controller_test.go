//go:build e2e

// This file owns the LeaderWorkerSet (LWS) controller the LWS tests run
// against the local cluster: its CRDs (applied server-side), the
// controller binary (LWS_BIN, built by hack/install-lws.sh) started once
// per test process with its webhook server on 127.0.0.1 and a self-signed
// certificate made here, and the webhook configurations pointing the API
// server at it, restricted to LWS objects and LWS pods in namespaces
// labelled lwsNamespaceLabel. TestMain stops it when the tests end.

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const (
	// lwsNamespaceLabel marks the namespaces whose LWS objects and pods
	// the test controller's webhooks see: those of the LWS tests only.
	lwsNamespaceLabel = "e2e.vllmctl.io/lws"
	// lwsWebhookName names both webhook configurations.
	lwsWebhookName = "vllmctl-e2e-lws"
	// lwsFieldManager applies the CRDs and webhook configurations.
	lwsFieldManager = "vllmctl-e2e-lws"
)

// lwsController is the running LWS controller.
type lwsController struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	client kubernetes.Interface
	port   int
}

// lwsState holds the test process's one controller: started by the first
// test that needs it, stopped by TestMain.
type lwsState struct {
	mu   sync.Mutex
	ctrl *lwsController
	err  error
}

var lwsProc lwsState

// TestMain checks the local clusters' components (restarting what is
// down, controlplane_test.go) and stops before any test when one cannot
// be brought back; points the model-fit preflight at a local hub
// (modelfit_test.go); runs the tests, then stops the LWS controller if one
// started.
func TestMain(m *testing.M) {
	if err := checkControlPlane(true, stderrf); err != nil {
		stderrf("%v", err)
		stderrf("not running the tests: every one would wait out its timeout")
		os.Exit(1)
	}
	stopHub := startModelFitHub()
	code := m.Run()
	stopHub()
	lwsProc.stop()
	os.Exit(code)
}

// syncBuffer collects a process's output for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// tail returns the last n bytes written.
func (s *syncBuffer) tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// lwsBin returns LWS_BIN; without it the test is skipped (failed in CI).
func lwsBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("LWS_BIN")
	if bin == "" {
		skipOrFail(t, "LWS_BIN is not set: run make e2e (or LWS_BIN=$(hack/install-lws.sh))")
	}
	return bin
}

// useLWS starts the LWS controller once per test process (the first call
// does; later calls reuse it), and labels e's namespace so that the
// controller's webhooks see its LWS objects and pods.
func useLWS(t *testing.T, e *env) *lwsController {
	t.Helper()
	bin := lwsBin(t)
	lwsProc.mu.Lock()
	defer lwsProc.mu.Unlock()
	if lwsProc.ctrl == nil && lwsProc.err == nil {
		lwsProc.ctrl, lwsProc.err = startLWS(e.cfg, bin)
	}
	require.NoError(t, lwsProc.err, "start the LeaderWorkerSet controller")
	select {
	case <-lwsProc.ctrl.exited:
		require.Failf(t, "the LeaderWorkerSet controller exited", "output:\n%s", lwsProc.ctrl.out.tail(8<<10))
	default:
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, lwsNamespaceLabel)
	_, err := e.client.CoreV1().Namespaces().Patch(context.Background(), e.namespace, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err, "label namespace %s", e.namespace)
	awaitLWSWebhook(t, e)
	return lwsProc.ctrl
}

// awaitLWSWebhook waits until the API server calls the controller's
// mutating webhook for LWS objects in e's namespace (it loads webhook
// configurations, and namespaces' labels, asynchronously): a server-side
// dry-run create of a LeaderWorkerSet comes back with the webhook's
// default spec.networkConfig.subdomainPolicy.
func awaitLWSWebhook(t *testing.T, e *env) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(e.cfg)
	require.NoError(t, err)
	c := dyn.Resource(schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}).Namespace(e.namespace)
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"name": "webhook-probe"},
		"spec": map[string]any{"leaderWorkerTemplate": map[string]any{"size": int64(1),
			"workerTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "probe", "image": "probe"}}}}}},
	}}
	var last string
	err = kwait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := c.Create(ctx, probe.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		policy, _, _ := unstructured.NestedString(got.Object, "spec", "networkConfig", "subdomainPolicy")
		last = "the dry-run LeaderWorkerSet has no default subdomainPolicy: the mutating webhook was not called"
		return policy != "", nil
	})
	require.NoError(t, err, "the LWS webhooks answer for namespace %s: %s", e.namespace, last)
}

// stop deletes the webhook configurations, then stops the controller.
func (s *lwsState) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.ctrl
	if c == nil {
		return
	}
	s.ctrl = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, lwsWebhookName, metav1.DeleteOptions{})
	_ = c.client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, lwsWebhookName, metav1.DeleteOptions{})
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// startLWS applies the CRDs found beside bin (crds/), starts the
// controller and registers its webhooks.
func startLWS(cfg *rest.Config, bin string) (*lwsController, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	if err := applyLWSCRDs(ctx, dyn, filepath.Join(filepath.Dir(bin), "crds")); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "vllmctl-e2e-lws-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory of the LWS controller: %w", err)
	}
	caPEM, err := writeWebhookCert(dir)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(conf, []byte(lwsConfig(dir, port)), 0o600); err != nil {
		return nil, fmt.Errorf("LWS controller configuration %s: %w", conf, err)
	}
	kubeconfig := os.Getenv("VLLMCTL_E2E_KUBECONFIG")
	cmd := exec.Command(bin, "--config", conf, "--leader-elect=false", "--zap-devel=false", "--zap-log-level=info")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// A test process that dies without reaching TestMain's end (a -timeout
	// panic) takes the controller with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the LWS controller %s: %w", bin, err)
	}
	c := &lwsController{cmd: cmd, out: out, exited: make(chan struct{}), client: client, port: port}
	go func() {
		_ = cmd.Wait()
		os.RemoveAll(dir)
		close(c.exited)
	}()
	fail := func(err error) (*lwsController, error) {
		_ = cmd.Process.Kill()
		<-c.exited
		return nil, fmt.Errorf("%w\nLWS controller output:\n%s", err, out.tail(8<<10))
	}
	if err := waitWebhookServing(ctx, c, caPEM); err != nil {
		return fail(err)
	}
	if err := applyLWSWebhooks(ctx, client, port, caPEM); err != nil {
		return fail(err)
	}
	return c, nil
}

// lwsConfig is the controller's configuration: no leader election, no
// internal certificate management (the test made the certificate), the
// webhook server on 127.0.0.1:port, no metrics or health endpoints.
func lwsConfig(certDir string, port int) string {
	return fmt.Sprintf(`apiVersion: config.lws.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: "0"
`, port, certDir)
}

// applyLWSCRDs applies every CRD in dir (server-side) and waits for each
// to be Established.
func applyLWSCRDs(ctx context.Context, dyn dynamic.Interface, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s (hack/install-lws.sh copies them there): %v", dir, err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read CRD %s: %w", f, err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
			return fmt.Errorf("parse CRD %s: %w", f, err)
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			return fmt.Errorf("CRD %s: %w", obj.GetName(), err)
		}
		if _, err := crds.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: lwsFieldManager, Force: ptr.To(true)}); err != nil {
			return fmt.Errorf("apply CRD %s: %w", obj.GetName(), err)
		}
		for {
			got, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("CRD %s: %w", obj.GetName(), err)
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			established := false
			for _, c := range conds {
				m, _ := c.(map[string]any)
				established = established || (m["type"] == "Established" && m["status"] == "True")
			}
			if established {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not Established: %w", obj.GetName(), ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// writeWebhookCert writes a self-signed certificate for 127.0.0.1 and its
// key into dir as tls.crt and tls.key (the webhook server's file names),
// and returns the certificate (PEM): the webhooks' caBundle.
func writeWebhookCert(dir string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("webhook key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("webhook key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("webhook certificate: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, fmt.Errorf("webhook key: %w", err)
	}
	return certPEM, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitWebhookServing waits until the controller's webhook server answers
// TLS with the test's certificate.
func waitWebhookServing(ctx context.Context, c *lwsController, caPEM []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	addr := fmt.Sprintf("127.0.0.1:%d", c.port)
	var last error
	for {
		d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return nil
		}
		last = err
		select {
		case <-c.exited:
			return fmt.Errorf("the LWS controller exited before serving its webhooks on %s", addr)
		case <-ctx.Done():
			return fmt.Errorf("the LWS controller's webhooks on %s: %w (last: %v)", addr, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// applyLWSWebhooks creates (or updates) the mutating and validating
// webhook configurations of the controller at 127.0.0.1:port: those of
// LWS objects (rules: leaderworkersets only) and of LWS pods (object
// selector: the label leaderworkerset.sigs.k8s.io/name), in namespaces
// labelled lwsNamespaceLabel only. Nothing else is sent to the webhooks,
// so no other object or pod depends on the controller being up.
func applyLWSWebhooks(ctx context.Context, client kubernetes.Interface, port int, caPEM []byte) error {
	url := func(path string) *string { return ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", port, path)) }
	ns := &metav1.LabelSelector{MatchLabels: map[string]string{lwsNamespaceLabel: "true"}}
	lwsPods := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "leaderworkerset.sigs.k8s.io/name", Operator: metav1.LabelSelectorOpExists},
	}}
	rule := func(group, resource string, ops ...admissionv1.OperationType) []admissionv1.RuleWithOperations {
		return []admissionv1.RuleWithOperations{{Operations: ops, Rule: admissionv1.Rule{
			APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}, Scope: ptr.To(admissionv1.NamespacedScope),
		}}}
	}
	none := ptr.To(admissionv1.SideEffectClassNone)
	fail := ptr.To(admissionv1.Fail)
	mutating := &admissionv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: lwsWebhookName},
		Webhooks: []admissionv1.MutatingWebhook{
			{
				Name: "mleaderworkerset.kb.io", AdmissionReviewVersions: []string{"v1"}, SideEffects: none, FailurePolicy: fail,
				ClientConfig:      admissionv1.WebhookClientConfig{URL: url("/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"), CABundle: caPEM},
				Rules:             rule("leaderworkerset.x-k8s.io", "leaderworkersets", admissionv1.Create, admissionv1.Update),
				NamespaceSelector: ns, TimeoutSeconds: ptr.To[int32](5),
			},
			{
				Name: "mpod.kb.io", AdmissionReviewVersions: []string{"v1"}, SideEffects: none, FailurePolicy: fail,
				ClientConfig:      admissionv1.WebhookClientConfig{URL: url("/mutate--v1-pod"), CABundle: caPEM},
				Rules:             rule("", "pods", admissionv1.Create),
				NamespaceSelector: ns, ObjectSelector: lwsPods, TimeoutSeconds: ptr.To[int32](5),
			},
		},
	}
	validating := &admissionv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: lwsWebhookName},
		Webhooks: []admissionv1.ValidatingWebhook{
			{
				Name: "vleaderworkerset.kb.io", AdmissionReviewVersions: []string{"v1"}, SideEffects: none, FailurePolicy: fail,
				ClientConfig:      admissionv1.WebhookClientConfig{URL: url("/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset"), CABundle: caPEM},
				Rules:             rule("leaderworkerset.x-k8s.io", "leaderworkersets", admissionv1.Create, admissionv1.Update),
				NamespaceSelector: ns, TimeoutSeconds: ptr.To[int32](5),
			},
			{
				Name: "vpod.kb.io", AdmissionReviewVersions: []string{"v1"}, SideEffects: none, FailurePolicy: fail,
				ClientConfig:      admissionv1.WebhookClientConfig{URL: url("/validate--v1-pod"), CABundle: caPEM},
				Rules:             rule("", "pods", admissionv1.Create, admissionv1.Update),
				NamespaceSelector: ns, ObjectSelector: lwsPods, TimeoutSeconds: ptr.To[int32](5),
			},
		},
	}
	opts := metav1.PatchOptions{FieldManager: lwsFieldManager, Force: ptr.To(true)}
	data, err := jsonOf(mutating)
	if err != nil {
		return err
	}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, lwsWebhookName, types.ApplyPatchType, data, opts); err != nil {
		return fmt.Errorf("apply MutatingWebhookConfiguration %s: %w", lwsWebhookName, err)
	}
	if data, err = jsonOf(validating); err != nil {
		return err
	}
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, lwsWebhookName, types.ApplyPatchType, data, opts); err != nil {
		return fmt.Errorf("apply ValidatingWebhookConfiguration %s: %w", lwsWebhookName, err)
	}
	return nil
}

func jsonOf(obj any) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	return data, nil
}
