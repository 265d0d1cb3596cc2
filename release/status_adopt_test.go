package release_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vllmctl/vllmctl/release/helmrecords"
	"github.com/vllmctl/vllmctl/release/storage"
)

// TestStatusFlagsAnUnfinishedAdopt: an adopted revision whose Helm
// records are still Helm's own (adopt killed between writing vllmctl's
// records and relabelling Helm's) is reported as owned by both tools;
// once they are relabelled, or for a revision vllmctl deployed, nothing is
// reported.
func TestStatusFlagsAnUnfinishedAdopt(t *testing.T) {
	ctx := context.Background()
	f := newEngFixture(t)
	r := f.deploy(t, baseSpec())

	rep, err := f.engine.Status(ctx, engRelease)
	require.NoError(t, err)
	assert.Empty(t, rep.HelmRecords, "a revision vllmctl deployed")

	rec, err := f.store.Get(ctx, engRelease, r.Revision)
	require.NoError(t, err)
	rec.AdoptedFrom, rec.Description = rec.Revision, storage.AdoptedDescription(rec.Revision)
	require.NoError(t, f.store.Update(ctx, rec))
	rep, err = f.engine.Status(ctx, engRelease)
	require.NoError(t, err)
	assert.Empty(t, rep.HelmRecords, "adopted, and Helm has no record of its own")

	rel := &rspb.Release{Name: engRelease, Namespace: engNS, Version: rec.Revision,
		Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "chat", Version: "1.0.0", APIVersion: "v2"}},
		Info:  &rspb.Info{Status: common.StatusDeployed, LastDeployed: time.Now()}}
	data, err := helmrecords.Encode(rel)
	require.NoError(t, err)
	key := "sh.helm.release.v1." + engRelease + ".v1"
	_, err = f.cluster.Client.CoreV1().Secrets(engNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Namespace: engNS,
			Labels: map[string]string{helmrecords.LabelOwner: helmrecords.OwnerHelm, helmrecords.LabelName: engRelease}},
		Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte(data)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	rep, err = f.engine.Status(ctx, engRelease)
	require.NoError(t, err)
	assert.Equal(t, []string{"Secret " + key}, rep.HelmRecords, "adopt did not relabel Helm's record")

	s, err := f.cluster.Client.CoreV1().Secrets(engNS).Get(ctx, key, metav1.GetOptions{})
	require.NoError(t, err)
	s.Labels[helmrecords.LabelOwner] = helmrecords.OwnerAdopted
	_, err = f.cluster.Client.CoreV1().Secrets(engNS).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	rep, err = f.engine.Status(ctx, engRelease)
	require.NoError(t, err)
	assert.Empty(t, rep.HelmRecords, "relabelled: adopt finished")
}
