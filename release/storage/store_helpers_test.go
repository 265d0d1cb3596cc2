package storage

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	testingclock "k8s.io/utils/clock/testing"
)

// newRecordClock returns a fake clock tests move by hand (Step).
func newRecordClock() *testingclock.FakeClock {
	return testingclock.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
}

// newRVFakeClientset returns client-go's fake clientset with the API server's
// optimistic concurrency on Secrets, which the object tracker lacks: every
// write gets a new resourceVersion and an update carrying a stale one fails
// with Conflict. Reactors run under the fake's lock, so this is atomic.
func newRVFakeClientset() *fake.Clientset {
	cs := fake.NewClientset()
	var rv int64
	gvr := corev1.SchemeGroupVersion.WithResource("secrets")
	cs.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject().(*corev1.Secret)
		rv++
		obj.ResourceVersion = strconv.FormatInt(rv, 10)
		return false, nil, nil // the tracker stores it
	})
	cs.PrependReactor("update", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.UpdateAction).GetObject().(*corev1.Secret)
		cur, err := cs.Tracker().Get(gvr, a.GetNamespace(), obj.Name)
		if err != nil {
			return true, nil, err
		}
		if obj.ResourceVersion != "" && obj.ResourceVersion != cur.(*corev1.Secret).ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), obj.Name,
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		rv++
		obj.ResourceVersion = strconv.FormatInt(rv, 10)
		return false, nil, nil
	})
	return cs
}

// storeBackend is one Store implementation the contract suite runs against.
type storeBackend struct {
	name string
	// new returns an empty store for the namespace called ns in the test
	// (the cluster backend prefixes it); other(ns2) returns a store of the
	// same cluster for the namespace called ns2.
	new func(t testing.TB, ns string) (s Store, other func(ns string) Store)
	// shared: the store's cluster holds other tests' namespaces too.
	shared bool
}

// scope drops the entries of namespaces that are not those of the test that
// made store s (on a shared cluster: those without the namespace prefix of
// s).
func (b storeBackend) scope(s Store, es []Entry) []Entry {
	if !b.shared {
		return es
	}
	prefix := s.Namespace()[:strings.LastIndex(s.Namespace(), "-")+1]
	var out []Entry
	for _, e := range es {
		if strings.HasPrefix(e.Namespace, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// clusterKubeconfigEnv names a kubeconfig whose cluster the suite also runs
// against (e.g. the local one: .cluster/kubeconfig). Namespaces named
// vllmctl-release-test-* are created there and deleted afterwards.
const clusterKubeconfigEnv = "VLLMCTL_RELEASE_TEST_KUBECONFIG"

const clusterNamespacePrefix = "vllmctl-release-test-"

func storeBackends() []storeBackend {
	bs := []storeBackend{
		{name: "memory", new: func(_ testing.TB, ns string) (Store, func(string) Store) {
			m := NewMemory(ns)
			return m, func(ns2 string) Store { return m.InNamespace(ns2) }
		}},
		{name: "secrets", new: func(_ testing.TB, ns string) (Store, func(string) Store) {
			cs := newRVFakeClientset()
			return NewSecrets(cs, ns), func(ns2 string) Store { return NewSecrets(cs, ns2) }
		}},
	}
	if path := os.Getenv(clusterKubeconfigEnv); path != "" {
		bs = append(bs, storeBackend{name: "cluster", new: func(t testing.TB, ns string) (Store, func(string) Store) {
			return clusterStore(t, path, ns)
		}, shared: true})
	}
	return bs
}

// clusterStore returns Secrets stores on the cluster of kubeconfig, in fresh
// namespaces deleted when the test ends.
func clusterStore(t testing.TB, kubeconfig, ns string) (Store, func(string) Store) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cfg.QPS, cfg.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	prefix := clusterNamespacePrefix + utilrand.String(5) + "-"
	made := map[string]bool{}
	open := func(name string) Store {
		full := prefix + name
		if !made[full] {
			made[full] = true
			ctx := context.Background()
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: full}}, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = cs.CoreV1().Namespaces().Delete(context.Background(), full, metav1.DeleteOptions{})
			})
		}
		return NewSecrets(cs, full)
	}
	return open(ns), open
}

// sampleManifest is a representative rendered manifest of the built-in chart.
func sampleManifest(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("testdata/manifest.yaml")
	require.NoError(t, err)
	return string(b)
}

// sampleRecord returns a fully populated record.
func sampleRecord(t testing.TB, name string, revision int, status Status) *Release {
	t.Helper()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(revision) * time.Minute)
	return &Release{
		Name:        name,
		Revision:    revision,
		Status:      status,
		Description: "Upgrade complete",
		Holder:      "alice@laptop pid 42",
		Chart:       Chart{Name: "vllm", Version: "0.3.0", AppVersion: "v0.11.0"},
		Values: map[string]any{
			"model":    map[string]any{"name": "meta-llama/Llama-3.1-8B-Instruct", "maxModelLen": float64(8192)},
			"replicas": float64(2),
			"image":    map[string]any{"tag": "v0.11." + strconv.Itoa(revision)},
		},
		Manifest: sampleManifest(t),
		ReplicaSets: []ReplicaSetRef{
			{Deployment: name + "-vllm", Name: name + "-vllm-6d9f7c8b5", PodTemplateHash: "6d9f7c8b5", Revision: int64(revision)},
		},
		Created: at,
		Updated: at.Add(30 * time.Second),
	}
}
