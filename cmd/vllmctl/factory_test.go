package main

import (
	"errors"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// fakeFactory is the Factory of the tests: engines and record stores on
// fakes, whatever the kubeconfig says.
type fakeFactory struct {
	// engine builds the release engine of a namespace (the verdicts are
	// the fake waiter's business); nil: no engine.
	engine func(namespace string) (*release.Engine, error)
	// store opens the record store of a namespace; nil: the engine's.
	store func(namespace string) storage.Store
	// client is the clientset; nil: none.
	client kubernetes.Interface
	// dynamic is the dynamic client; nil: none.
	dynamic dynamic.Interface
}

var _ Factory = fakeFactory{}

// engineFactory is a fakeFactory of engines (and of their stores).
func engineFactory(engine func(namespace string) (*release.Engine, error)) Factory {
	return fakeFactory{engine: engine}
}

// storeFactory is a fakeFactory of record stores only (list, history).
func storeFactory(store func(namespace string) storage.Store) Factory {
	return fakeFactory{store: store}
}

func (f fakeFactory) KubernetesClientSet() (kubernetes.Interface, error) {
	if f.client == nil {
		return nil, errors.New("fake factory: no clientset")
	}
	return f.client, nil
}

func (f fakeFactory) DynamicClient() (dynamic.Interface, error) {
	if f.dynamic == nil {
		return nil, errors.New("fake factory: no dynamic client")
	}
	return f.dynamic, nil
}

func (f fakeFactory) Store(namespace string) (storage.Store, error) {
	if f.store != nil {
		return f.store(namespace), nil
	}
	e, err := f.Engine(namespace, wait.RolloutOptions{})
	if err != nil {
		return nil, err
	}
	return e.Store, nil
}

func (f fakeFactory) Engine(namespace string, _ wait.RolloutOptions) (*release.Engine, error) {
	if f.engine == nil {
		return nil, errors.New("fake factory: no release engine")
	}
	return f.engine(namespace)
}
