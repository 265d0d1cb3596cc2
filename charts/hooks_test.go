package charts

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/internal/owner"
)

func hookDoc(kind, name, hook, weight, policy string) string {
	s := "apiVersion: v1\nkind: " + kind + "\nmetadata:\n  name: " + name + "\n  annotations:\n    helm.sh/hook: " + hook + "\n"
	if weight != "" {
		s += "    helm.sh/hook-weight: " + weight + "\n"
	}
	if policy != "" {
		s += "    helm.sh/hook-delete-policy: " + policy + "\n"
	}
	return s
}

// TestRenderTakesOutHooks: objects annotated helm.sh/hook are hooks, not
// objects of the release (nor of its manifest), read as Helm reads them.
func TestRenderTakesOutHooks(t *testing.T) {
	ch, err := Load(writeChart(t, map[string]string{
		"templates/cm.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations:\n    other: x\n",
		"templates/migrate.yaml": hookDoc("Pod", "migrate", "pre-install, Pre-Upgrade", `"-5"`, "hook-succeeded, hook-failed"),
		"templates/seed.yaml":    hookDoc("ConfigMap", "seed", "post-install", "abc", ""),
		"templates/tests/t.yaml": hookDoc("Pod", "test-conn", "test", `"1"`, ""),
		"templates/old.yaml":     hookDoc("Pod", "legacy", "test-success", "", ""),
		"templates/crd.yaml":     hookDoc("ConfigMap", "odd", "crd-install", "", ""),
	}))
	require.NoError(t, err)
	r, err := Render(ch, RenderOptions{ReleaseName: "r", Namespace: "ns"})
	require.NoError(t, err)
	require.Len(t, r.Objects, 1)
	assert.Equal(t, "cm", r.Objects[0].GetName())
	assert.NotContains(t, r.Manifest, "helm.sh/hook")

	byName := map[string]Hook{}
	var order []string
	for _, h := range r.Hooks {
		byName[h.Object.GetName()] = h
		order = append(order, h.Object.GetKind()+"/"+h.Object.GetName())
		assert.True(t, owner.Owns(h.Object, "r", "ns"), "hooks are marked like objects")
	}
	assert.Equal(t, []string{"ConfigMap/seed", "Pod/migrate", "Pod/legacy", "Pod/test-conn"}, order, "by kind, then template order")
	assert.Equal(t, []HookEvent{HookPreInstall, HookPreUpgrade}, byName["migrate"].Events)
	assert.Equal(t, -5, byName["migrate"].Weight)
	assert.Equal(t, []HookDeletePolicy{HookSucceeded, HookFailed}, byName["migrate"].DeletePolicies)
	assert.Equal(t, "c/templates/migrate.yaml", byName["migrate"].Path)
	assert.Equal(t, 0, byName["seed"].Weight, "a weight that is not a number is 0")
	assert.Equal(t, []HookDeletePolicy{HookBeforeHookCreation}, byName["seed"].DeletePolicies, "Helm's default")
	assert.Equal(t, []HookEvent{HookTest}, byName["legacy"].Events, "test-success is test")
	assert.NotContains(t, byName, "odd", "an unknown hook event: left out, as Helm does")
	assert.Contains(t, r.Warnings, `ConfigMap odd (c/templates/crd.yaml): skipped: unknown hook "crd-install"`)

	var tests []string
	for _, h := range HooksFor(r.Hooks, HookTest) {
		tests = append(tests, h.Object.GetName())
	}
	assert.Equal(t, []string{"legacy", "test-conn"}, tests, "by weight, then name")
}

// TestRenderRefusesMetadataThatIsNotStrings: an unquoted number as an
// annotation (a hook weight, say) is refused naming the object and key,
// as Kubernetes would refuse it, not read as no annotations.
func TestRenderRefusesMetadataThatIsNotStrings(t *testing.T) {
	for _, tc := range []struct{ doc, path string }{
		{hookDoc("Pod", "migrate", "pre-install", "-5", ""), "metadata.annotations.helm.sh/hook-weight"},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels:\n    enabled: true\n", "metadata.labels.enabled"},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels: [a]\n", "metadata.labels"},
	} {
		ch, err := Load(writeChart(t, map[string]string{"templates/x.yaml": tc.doc}))
		require.NoError(t, err)
		_, err = Render(ch, RenderOptions{ReleaseName: "r", Namespace: "ns"})
		var ie *InputError
		require.ErrorAs(t, err, &ie)
		assert.Equal(t, tc.path, ie.Path)
		assert.Contains(t, err.Error(), tc.path)
	}
}
