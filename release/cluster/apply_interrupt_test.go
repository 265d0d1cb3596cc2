package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

// failingMapper fails every mapping with err, as a discovery cut short
// does: discovery's failed groups do not wrap their causes.
type failingMapper struct {
	*meta.DefaultRESTMapper
	err error
}

func (m failingMapper) RESTMapping(schema.GroupKind, ...string) (*meta.RESTMapping, error) {
	return nil, m.err
}

func (m failingMapper) RESTMappingWithContext(context.Context, schema.GroupKind, ...string) (*meta.RESTMapping, error) {
	return nil, m.err
}

// TestMappingInterrupted: a mapping that fails because the context was
// cancelled is an interrupt (exit 130) naming the object, not a kind the
// cluster does not serve (exit 6); without the cancellation it is.
func TestMappingInterrupted(t *testing.T) {
	cut := &discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{{Version: "v1"}: context.Canceled}}
	a := NewApplierFromClients(newSSACluster(t), failingMapper{DefaultRESTMapper: applyMapper(), err: cut})
	cm := configMap("", "a", nil)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := a.Get(ctx, cm, applyNS)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	var unknown *UnknownKindError
	assert.False(t, errors.As(err, &unknown), "not an unknown kind: %v", err)
	assert.NotContains(t, err.Error(), "does not serve")
	assert.Contains(t, err.Error(), "v1 ConfigMap a: map kind ConfigMap in v1: unable to retrieve the complete list of server APIs")
	assert.Equal(t, exitcode.Interrupted, exitcode.Of(err))

	_, err = a.Get(context.Background(), cm, applyNS)
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, exitcode.Cluster, exitcode.Of(err))
}
