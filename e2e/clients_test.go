//go:build e2e

package e2e

import (
	"fmt"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/vllmctl/vllmctl/release/cluster"
	"github.com/vllmctl/vllmctl/wait"
)

// Clients the tests build from the local cluster's REST config as the
// factory (cmd/vllmctl/factory.go) builds them from kubectl's flags.

// newApplierForConfig builds an Applier from a REST config, with a deferred
// RESTMapper over in-memory cached discovery.
func newApplierForConfig(cfg *rest.Config) (*cluster.Applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build discovery client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("build dynamic client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return cluster.NewApplierFromClients(dyn, mapper), nil
}

// newRolloutWatcherForConfig returns a RolloutWatcher for the cluster of
// cfg, following LeaderWorkerSets too, with a KstatusWaiter (and a
// discovery-backed REST mapper) for the objects it does not follow itself.
func newRolloutWatcherForConfig(cfg *rest.Config, opts wait.RolloutOptions) (*wait.RolloutWatcher, error) {
	streams := wait.StreamConfig(cfg)
	client, err := kubernetes.NewForConfig(streams)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	pods, err := wait.NewPodWatchClient(streams)
	if err != nil {
		return nil, err
	}
	apps, err := wait.NewAppsWatchClient(streams)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return wait.NewRolloutWatcher(client, wait.NewKstatusWaiter(dyn, mapper), opts).WithDynamicClient(dyn).WithPodWatchClient(pods).WithAppsWatchClient(apps), nil
}
