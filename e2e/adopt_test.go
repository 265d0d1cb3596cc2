//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/vllmctl/vllmctl/internal/exitcode"
	"github.com/vllmctl/vllmctl/internal/testregistry"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/helmrecords"
	"github.com/vllmctl/vllmctl/release/storage"
)

// helmChart is a multi-object chart (a Deployment of 2 with a PDB, a
// Service, a ConfigMap and a Secret, Helm's usual labels) that Helm
// installs and vllmctl adopts.
const helmChart = "testdata/helmchart"

// TestAdoptHelmRelease: a release installed and upgraded twice by Helm
// 4.3.1 (server-side apply, and client-side apply as Helm 3 applies)
// moves to vllmctl with its 3 revisions: no pod restarts, no ReplicaSet
// made, no field left to Helm's manager; helm no longer finds it; vllmctl
// then deploys the same values (up to date) and new ones without
// --force-conflicts, and rolls back to Helm's revision 1, reusing its
// ReplicaSet.
func TestAdoptHelmRelease(t *testing.T) {
	shareCluster(t, 4)
	_, helmBin := testregistry.Bins(t)
	for _, apply := range []string{"server-side", "client-side"} {
		t.Run(apply, func(t *testing.T) {
			f := newRelFixture(t)
			ctx := context.Background()
			helm := testregistry.Helm(t, helmBin, []string{"KUBECONFIG=" + f.kubeconfig, "HOME=" + t.TempDir()})
			chartDir, err := filepath.Abs(helmChart)
			require.NoError(t, err)
			helmArgs := func(verb string, set ...string) []string {
				args := []string{verb, relName, chartDir, "-n", f.namespace, "--wait", "--timeout", "2m",
					"--server-side=" + map[string]string{"server-side": "true", "client-side": "false"}[apply]}
				for _, s := range set {
					args = append(args, "--set", s)
				}
				return args
			}
			helm("", helmArgs("install")...)
			v1RS := f.replicaSets(t)
			require.Len(t, v1RS, 1)
			helm("", helmArgs("upgrade", "image=example.com/vllm:v2")...)
			helm("", helmArgs("upgrade", "image=example.com/vllm:v2", "greeting=hi")...)
			pods, rss := f.instancePodUIDs(t), f.replicaSets(t)
			require.Len(t, rss, 3, "one ReplicaSet per Helm revision")
			if apply == "client-side" {
				assert.Contains(t, f.managers(t, "deployments", relName), "helm (Update)", "Helm applied client-side")
			} else {
				assert.Contains(t, f.managers(t, "deployments", relName), "helm (Apply)", "Helm applied server-side")
			}

			// The plan changes nothing.
			r := f.run(t, "adopt", relName, "--dry-run", "-o", "json")
			require.Equal(t, exitcode.OK, r.code, "%s", r)
			requireSchemaValid(t, "adopt", r.stdout)
			var plan release.AdoptResult
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &plan), r.stdout)
			assert.True(t, plan.DryRun)
			assert.Equal(t, 3, plan.Current)
			require.Len(t, plan.Revisions, 3)
			assert.Len(t, plan.Objects, 5)
			assert.Empty(t, f.history(t), "no vllmctl record")
			assert.Contains(t, f.managers(t, "deployments", relName), "helm ("+map[string]string{"server-side": "Apply", "client-side": "Update"}[apply]+")")

			r = f.run(t, "adopt", relName, "-o", "json", "--progress", "plain")
			require.Equal(t, exitcode.OK, r.code, "%s", r)
			requireSchemaValid(t, "adopt", r.stdout)
			var res release.AdoptResult
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
			revs := f.history(t)
			require.Len(t, revs, 3)
			assert.Equal(t, []storage.Status{storage.StatusSuperseded, storage.StatusSuperseded, storage.StatusDeployed}, statuses(revs))
			assert.Equal(t, map[string]any{"image": "example.com/vllm:v2", "greeting": "hi"}, revs[2].Values, "Helm's user values")
			assert.Contains(t, revs[0].Description, "Adopted from Helm revision 1")
			assert.Equal(t, "helmchart", revs[0].Chart.Name)
			for i, rev := range revs {
				require.Len(t, rev.ReplicaSets, 1, "revision %d tied to its ReplicaSet", rev.Revision)
				assert.Equal(t, rss[i], rev.ReplicaSets[0].Name, "revision %d", rev.Revision)
			}
			assert.Equal(t, pods, f.instancePodUIDs(t), "no pod restarted")
			assert.Equal(t, rss, f.replicaSets(t), "no ReplicaSet made")
			for _, o := range []struct{ resource, name string }{
				{"deployments", relName}, {"services", relName}, {"configmaps", relName + "-config"},
				{"secrets", relName + "-token"}, {"poddisruptionbudgets", relName},
			} {
				for _, m := range f.managers(t, o.resource, o.name) {
					assert.NotRegexp(t, `^helm \(`, m, "%s %s", o.resource, o.name)
				}
				assert.Contains(t, f.managers(t, o.resource, o.name), "vllmctl (Apply)", "%s %s", o.resource, o.name)
			}
			assert.NotContains(t, r.stdout+r.stderr, "s3cr3t-token", "the Secret's data is never printed")
			d, err := f.client.AppsV1().Deployments(f.namespace).Get(ctx, relName, metav1.GetOptions{})
			require.NoError(t, err)
			for k := range d.Annotations {
				assert.NotContains(t, k, "meta.helm.sh/", "Helm's ownership annotations are dropped")
			}
			assert.Equal(t, "vllmctl", d.Labels["app.kubernetes.io/managed-by"])
			assert.Equal(t, relName, d.Labels["vllmctl.io/release"])

			// Helm no longer finds the release; its records are kept.
			out := helmFails(t, helmBin, f.kubeconfig, "history", relName, "-n", f.namespace)
			assert.Contains(t, out, "not found")
			out = helmFails(t, helmBin, f.kubeconfig, "upgrade", "--install", relName, chartDir, "-n", f.namespace)
			assert.Contains(t, out, "invalid ownership metadata", "helm refuses to install over the adopted objects")
			secrets, err := f.client.CoreV1().Secrets(f.namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=vllmctl-adopted,name=" + relName})
			require.NoError(t, err)
			assert.Len(t, secrets.Items, 3)
			r = f.run(t, "adopt", relName)
			assert.Equal(t, exitcode.Invalid, r.code, "nothing left to adopt\n%s", r)

			// The same values: up to date. New values: no conflict.
			deploy := func(set ...string) relRun {
				args := []string{"deploy", relName, chartDir, "--progress", "plain", "--timeout", "2m", "-o", "json"}
				for _, s := range set {
					args = append(args, "--set", s)
				}
				return f.run(t, args...)
			}
			r = deploy("image=example.com/vllm:v2", "greeting=hi")
			require.Equal(t, exitcode.OK, r.code, "%s", r)
			assert.Contains(t, r.stderr, "up to date")
			assert.Equal(t, pods, f.instancePodUIDs(t), "no pod restarted")
			r = deploy("image=example.com/vllm:v3", "greeting=hey")
			require.Equal(t, exitcode.OK, r.code, "new values apply without --force-conflicts\n%s", r)
			assert.Equal(t, 4, result(t, r).Revision)

			r = f.run(t, "rollback", relName, "--to-revision", "1", "--progress", "plain", "--timeout", "2m", "-o", "json")
			require.Equal(t, exitcode.OK, r.code, "%s", r)
			rb := result(t, r)
			require.Len(t, rb.ReplicaSets, 1)
			assert.Equal(t, v1RS[0], rb.ReplicaSets[0].Name, "Helm revision 1's ReplicaSet serves again")
			assert.Equal(t, "hello", f.configMapData(t, relName+"-config")["GREETING"])

			// And back to Helm: helm history, upgrade and rollback work;
			// vllmctl refuses until it adopts the release again.
			r = f.run(t, "handover", relName, "--to", "helm", "--dry-run", "-o", "json")
			require.Equal(t, exitcode.OK, r.code, "%s", r)
			requireSchemaValid(t, "handover", r.stdout)
			helmFails(t, helmBin, f.kubeconfig, "history", relName, "-n", f.namespace)
			pods = f.instancePodUIDs(t)
			r = f.run(t, "handover", relName, "--to", "helm", "-o", "json", "--progress", "plain")
			require.Equal(t, exitcode.OK, r.code, "%s", r)
			requireSchemaValid(t, "handover", r.stdout)
			assert.Equal(t, pods, f.instancePodUIDs(t), "no pod restarted")
			hist := helm("", "history", relName, "-n", f.namespace, "-o", "json")
			var helmHist []struct {
				Revision int    `json:"revision"`
				Status   string `json:"status"`
			}
			require.NoError(t, json.Unmarshal([]byte(hist[:strings.LastIndex(hist, "]")+1]), &helmHist), hist)
			require.Len(t, helmHist, 5, "Helm's 3 revisions and vllmctl's 2")
			assert.Equal(t, "deployed", helmHist[4].Status)
			assert.Equal(t, "superseded", helmHist[3].Status)
			for _, o := range []struct{ resource, name string }{
				{"deployments", relName}, {"services", relName}, {"configmaps", relName + "-config"},
				{"secrets", relName + "-token"}, {"poddisruptionbudgets", relName},
			} {
				for _, m := range f.managers(t, o.resource, o.name) {
					assert.NotRegexp(t, `^vllmctl`, m, "%s %s", o.resource, o.name)
				}
			}
			d, err = f.client.AppsV1().Deployments(f.namespace).Get(ctx, relName, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, "Helm", d.Labels["app.kubernetes.io/managed-by"])
			assert.Equal(t, relName, d.Annotations["meta.helm.sh/release-name"])
			assert.NotContains(t, d.Labels, "vllmctl.io/release")
			r = deploy("image=example.com/vllm:v3")
			assert.Equal(t, exitcode.Invalid, r.code, "handed over: vllmctl refuses\n%s", r)
			assert.Contains(t, r.stderr, "was handed over to Helm at revision 5")

			helm("", helmArgs("upgrade", "image=example.com/vllm:v4", "greeting=helm-again")...)
			assert.Equal(t, "helm-again", f.configMapData(t, relName+"-config")["GREETING"])
			helm("", "rollback", relName, "5", "-n", f.namespace, "--wait", "--timeout", "2m")
			assert.Equal(t, "hello", f.configMapData(t, relName+"-config")["GREETING"], "helm rollback to vllmctl's revision 5")

			// vllmctl takes it back, Helm's new revisions included.
			r = f.run(t, "adopt", relName, "-o", "json")
			require.Equal(t, exitcode.OK, r.code, "%s", r)
			revs = f.history(t)
			require.Len(t, revs, 7)
			assert.Equal(t, storage.StatusDeployed, revs[6].Status)
		})
	}
}

