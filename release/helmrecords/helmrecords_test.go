package helmrecords

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
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/release/storage"
)

const manifest = `---
# Source: demo/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: demo-config
  labels:
    app.kubernetes.io/managed-by: Helm
data:
  greeting: hi
`

func helmRelease(version int, status common.Status) *rspb.Release {
	return &rspb.Release{Name: "demo", Namespace: "llm", Version: version, Manifest: manifest,
		Config: map[string]any{"greeting": "hi"},
		Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "demo", Version: "1.2.3", AppVersion: "0.11", APIVersion: "v2"},
			Values: map[string]any{"greeting": "hello", "replicas": 2}},
		Hooks: []*rspb.Hook{{Name: "demo-test", Kind: "Pod", Path: "demo/templates/test.yaml", Events: []rspb.HookEvent{rspb.HookTest},
			Manifest: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: demo-test\nspec:\n  containers: [{name: t, image: busybox}]\n", Weight: 1,
			DeletePolicies: []rspb.HookDeletePolicy{rspb.HookBeforeHookCreation}}},
		Info: &rspb.Info{Status: status, Description: "Upgrade complete", Notes: "hello",
			FirstDeployed: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), LastDeployed: time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)}}
}

func secretOf(t *testing.T, rel *rspb.Release, data string) *corev1.Secret {
	t.Helper()
	if data == "" {
		var err error
		data, err = Encode(rel)
		require.NoError(t, err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.demo.v" + string(rune('0'+rel.Version)), Namespace: "llm",
			Labels: map[string]string{LabelOwner: OwnerHelm, LabelName: rel.Name}},
		Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte(data)},
	}
}

func TestReadDecodesHelmsFormat(t *testing.T) {
	c := fake.NewClientset(secretOf(t, helmRelease(2, common.StatusDeployed), ""), secretOf(t, helmRelease(1, common.StatusSuperseded), ""))
	recs, err := Read(context.Background(), c, DriverSecret, "llm", "demo")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, 1, recs[0].Release.Version, "lowest revision first")
	assert.Equal(t, "sh.helm.release.v1.demo.v2", recs[1].Key)

	_, err = Read(context.Background(), c, DriverSecret, "llm", "other")
	var nf *NotFoundError
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, exitcode.Invalid, nf.ExitCode())
}

func TestReadNamesAnUnreadableRecord(t *testing.T) {
	for name, data := range map[string]string{
		"not base64": "%%%",
		"not gzip":   "H4sIAAAA",
		"not JSON":   "bm90IGpzb24=",
	} {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientset(secretOf(t, helmRelease(1, common.StatusDeployed), data))
			_, err := Read(context.Background(), c, DriverSecret, "llm", "demo")
			var ue *UnreadableError
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, exitcode.Cluster, ue.ExitCode())
			assert.Contains(t, err.Error(), "Helm record Secret llm/sh.helm.release.v1.demo.v1 is unreadable")
		})
	}
	t.Run("another release's record", func(t *testing.T) {
		rel := helmRelease(1, common.StatusDeployed)
		rel.Name = "intruder"
		s := secretOf(t, rel, "")
		s.Labels[LabelName] = "demo"
		_, err := Read(context.Background(), fake.NewClientset(s), DriverSecret, "llm", "demo")
		assert.ErrorContains(t, err, `holds release "intruder" revision 1, not a revision of "demo"`)
	})
}

func TestCheckSettled(t *testing.T) {
	for _, s := range []common.Status{common.StatusPendingInstall, common.StatusPendingUpgrade, common.StatusPendingRollback, common.StatusUninstalling} {
		err := CheckSettled([]Record{{Release: helmRelease(1, common.StatusSuperseded)}, {Release: helmRelease(2, s)}})
		var pe *PendingError
		require.ErrorAs(t, err, &pe, "%s", s)
		assert.Equal(t, exitcode.InProgress, pe.ExitCode())
		assert.Equal(t, 2, pe.Revision)
	}
	assert.NoError(t, CheckSettled([]Record{{Release: helmRelease(1, common.StatusFailed)}, {Release: helmRelease(2, common.StatusDeployed)}}))
}

