package release_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vllmctl/vllmctl/internal/rollout"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/releasetest"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// A rollback to a revision whose objects need a CRD deleted since creates
// it again from the revision's record, as the deploy did, or refuses
// before the lock naming it.

// deleteCRD deletes the CRD name as `kubectl delete crd` does: the cluster
// no longer serves its kind.
func (c *crdCluster) deleteCRD(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if crd := c.crds[name]; crd != nil {
		delete(c.served, schema.GroupKind{Group: nested(crd, "spec", "group"), Kind: nested(crd, "spec", "names", "kind")})
		delete(c.crds, name)
	}
}

// withoutAdapter is opts without its LoraAdapter (a chart version whose
// custom resource is gone, its crds/ kept).
func withoutAdapter(opts release.DeployOptions) release.DeployOptions {
	return rebuilt(opts, slices.DeleteFunc(objectsOf(opts), func(o *unstructured.Unstructured) bool { return o.GetKind() == "LoraAdapter" }))
}

// adapterRevisions deploys revision 1 (crds/ and a LoraAdapter), then,
// when two, revision 2 (the same crds/, no LoraAdapter, another greeting).
func adapterRevisions(t *testing.T, f *engFixture, two bool) {
	t.Helper()
	d := f.engine
	_, err := d.Deploy(context.Background(), lean(crdOptions(baseSpec(), loraCRDObject(false))))
	require.NoError(t, err)
	if !two {
		return
	}
	s := baseSpec()
	s.greeting = "bonjour"
	_, err = d.Deploy(context.Background(), withoutAdapter(lean(crdOptions(s, loraCRDObject(false)))))
	require.NoError(t, err)
	require.Nil(t, f.cluster.Object(loraGroup, "LoraAdapter", engNS, "chat-adapter"), "revision 2 pruned the LoraAdapter")
}

// The deploy keeps the definitions of the chart's CRDs in its record; a
// rollback to it after the CRD was deleted creates the CRD again under
// the lock (dry-run before it), waits until it is Established and served,
// then applies the LoraAdapter; the rollback's record lists the CRD it
// created and carries the definitions on.
func TestRollbackRecreatesDeletedCRD(t *testing.T) {
	f, c := newCRDFixture(t)
	adapterRevisions(t, f, true)
	rec1 := f.record(t, 1)
	assert.Contains(t, rec1.CRDManifest, "name: "+loraCRD, "the record keeps the CRD's definition")
	assert.Equal(t, rec1.CRDManifest, f.record(t, 2).CRDManifest, "every revision deployed with crds/ keeps it, not only the one that created the CRD")
	assert.Empty(t, f.record(t, 2).CRDs)

	c.deleteCRD(loraCRD)
	seen := len(c.entries())
	c.onCreate = func() {
		assert.Equal(t, storage.StatusPendingRollback, f.statuses(t)[3], "the CRD is created under the rollback's lock")
	}
	res, err := f.engine.Rollback(context.Background(),
		release.RollbackOptions{Name: engRelease, ToRevision: 1, Timeout: time.Minute})
	require.NoError(t, err)

	assert.Equal(t, storage.StatusDeployed, res.Status)
	assert.Equal(t, 3, res.Revision)
	assert.Equal(t, []string{loraCRD}, res.CRDs, "the result lists the CRD the rollback created")
	rec := f.record(t, 3)
	assert.Equal(t, []string{loraCRD}, rec.CRDs)
	assert.Equal(t, rec1.CRDManifest, rec.CRDManifest, "carried on: a rollback to the rollback can create it too")
	require.NotNil(t, c.crd(loraCRD), "the CRD is back")
	assert.NotNil(t, f.cluster.Object(loraGroup, "LoraAdapter", engNS, "chat-adapter"), "the LoraAdapter is applied")
	assert.Equal(t, "hello", f.configMap("chat-config").Object["data"].(map[string]any)["greeting"])

	log := c.entries()[seen:]
	order := []string{"get crd " + loraCRD, "dry-run create crd " + loraCRD, "create crd " + loraCRD, "discovery", "apply LoraAdapter/chat-adapter"}
	for i := 1; i < len(order); i++ {
		assert.Less(t, index(log, order[i-1]), index(log, order[i]), "%q before %q in %v", order[i-1], order[i], log)
	}
	assert.GreaterOrEqual(t, index(log, order[0]), 0, "%v", log)
	events := strings.Join(f.crdEvents(), "\n")
	assert.Contains(t, events, "crds | apiextensions.k8s.io/v1 CustomResourceDefinition "+loraCRD+" | created")
	assert.Contains(t, events, "crds | apiextensions.k8s.io/v1 CustomResourceDefinition "+loraCRD+" | Established")
}