// replicaSets are the names of the release's ReplicaSets, oldest first.
func (f *relFixture) replicaSets(t *testing.T) []string {
	t.Helper()
	list, err := f.client.AppsV1().ReplicaSets(f.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + relName})
	require.NoError(t, err)
	items := list.Items
	sort.Slice(items, func(i, j int) bool { return revisionOf(&items[i]) < revisionOf(&items[j]) })
	out := make([]string, len(items))
	for i, rs := range items {
		out[i] = rs.Name
	}
	return out
}

// revisionOf is a ReplicaSet's Deployment revision.
func revisionOf(rs *appsv1.ReplicaSet) int {
	n, _ := strconv.Atoi(rs.Annotations["deployment.kubernetes.io/revision"])
	return n
}

// instancePodUIDs are the UIDs of the release's pods that are not being deleted.
func (f *relFixture) instancePodUIDs(t *testing.T) []string {
	t.Helper()
	list, err := f.client.CoreV1().Pods(f.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + relName})
	require.NoError(t, err)
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, string(p.UID))
		}
	}
	sort.Strings(out)
	return out
}

// managers are an object's field managers, as "NAME (OPERATION)".
func (f *relFixture) managers(t *testing.T, resource, name string) []string {
	t.Helper()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: resource}
	switch resource {
	case "deployments":
		gvr.Group = "apps"
	case "poddisruptionbudgets":
		gvr.Group = "policy"
	}
	dyn, err := dynamic.NewForConfig(f.cfg)
	require.NoError(t, err)
	obj, err := dyn.Resource(gvr).Namespace(f.namespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return managerNames(obj)
}