func TestToRecord(t *testing.T) {
	rec, err := ToRecord(Record{Kind: "Secret", Key: "sh.helm.release.v1.demo.v3", Release: helmRelease(3, common.StatusDeployed)}, "llm")
	require.NoError(t, err)
	assert.Equal(t, 3, rec.Revision)
	assert.Equal(t, storage.StatusDeployed, rec.Status)
	assert.Equal(t, storage.Chart{Name: "demo", Version: "1.2.3", AppVersion: "0.11"}, rec.Chart)
	assert.Equal(t, map[string]any{"greeting": "hi"}, rec.Values)
	assert.Equal(t, "hi", rec.ComputedValues["greeting"], "the user's value over the chart's")
	assert.EqualValues(t, 2, rec.ComputedValues["replicas"], "the chart's default")
	assert.Equal(t, "Adopted from Helm revision 3: Upgrade complete", rec.Description)
	assert.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), rec.Created)
	assert.Contains(t, rec.Manifest, "vllmctl.io/release: demo", "marked as the release's")
	assert.Contains(t, rec.Manifest, "app.kubernetes.io/managed-by: vllmctl")
	require.Len(t, rec.Hooks, 1)
	assert.Contains(t, rec.Hooks[0].Manifest, "vllmctl.io/release: demo")
	assert.Equal(t, "test", string(rec.Hooks[0].Events[0]))

	unknown, err := ToRecord(Record{Release: helmRelease(1, common.StatusUnknown)}, "llm")
	require.NoError(t, err)
	assert.Equal(t, storage.StatusFailed, unknown.Status)

	// A chart that declares where its values set vLLM's settings keeps
	// the mapping in the record, for the failure hints.
	mapped := helmRelease(4, common.StatusDeployed)
	mapped.Chart.Metadata.Annotations = map[string]string{"vllmctl.io/values.max-model-len": "engine.maxModelLen", "category": "AI"}
	rec, err = ToRecord(Record{Release: mapped}, "llm")
	require.NoError(t, err)
	assert.Equal(t, "engine.maxModelLen", rec.Chart.ValuesMap.Path("max-model-len"))
	mapped.Chart.Metadata.Annotations = map[string]string{"vllmctl.io/values.nope": "x"}
	rec, err = ToRecord(Record{Release: mapped}, "llm")
	require.NoError(t, err, "a malformed mapping does not stop the adoption")
	assert.Nil(t, rec.Chart.ValuesMap)
}

func TestMarkAdoptedAndUnmark(t *testing.T) {
	c := fake.NewClientset(secretOf(t, helmRelease(1, common.StatusDeployed), ""))
	ctx := context.Background()
	recs, err := Read(ctx, c, DriverSecret, "llm", "demo")
	require.NoError(t, err)
	require.NoError(t, MarkAdopted(ctx, c, "llm", recs))
	_, err = Read(ctx, c, DriverSecret, "llm", "demo")
	require.Error(t, err, "helm's query (owner=helm) no longer finds it")
	adopted, err := ReadAdopted(ctx, c, DriverSecret, "llm", "demo")
	require.NoError(t, err)
	require.Len(t, adopted, 1)
	require.NoError(t, Unmark(ctx, c, "llm", adopted))
	s, err := c.CoreV1().Secrets("llm").Get(ctx, recs[0].Key, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, OwnerHelm, s.Labels[LabelOwner])
	assert.NotContains(t, s.Labels, LabelAdopted)
}

// TestFromRecord: a vllmctl record given back to Helm keeps its revision,
// values and times; handed-over is deployed for Helm; the manifest's
// objects carry Helm's keys, not vllmctl's; a record adopt read is given
// back as it was, with the new status.
func TestFromRecord(t *testing.T) {
	orig, err := ToRecord(Record{Release: helmRelease(2, common.StatusDeployed)}, "llm")
	require.NoError(t, err)
	orig.Status = storage.StatusHandedOver
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rel, err := FromRecord(orig, first, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, rel.Version)
	assert.Equal(t, common.StatusDeployed, rel.Info.Status)
	assert.Equal(t, first, rel.Info.FirstDeployed)
	assert.Equal(t, map[string]any{"greeting": "hi"}, rel.Config)
	assert.Equal(t, "demo", rel.Chart.Metadata.Name)
	assert.Contains(t, rel.Manifest, "app.kubernetes.io/managed-by: Helm")
	assert.Contains(t, rel.Manifest, "meta.helm.sh/release-name: demo")
	assert.NotContains(t, rel.Manifest, "vllmctl.io/")
	require.Len(t, rel.Hooks, 1)
	assert.NotContains(t, rel.Hooks[0].Manifest, "vllmctl.io/")
	assert.Equal(t, "ssa", rel.ApplyMethod)

	helmOrig := helmRelease(2, common.StatusDeployed)
	orig.Status = storage.StatusSuperseded
	back, err := FromRecord(orig, first, helmOrig)
	require.NoError(t, err)
	assert.Equal(t, common.StatusSuperseded, back.Info.Status)
	assert.Equal(t, helmOrig.Manifest, back.Manifest, "Helm's own record")
	assert.Equal(t, common.StatusDeployed, helmOrig.Info.Status, "the original is not modified")
}