// A CRD the cluster refuses on the rollback fails it as on a deploy: exit
// 6 naming the CRD, nothing else applied, the rollback's revision failed.
func TestRollbackCRDRefused(t *testing.T) {
	f, c := newCRDFixture(t)
	adapterRevisions(t, f, true)
	c.deleteCRD(loraCRD)
	c.createErr = errors.New("admission webhook denied the request")
	applies := f.cluster.Applies()
	res, err := f.engine.Rollback(context.Background(),
		release.RollbackOptions{Name: engRelease, ToRevision: 1, Timeout: time.Minute})
	require.Error(t, err)
	assert.Equal(t, 6, exitCode(err), "%v", err)
	assert.Contains(t, err.Error(), "CustomResourceDefinition "+loraCRD)
	assert.Contains(t, err.Error(), "admission webhook denied the request")
	assert.Equal(t, applies, f.cluster.Applies(), "nothing else applied")
	require.NotNil(t, res)
	assert.Equal(t, storage.StatusFailed, res.Status)
	rec := f.record(t, 3)
	require.NotNil(t, rec.Failure)
	assert.Equal(t, release.ReasonCRDRefused, rec.Failure.Reason)
	assert.Equal(t, "Rollback to 1 failed: "+release.ReasonCRDRefused+" (CustomResourceDefinition/"+loraCRD+")", rec.Description)
	assert.Equal(t, storage.StatusDeployed, f.statuses(t)[2], "revision 2 still serves")
}

// Without the definition in the record (a record written before they were
// kept, or a revision deployed with --skip-crds), a rollback whose objects
// need the deleted CRD's kind is refused before the lock, naming the kind,
// its objects, the CRD when the record names it, and how to fix it:
// exit 6, nothing applied, no record changed.
func TestRollbackRefusesKindsItCannotCreate(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, f *engFixture, c *crdCluster)
		want  []string
	}{
		{
			name: "record written before the definitions were kept",
			setup: func(t *testing.T, f *engFixture, c *crdCluster) {
				adapterRevisions(t, f, true)
				old := f.record(t, 1)
				old.CRDManifest = ""
				require.NoError(t, f.store.Update(context.Background(), old))
			},
			want: []string{
				"CustomResourceDefinition " + loraCRD + ", which revision 1 created, no longer exists",
				"(written before vllmctl kept those of the chart's crds/)",
			},
		},
		{
			name: "revision deployed with --skip-crds",
			setup: func(t *testing.T, f *engFixture, c *crdCluster) {
				c.put(loraCRDObject(false))
				opts := lean(crdOptions(baseSpec(), loraCRDObject(false)))
				opts.SkipCRDs = true
				_, err := f.engine.Deploy(context.Background(), opts)
				require.NoError(t, err)
				require.Empty(t, f.record(t, 1).CRDManifest, "--skip-crds keeps no CRD")
				s := baseSpec()
				s.greeting = "bonjour"
				opts = withoutAdapter(lean(crdOptions(s, loraCRDObject(false))))
				opts.SkipCRDs = true
				_, err = f.engine.Deploy(context.Background(), opts)
				require.NoError(t, err)
			},
			want: []string{"its CustomResourceDefinition is not in the cluster"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newCRDFixture(t)
			tc.setup(t, f, c)
			c.deleteCRD(loraCRD)
			before := f.statuses(t)
			applies, seen := f.cluster.Applies(), len(c.entries())

			_, err := f.engine.Rollback(context.Background(),
				release.RollbackOptions{Name: engRelease, ToRevision: 1, Timeout: time.Minute})
			require.Error(t, err)
			var mk *release.MissingKindsError
			require.ErrorAs(t, err, &mk)
			assert.Equal(t, 6, exitCode(err))
			msg := err.Error()
			for _, w := range append(tc.want,
				"release chat: cannot roll back to revision 1: the cluster does not serve kind LoraAdapter in demo.vllmctl.io/v1, which its objects need (demo.vllmctl.io/v1 LoraAdapter ml/chat-adapter)",
				"vllmctl deploy chat CHART",
				"nothing was applied, no record changed") {
				assert.Contains(t, msg, w)
			}
			assert.NotContains(t, msg, "--create-namespace")
			assert.Equal(t, before, f.statuses(t), "no record changed")
			assert.Equal(t, applies, f.cluster.Applies(), "nothing applied")
			for _, l := range c.entries()[seen:] {
				assert.NotContains(t, l, "create crd", "no CRD created")
			}
			assert.Nil(t, c.crd(loraCRD))
		})
	}
}

