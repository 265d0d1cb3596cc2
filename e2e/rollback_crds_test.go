//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/release/storage"
)

// `rollback --to-revision N` to a revision whose chart had crds/, after the
// CRD was deleted (kubectl's discovery cache, which vllmctl shares, still
// maps its kind).

// deleteCRD deletes the demo's CRD and waits until it is gone (with it, the
// custom resources of its kind).
func (c *crdDemo) deleteCRD(t *testing.T) {
	t.Helper()
	require.NoError(t, c.dyn.Resource(crdResource()).Delete(context.Background(), c.name, metav1.DeleteOptions{}))
	eventually(t, 60*time.Second, "CRD "+c.name+" deleted", func(ctx context.Context) (bool, error) {
		_, err := c.dyn.Resource(crdResource()).Get(ctx, c.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// The rollback creates the deleted CRD again from revision 1's record
// (under the lock, Established before anything else) and applies the
// LoraAdapter: exit 0. A record that holds no definition of it (as one
// written before they were kept) is refused before the lock: exit 6 naming
// the CRD, the kind and the fix, no --create-namespace hint, no record
// changed.
func TestRollbackRecreatesDeletedCRD(t *testing.T) {
	f := newRelFixture(t)
	c := newCRDDemo(t, f)
	ctx := context.Background()

	r := f.run(t, "deploy", relName, c.dir, "--progress", "plain")
	require.Equal(t, 0, r.code, "%s", r)
	noAdapter := copyChart(t, c.dir, func(s string) string { return s })
	require.NoError(t, os.Remove(filepath.Join(noAdapter, "templates", "loraadapter.yaml")))
	r = f.run(t, "deploy", relName, noAdapter, "--set", "greeting=changed", "--progress", "plain")
	require.Equal(t, 0, r.code, "%s", r)
	// Pruned in the foreground: gone once the garbage collector is done.
	eventually(t, 60*time.Second, "revision 2 pruned the LoraAdapter", func(context.Context) (bool, error) {
		_, err := c.adapter(t, f.namespace, relName+"-adapter")
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	c.deleteCRD(t)

	r = f.run(t, "rollback", relName, "--to-revision", "1", "--progress", "plain", "-o", "json")
	require.Equal(t, 0, r.code, "%s", r)
	assert.NotContains(t, r.stderr, "--create-namespace")
	at := func(s string) int {
		t.Helper()
		i := strings.Index(r.stderr, s)
		require.GreaterOrEqual(t, i, 0, "%q in\n%s", s, r.stderr)
		return i
	}
	lock := at("lock: pending-rollback")
	created := at("crds: apiextensions.k8s.io/v1 CustomResourceDefinition " + c.name + ": created")
	established := at("crds: apiextensions.k8s.io/v1 CustomResourceDefinition " + c.name + ": Established")
	applied := at("apply: " + c.group + "/v1 LoraAdapter " + f.namespace + "/" + relName + "-adapter: created")
	assert.Less(t, lock, created, "the CRD is created under the lock")
	assert.Less(t, created, established)
	assert.Less(t, established, applied, "Established before the LoraAdapter is applied")
	res := result(t, r)
	assert.Equal(t, storage.StatusDeployed, res.Status)
	assert.Equal(t, 1, res.RolledBackTo)
	assert.Equal(t, []string{c.name}, res.CRDs, "the result lists the CRD the rollback created")

	require.NotNil(t, c.crd(t), "the CRD is back")
	lora, err := c.adapter(t, f.namespace, relName+"-adapter")
	require.NoError(t, err, "the LoraAdapter is applied")
	base, _, _ := unstructured.NestedString(lora.Object, "spec", "baseModel")
	assert.Equal(t, "Qwen/Qwen2.5-7B-Instruct", base)
	assert.Equal(t, "hello", f.configMapData(t, relName+"-config")["greeting"])
	revs := f.history(t)
	require.Len(t, revs, 3)
	assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusDeployed}, statuses(revs))
	assert.Equal(t, []string{c.name}, revs[2].CRDs, "the rollback's record lists the CRD it created")
	assert.Contains(t, revs[0].CRDManifest, "name: "+c.name, "the deploy keeps the CRD's definition")
	assert.Equal(t, revs[0].CRDManifest, revs[2].CRDManifest, "the rollback carries it on")

	// A record without the definition: refused before the lock.
	old, err := f.store.Get(ctx, relName, 1)
	require.NoError(t, err)
	old.CRDManifest = ""
	require.NoError(t, f.store.Update(ctx, old))
	c.deleteCRD(t)
	r = f.run(t, "rollback", relName, "--to-revision", "1", "--progress", "plain")
	assert.Equal(t, 6, r.code, "%s", r)
	for _, want := range []string{
		"cannot roll back to revision 1: the cluster does not serve kind LoraAdapter in " + c.group + "/v1, which its objects need (" +
			c.group + "/v1 LoraAdapter " + f.namespace + "/" + relName + "-adapter)",
		"CustomResourceDefinition " + c.name + ", which revision 1 created, no longer exists",
		"vllmctl deploy " + relName + " CHART",
		"nothing was applied, no record changed",
	} {
		assert.Contains(t, r.stderr, want)
	}
	assert.NotContains(t, r.stderr, "--create-namespace")
	assert.NotContains(t, r.stderr, "lock:", "refused before the lock")
	assert.Nil(t, c.crd(t), "no CRD created")
	after := f.history(t)
	require.Len(t, after, 3, "no record written")
	assert.Equal(t, statuses(revs), statuses(after), "no record changed")
	assert.Equal(t, "hello", f.configMapData(t, relName+"-config")["greeting"])
}