func managerNames(obj *unstructured.Unstructured) []string {
	var out []string
	for _, m := range obj.GetManagedFields() {
		if m.Subresource == "" {
			out = append(out, m.Manager+" ("+string(m.Operation)+")")
		}
	}
	return out
}

// helmFails runs helm, expects it to fail, and returns its output.
func helmFails(t *testing.T, bin, kubeconfig string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "helm %v: %s", args, out)
	return string(out)
}

// helmRecord writes a Helm record of release name, revision 1, as Helm's
// storage drivers do (a Secret of type helm.sh/release.v1, or a ConfigMap),
// holding manifest; data, when set, replaces the encoded release.
func (f *relFixture) helmRecord(t *testing.T, kind, name, status, manifest, data string) {
	t.Helper()
	rel := &rspb.Release{Name: name, Namespace: f.namespace, Version: 1, Manifest: manifest, Config: map[string]any{"greeting": "hi"},
		Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "crafted", Version: "0.1.0", APIVersion: "v2"}},
		Info:  &rspb.Info{Status: rcommon.Status(status), Description: "Install complete", LastDeployed: time.Now()}}
	if data == "" {
		var err error
		data, err = helmrecords.Encode(rel)
		require.NoError(t, err)
	}
	meta := metav1.ObjectMeta{Name: "sh.helm.release.v1." + name + ".v1",
		Labels: map[string]string{"owner": "helm", "name": name, "status": status, "version": "1"}}
	ctx := context.Background()
	var err error
	if kind == "ConfigMap" {
		_, err = f.client.CoreV1().ConfigMaps(f.namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"release": data}}, metav1.CreateOptions{})
	} else {
		_, err = f.client.CoreV1().Secrets(f.namespace).Create(ctx, &corev1.Secret{ObjectMeta: meta, Type: "helm.sh/release.v1",
			Data: map[string][]byte{"release": []byte(data)}}, metav1.CreateOptions{})
	}
	require.NoError(t, err)
}

