//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// applyRBAC creates the objects of deploy/rbac/FILE in namespace ns
// (NAMESPACE replaced), deleting the cluster-scoped ones at the end.
func applyRBAC(t *testing.T, f *relFixture, file, ns string) {
	t.Helper()
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join("..", "deploy", "rbac", file))
	require.NoError(t, err)
	for _, doc := range strings.Split(strings.ReplaceAll(string(data), "NAMESPACE", ns), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		require.NoError(t, err, "%s", file)
		var cerr error
		switch o := obj.(type) {
		case *rbacv1.Role:
			_, cerr = f.client.RbacV1().Roles(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, cerr = f.client.RbacV1().RoleBindings(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, cerr = f.client.CoreV1().ServiceAccounts(ns).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, cerr = f.client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(cerr) {
				_, cerr = f.client.RbacV1().ClusterRoles().Update(ctx, o, metav1.UpdateOptions{})
			}
		case *rbacv1.ClusterRoleBinding:
			_, cerr = f.client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() {
				_ = f.client.RbacV1().ClusterRoleBindings().Delete(context.Background(), o.Name, metav1.DeleteOptions{})
			})
		default:
			t.Fatalf("%s: unexpected %T", file, runtime.Object(obj))
		}
		require.NoError(t, cerr, "%s", file)
	}
}

// Least privilege. The Role and the preflight ClusterRole of
// deploy/rbac are enough for every release command run as a CI service
// account; an account without them gets exit 6 naming the verb and the
// resource.
func TestLeastPrivilegeServiceAccount(t *testing.T) {
	f := newRelFixture(t)
	applyRBAC(t, f, "role.yaml", f.namespace)
	applyRBAC(t, f, "clusterrole.yaml", f.namespace)
	applyRBAC(t, f, "bindings.yaml", f.namespace)
	as := "system:serviceaccount:" + f.namespace + ":vllmctl-ci"

	run := func(args ...string) relRun {
		t.Helper()
		return f.run(t, append(args, "--as", as)...)
	}
	deploy := func(extra ...string) relRun {
		t.Helper()
		return run(append(append([]string{"deploy", relName, "vllm", "--progress", "plain", "--timeout", "2m"}, reconcileValues...), extra...)...)
	}
	r := deploy()
	require.Equal(t, 0, r.code, "install as the CI account: %s", r)
	r = run(append([]string{"diff", relName, "vllm"}, append(reconcileValues, "--set", "image.tag=v0.11.1")...)...)
	assert.Equal(t, 1, r.code, "diff as the CI account: %s", r)
	r = deploy("--set", "image.tag=v0.11.1")
	require.Equal(t, 0, r.code, "upgrade: %s", r)
	for _, args := range [][]string{
		{"history", relName}, {"status", relName}, {"wait", relName, "--timeout", "1m"},
		{"rollback", relName, "--timeout", "2m"}, {"list"}, {"uninstall", relName},
	} {
		r := run(args...)
		assert.Equal(t, 0, r.code, "%v as the CI account: %s", args, r)
	}

	// adopt and handover: Helm's records are Secrets of the namespace.
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: crafted-config\ndata:\n  greeting: hi\n"
	_, err := f.client.CoreV1().ConfigMaps(f.namespace).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "crafted-config", Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"},
			Annotations: map[string]string{"meta.helm.sh/release-name": "crafted", "meta.helm.sh/release-namespace": f.namespace}},
		Data: map[string]string{"greeting": "hi"}}, metav1.CreateOptions{FieldManager: "helm"})
	require.NoError(t, err)
	f.helmRecord(t, "Secret", "crafted", "deployed", cm, "")
	for _, args := range [][]string{{"adopt", "crafted"}, {"handover", "crafted", "--to", "helm"}} {
		r := run(args...)
		assert.Equal(t, 0, r.code, "%v as the CI account: %s", args, r)
	}

	// Without the Role: refused by the cluster, exit 6, verb and resource
	// named.
	nobody := "system:serviceaccount:" + f.namespace + ":nobody"
	r = f.run(t, append(append([]string{"deploy", relName, "vllm", "--progress", "plain"}, reconcileValues...), "--as", nobody)...)
	assert.Equal(t, 6, r.code, "%s", r)
	assert.Regexp(t, `cannot (list|get|create|patch) resource "(secrets|nodes|pods)"`, r.stderr)
	r = f.run(t, "history", relName, "--as", nobody)
	assert.Equal(t, 6, r.code, "%s", r)
	assert.Contains(t, r.stderr, `cannot list resource "secrets"`)
}