// deletesCRDAndFails is a wait script: a revision without the LoraAdapter
// fails, and its CRD is deleted meanwhile; one with it is ready.
func deletesCRDAndFails(c *crdCluster) func(context.Context, []rollout.ObjectStatus, wait.Options) (wait.Result, error) {
	fail := releasetest.FailKind("ConfigMap", wait.OutcomeFailed, "broken")
	return func(ctx context.Context, objs []rollout.ObjectStatus, opts wait.Options) (wait.Result, error) {
		for _, o := range objs {
			if o.Object.Kind == "LoraAdapter" {
				return wait.Result{Outcome: wait.OutcomeCurrent, Objects: objs}, nil
			}
		}
		c.deleteCRD(loraCRD)
		return fail(ctx, objs, opts)
	}
}

// Deploy's automatic rollback and `wait --rollback-on-failure` restore such
// a revision the same way.
func TestAutomaticRollbacksRecreateDeletedCRD(t *testing.T) {
	for _, viaWait := range []bool{false, true} {
		name := "deploy's automatic rollback"
		if viaWait {
			name = "wait --rollback-on-failure"
		}
		t.Run(name, func(t *testing.T) {
			f, c := newCRDFixture(t)
			adapterRevisions(t, f, false)
			f.waiter.Script = deletesCRDAndFails(c)
			s := baseSpec()
			s.greeting = "bonjour"
			opts := withoutAdapter(lean(crdOptions(s, loraCRDObject(false))))
			opts.RollbackOnFailure = !viaWait
			_, err := f.engine.Deploy(context.Background(), opts)
			require.Error(t, err)
			if viaWait {
				require.Equal(t, 4, exitCode(err), "%v", err)
				_, err = f.engine.Wait(context.Background(),
					release.WaitOptions{Name: engRelease, RollbackOnFailure: true, Timeout: time.Minute})
				require.Error(t, err)
			}
			assert.Equal(t, 3, exitCode(err), "rolled back: %v", err)
			assert.Equal(t, map[int]storage.Status{1: storage.StatusSuperseded, 2: storage.StatusFailed, 3: storage.StatusDeployed}, f.statuses(t))
			rec := f.record(t, 3)
			assert.Equal(t, 1, rec.RollbackOf)
			assert.Equal(t, []string{loraCRD}, rec.CRDs)
			assert.NotNil(t, c.crd(loraCRD), "the CRD is back")
			assert.NotNil(t, f.cluster.Object(loraGroup, "LoraAdapter", engNS, "chat-adapter"))
		})
	}
}

// CRDs too large to keep in the record (with the manifest, more than it
// can hold compressed) are left out of it, said on the progress: the
// deploy goes on.
func TestDeployLeavesOutCRDsTooLargeToRecord(t *testing.T) {
	f, c := newCRDFixture(t)
	crd := loraCRDObject(false)
	noise := make([]byte, 3*storage.MaxRecordBytes/2)
	rnd := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for i := range noise {
		noise[i] = letters[rnd.IntN(len(letters))]
	}
	require.NoError(t, unstructured.SetNestedField(crd.Object, string(noise), "metadata", "annotations", "noise"))
	res, err := f.engine.Deploy(context.Background(), lean(crdOptions(baseSpec(), crd)))
	require.NoError(t, err)
	assert.Equal(t, storage.StatusDeployed, res.Status)
	assert.Empty(t, f.record(t, 1).CRDManifest)
	assert.NotNil(t, c.crd(loraCRD))
	assert.Contains(t, strings.Join(f.crdEvents(), "\n"), "crds |  | not recorded | the record keeps no definition of the chart's CRDs")
}