// TestAdoptRefuses: a Helm release with an operation in progress (exit 5),
// an unreadable Helm record (exit 6, named) and a release that already has
// vllmctl records (exit 2 unless --force) adopt nothing: no record written,
// no object changed, Helm's records untouched. The ConfigMap driver's
// records adopt as the Secrets' do.
func TestAdoptRefuses(t *testing.T) {
	shareCluster(t, 4)
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: crafted-config\ndata:\n  greeting: hi\n"
	f := newRelFixture(t)
	ctx := context.Background()
	helmOwned := func(name string) int {
		t.Helper()
		s, err := f.client.CoreV1().Secrets(f.namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
		require.NoError(t, err)
		return len(s.Items)
	}
	noRecords := func(name string) {
		t.Helper()
		entries, err := f.store.List(ctx, name)
		require.NoError(t, err)
		assert.Empty(t, entries, "no vllmctl record of %s", name)
	}

	f.helmRecord(t, "Secret", "busy", "pending-upgrade", cm, "")
	r := f.run(t, "adopt", "busy")
	assert.Equal(t, exitcode.InProgress, r.code, "%s", r)
	assert.Contains(t, r.stderr, "revision 1 is pending-upgrade: a Helm operation is in progress")
	noRecords("busy")
	assert.Equal(t, 1, helmOwned("busy"))

	f.helmRecord(t, "Secret", "broken", "deployed", "", "H4sIAAAA-not-base64")
	r = f.run(t, "adopt", "broken")
	assert.Equal(t, exitcode.Cluster, r.code, "%s", r)
	assert.Contains(t, r.stderr, "Helm record Secret "+f.namespace+"/sh.helm.release.v1.broken.v1 is unreadable")
	noRecords("broken")

	r = f.deploy(t)
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	f.helmRecord(t, "Secret", relName, "deployed", cm, "")
	r = f.run(t, "adopt", relName)
	assert.Equal(t, exitcode.Invalid, r.code, "%s", r)
	assert.Contains(t, r.stderr, "already has vllmctl records (revisions [1])")
	assert.Equal(t, 1, helmOwned(relName), "Helm's record untouched")
	revs := f.history(t)
	require.Len(t, revs, 1)
	assert.NotContains(t, revs[0].Description, "Adopted")

	r = f.run(t, "adopt", relName, "--force", "-o", "json")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	requireSchemaValid(t, "adopt", r.stdout)
	revs = f.history(t)
	require.Len(t, revs, 1)
	assert.Equal(t, "Adopted from Helm revision 1: Install complete", revs[0].Description)
	assert.Equal(t, "crafted", revs[0].Chart.Name)
	assert.Equal(t, 0, helmOwned(relName), "Helm's record labelled as adopted")

	// Run again after being interrupted: an adopt killed before it
	// relabelled Helm's records (they still say owner=helm) resumes
	// without --force; a handover killed before it marked vllmctl's record
	// writes its Helm records again.
	f.helmRecord(t, "Secret", "resume", "deployed", cm, "")
	r = f.run(t, "adopt", "resume")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	_, err := f.client.CoreV1().Secrets(f.namespace).Patch(ctx, "sh.helm.release.v1.resume.v1", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"owner":"helm","vllmctl.io/adopted":null}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	r = f.run(t, "adopt", "resume")
	require.Equal(t, exitcode.OK, r.code, "an interrupted adopt resumes\n%s", r)
	assert.Equal(t, 0, helmOwned("resume"))
	r = f.run(t, "handover", "resume", "--to", "helm")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	rec, err := f.store.Get(ctx, "resume", 1)
	require.NoError(t, err)
	require.Equal(t, storage.StatusHandedOver, rec.Status)
	rec.Status = storage.StatusDeployed
	require.NoError(t, f.store.Update(ctx, rec))
	r = f.run(t, "handover", "resume", "--to", "helm")
	require.Equal(t, exitcode.OK, r.code, "an interrupted handover runs again\n%s", r)
	assert.Equal(t, 1, helmOwned("resume"))

	f.helmRecord(t, "ConfigMap", "viacm", "deployed", "", "")
	r = f.run(t, "adopt", "viacm", "--helm-driver", "configmap", "--remove-helm-records", "-o", "json")
	require.Equal(t, exitcode.OK, r.code, "%s", r)
	requireSchemaValid(t, "adopt", r.stdout)
	entries, err := f.store.List(ctx, "viacm")
	require.NoError(t, err)
	assert.Len(t, entries, 1)
	_, err = f.client.CoreV1().ConfigMaps(f.namespace).Get(ctx, "sh.helm.release.v1.viacm.v1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "--remove-helm-records: %v", err)
}
