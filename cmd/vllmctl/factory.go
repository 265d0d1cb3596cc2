package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vllmctl/vllmctl/internal/podhttp"
	"github.com/vllmctl/vllmctl/internal/podwire"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// Factory builds what the commands take from the cluster, as kubectl's
// cmdutil.Factory does. NewRootCommand sets the one of the kubeconfig
// (clusterFactory) on GlobalOptions, once, for every command; tests set
// one on fakes.
type Factory interface {
	// KubernetesClientSet is the typed client of the cluster.
	KubernetesClientSet() (kubernetes.Interface, error)
	// DynamicClient is the dynamic client of the cluster (custom
	// resources: a LeaderWorkerSet's pods are followed up to it).
	DynamicClient() (dynamic.Interface, error)
	// Store opens the release record store of namespace.
	Store(namespace string) (storage.Store, error)
	// Engine builds the release engine of namespace, its rollout watcher
	// judging with verdicts.
	Engine(namespace string, verdicts wait.RolloutOptions) (*release.Engine, error)
}

// clusterFactory is the Factory of the kubeconfig: the kubectl connection
// flags (rate limits applied by their WrapConfigFn).
type clusterFactory struct {
	getter genericclioptions.RESTClientGetter
}

// newClusterFactory returns the Factory of the connection flags.
func newClusterFactory(getter genericclioptions.RESTClientGetter) Factory {
	return &clusterFactory{getter: getter}
}

// KubernetesClientSet is the typed client of the kubeconfig. It speaks
// protobuf, as the cluster's own controllers do: the pods and events a big
// rollout streams decode at a fraction of JSON's CPU and garbage (and the
// API server encodes them cheaper too). The dynamic client of the applies
// and of kstatus stays on JSON.
func (f *clusterFactory) KubernetesClientSet() (kubernetes.Interface, error) {
	return f.clientSet()
}

// DynamicClient is the dynamic client of the kubeconfig, on JSON (custom
// resources speak no protobuf).
func (f *clusterFactory) DynamicClient() (dynamic.Interface, error) {
	cfg, err := f.jsonConfig()
	if err != nil {
		return nil, err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, recordClusterError{fmt.Errorf("dynamic client: %w", err)}
	}
	return client, nil
}

// watchClients are the rollout watcher's clients: the typed client, as
// KubernetesClientSet, on wait.StreamConfig (no gzip, HTTP/1.1), which
// keeps the thousands of updates a big rollout streams cheap to read, and
// on the same config the REST clients of its informers of pods
// (wait.NewPodWatchClient), which cuts pods down before decoding them,
// and of Deployments and ReplicaSets (wait.NewAppsWatchClient), which
// decodes them without their pod templates.
type watchClients struct {
	client     kubernetes.Interface
	pods, apps rest.Interface
}

func (f *clusterFactory) watchClients() (watchClients, error) {
	cfg, err := f.config()
	if err != nil {
		return watchClients{}, err
	}
	cfg = wait.StreamConfig(cfg)
	var w watchClients
	if w.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return watchClients{}, recordClusterError{fmt.Errorf("kubernetes client: %w", err)}
	}
	if w.pods, err = wait.NewPodWatchClient(cfg); err != nil {
		return watchClients{}, recordClusterError{err}
	}
	if w.apps, err = wait.NewAppsWatchClient(cfg); err != nil {
		return watchClients{}, recordClusterError{err}
	}
	return w, nil
}

func (f *clusterFactory) clientSet() (kubernetes.Interface, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, recordClusterError{fmt.Errorf("kubernetes client: %w", err)}
	}
	return client, nil
}

// jsonConfig is a copy of the kubeconfig's REST config, on JSON.
func (f *clusterFactory) jsonConfig() (*rest.Config, error) {
	if flags, ok := f.getter.(*genericclioptions.ConfigFlags); ok {
		if err := checkKubeconfigFiles(kubeconfigFlag(flags.KubeConfig)); err != nil {
			return nil, err
		}
	}
	cfg, err := f.getter.ToRESTConfig()
	if err != nil {
		return nil, kubeconfigError(err)
	}
	return rest.CopyConfig(cfg), nil
}

// config is the kubeconfig's REST config asking for protobuf.
func (f *clusterFactory) config() (*rest.Config, error) {
	cfg, err := f.jsonConfig()
	if err != nil {
		return nil, err
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg, nil
}

// Store opens the records of namespace: Secrets.
func (f *clusterFactory) Store(namespace string) (storage.Store, error) {
	client, err := f.KubernetesClientSet()
	if err != nil {
		return nil, err
	}
	return storage.NewSecrets(client, namespace), nil
}

// Engine builds the release engine on the cluster: Secrets for records,
// server-side apply for objects, a RolloutWatcher (following Deployments,
// StatefulSets, LeaderWorkerSets, Jobs and Pods itself, kstatus for the
// other objects) for waits.
func (f *clusterFactory) Engine(namespace string, verdicts wait.RolloutOptions) (*release.Engine, error) {
	client, err := f.KubernetesClientSet()
	if err != nil {
		return nil, err
	}
	applier, err := cluster.NewApplier(f.getter)
	if err != nil {
		return nil, kubeconfigError(err)
	}
	watch, err := f.watchClients()
	if err != nil {
		return nil, err
	}
	others := wait.NewKstatusWaiter(applier.DynamicClient(), applier.RESTMapper())
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	restConfig, err := f.getter.ToRESTConfig()
	if err != nil {
		return nil, kubeconfigError(err)
	}
	podClient, err := podwire.NewClient(cfg, podwire.Requests)
	if err != nil {
		return nil, recordClusterError{err}
	}
	return &release.Engine{
		Store:     storage.NewSecrets(client, namespace),
		PodClient: podClient,
		Objects:   applier,
		Lookup:    applier.Lookup,
		Waiter:    wait.NewRolloutWatcher(watch.client, others, verdicts).WithDynamicClient(applier.DynamicClient()).WithPodWatchClient(watch.pods).WithAppsWatchClient(watch.apps),
		Client:    client,
		// The ReplicaSet discovery's bound on a controller that does not
		// act, as the watcher's.
		ControllerStallTimeout: verdicts.ControllerStallTimeout,
		// The canary analysis and the serve check reach pods through the
		// API server's port-forward (JSON, as every streaming request).
		PodHTTP: podhttp.New(rest.CopyConfig(restConfig), client).Client,
	}, nil
}
