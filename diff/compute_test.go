package diff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vllmctl/vllmctl/internal/object"
)

func computeScenario(t *testing.T, sc scenario) *Report {
	t.Helper()
	rep, err := Compute(context.Background(), fakeCluster(t, sc.live, nil), sc.rendered,
		Options{Release: "web", Namespace: "ns1", Previous: sc.previous})
	require.NoError(t, err)
	return rep
}

// renderings returns every rendering of rep by name.
func renderings(t *testing.T, rep *Report) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, write := range map[string]func(*bytes.Buffer) error{
		"text":       func(b *bytes.Buffer) error { return rep.WriteText(b, false) },
		"text-color": func(b *bytes.Buffer) error { return rep.WriteText(b, true) },
		"json":       func(b *bytes.Buffer) error { return rep.WriteJSON(b) },
		"yaml":       func(b *bytes.Buffer) error { return rep.WriteYAML(b) },
	} {
		var b bytes.Buffer
		require.NoError(t, write(&b), name)
		out[name] = b.Bytes()
	}
	return out
}

func TestComputeActionsAndOrder(t *testing.T) {
	rep := computeScenario(t, newScenario(t))
	var got []string
	for _, o := range rep.Objects {
		got = append(got, o.Action.Symbol()+" "+o.Object)
	}
	assert.Equal(t, []string{
		"~ v1 Secret ns1/web-creds",
		"~ v1 ConfigMap ns1/web-config",
		"+ v1 ConfigMap ns1/web-new",
		"~ apps/v1 Deployment ns1/web",
		"- policy/v1 PodDisruptionBudget ns1/web",
	}, got, "the unchanged Service is left out, the adopted ConfigMap and the Namespace are not pruned, prunes come last")
	assert.Equal(t, Summary{Change: 3, Create: 1, Prune: 1}, rep.Summary)
	assert.Equal(t, "3 to change, 1 to create, 1 to prune", rep.Summary.String())
	assert.False(t, rep.Empty())

	dep := rep.Objects[3]
	require.NotNil(t, dep.Rollout, "the pod template changes")
	assert.Equal(t, Rollout{Strategy: "RollingUpdate", Pods: 2, MaxSurge: 1, MaxUnavailable: 0, MaxSurgeSpec: "25%",
		GPUsPerPod: 1, ExtraGPUs: 1}, *dep.Rollout)
	assert.NotContains(t, dep.Diff, "status", "status is noise")
	assert.NotContains(t, dep.Diff, "deployment.kubernetes.io/revision")
	assert.NotContains(t, dep.Diff, "managedFields")
	assert.NotContains(t, dep.Diff, "resourceVersion")
	for _, line := range strings.Split(dep.Diff, "\n") {
		if strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-") {
			assert.NotContains(t, line, "imagePullPolicy", "defaults are no difference")
			assert.NotContains(t, line, "generation")
		}
	}
	assert.Contains(t, dep.Diff, "-        image: vllm/vllm-openai:v0.11.0\n+        image: vllm/vllm-openai:v0.11.1\n")

	created := rep.Objects[2]
	assert.True(t, strings.HasPrefix(created.Diff, "--- /dev/null\n+++ dry-run\n@@ -0,0 +1,"), created.Diff)
	assert.NotContains(t, created.Diff, "uid", "server-set metadata is noise")
	pruned := rep.Objects[4]
	assert.True(t, strings.HasPrefix(pruned.Diff, "--- live\n+++ /dev/null\n@@ -1,"), pruned.Diff)
}

func TestRenderersGolden(t *testing.T) {
	cases := []struct {
		name string
		rep  func(t *testing.T) *Report
	}{
		{"changes", func(t *testing.T) *Report { return computeScenario(t, newScenario(t)) }},
		{"none", func(t *testing.T) *Report {
			sc := newScenario(t)
			return computeScenario(t, scenario{rendered: sc.live[1:2], live: sc.live, previous: sc.live[1:2]})
		}},
		{"install", func(t *testing.T) *Report {
			sc := newScenario(t)
			return computeScenario(t, scenario{rendered: sc.rendered})
		}},
		{"conflict", func(t *testing.T) *Report { return computeConflict(t) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for format, got := range renderings(t, tc.rep(t)) {
				ext := map[string]string{"text": "txt", "text-color": "ansi", "json": "json", "yaml": "yaml"}[format]
				assertGolden(t, tc.name+"."+ext+".golden", got)
			}
		})
	}
}

func TestNoChangesIsEmpty(t *testing.T) {
	sc := newScenario(t)
	// The live Deployment and ConfigMap, rendered again: the dry run equals
	// the live objects once the noise is stripped.
	rep := computeScenario(t, scenario{rendered: []*unstructured.Unstructured{sc.rendered[3], sc.live[1]}, live: sc.live})
	assert.True(t, rep.Empty())
	assert.Equal(t, "no changes", rep.Summary.String())
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b, false))
	assert.Equal(t, "no changes\n", b.String())
	b.Reset()
	require.NoError(t, rep.WriteJSON(&b))
	assert.JSONEq(t, `{"objects":[],"summary":{"change":0,"create":0,"prune":0}}`, b.String())
}

func TestInstallIsAllCreate(t *testing.T) {
	sc := newScenario(t)
	rep := computeScenario(t, scenario{rendered: sc.rendered})
	assert.Equal(t, Summary{Create: len(sc.rendered)}, rep.Summary)
	for _, o := range rep.Objects {
		assert.Equal(t, ActionCreate, o.Action, o.Object)
		assert.Nil(t, o.Rollout, "a create rolls nothing out: %s", o.Object)
		for _, line := range strings.Split(strings.TrimSuffix(o.Diff, "\n"), "\n")[2:] {
			if !strings.HasPrefix(line, "@@") {
				assert.True(t, strings.HasPrefix(line, "+"), "%s: all added: %q", o.Object, line)
			}
		}
		assert.NotContains(t, o.Diff, "10.0.0.0", "the dry run's placeholder cluster IP is noise")
	}
}

// TestSecretValuesNeverShown checks every rendering byte for byte: no value
// of any Secret appears, in any encoding.
func TestSecretValuesNeverShown(t *testing.T) {
	sc := newScenario(t)
	reports := map[string]*Report{
		"upgrade": computeScenario(t, sc),
		"install": computeScenario(t, scenario{rendered: sc.rendered}),
		"prune": computeScenario(t, scenario{
			rendered: sc.rendered[1:2], live: sc.live, previous: sc.previous,
		}),
	}
	secrets := []string{liveToken, renderedToken, liveOld, renderedExtra, sharedUser}
	for name, rep := range reports {
		for format, raw := range renderings(t, rep) {
			for _, s := range secrets {
				assert.False(t, bytes.Contains(raw, []byte(s)), "%s %s shows %q", name, format, s)
				assert.False(t, bytes.Contains(raw, []byte(b64(s))), "%s %s shows %q base64-encoded", name, format, s)
			}
			assert.NotContains(t, string(raw), "~~vllmctl-mask", "%s %s: sentinels are cut", name, format)
		}
	}

	d := reports["upgrade"].Objects[0]
	require.Equal(t, "v1 Secret ns1/web-creds", d.Object)
	for _, want := range []string{
		"-  old: (removed)\n",
		"-  token: (changed)\n",
		"+  extra: (added)\n",
		"+  token: (changed)\n",
		"   user: (unchanged)\n",
	} {
		assert.Contains(t, d.Diff, want)
	}
	assert.NotContains(t, d.Diff, "last-applied-configuration")
	for _, o := range reports["install"].Objects {
		if o.Ref.Kind == "Secret" {
			assert.Contains(t, o.Diff, "+  token: (added)\n")
		}
	}
}

func TestStringDataIsMaskedToo(t *testing.T) {
	rendered := obj(t, `apiVersion: v1
kind: Secret
metadata: {name: s, namespace: ns1}
stringData:
  password: plain-text-Zz9Yy8Xx
`)
	// Unvalidated: the namespace would be created, the object is shown as
	// sent, stringData and all.
	c := fakeCluster(t, nil, func(_ context.Context, objs []*unstructured.Unstructured) ([]DryRunResult, error) {
		return []DryRunResult{{Object: objs[0].DeepCopy(), Unvalidated: true}}, nil
	})
	rep, err := Compute(context.Background(), c, []*unstructured.Unstructured{rendered}, Options{Release: "web", Namespace: "ns1"})
	require.NoError(t, err)
	require.Len(t, rep.Objects, 1)
	assert.Contains(t, rep.Objects[0].Diff, "+  password: (added)\n")
	assert.NotContains(t, rep.Objects[0].Diff, "plain-text")
	assert.NotContains(t, rep.Objects[0].Diff, "stringData")
}

func TestErrorsNeverEchoSecretValues(t *testing.T) {
	sc := newScenario(t)
	echo := func(msg string) DryRunFunc {
		return func(context.Context, []*unstructured.Unstructured) ([]DryRunResult, error) {
			status := apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "web-creds", nil)
			status.ErrStatus.Message = msg
			status.ErrStatus.Details.Causes = []metav1.StatusCause{{Field: "data[token]", Message: msg}}
			return nil, fmt.Errorf("apply v1 Secret ns1/web-creds: %w", status)
		}
	}
	cases := []struct {
		name   string
		dryRun DryRunFunc
		// redacted: values replaced in the message; withheld: the
		// message replaced; neither: the original error.
		redacted, withheld bool
	}{
		{"whole value", echo(`Secret "web-creds" is invalid: data[token]: Invalid value: "` + renderedToken + `"`), true, false},
		{"base64 value", echo(`invalid: "` + b64(renderedToken) + `"`), true, false},
		{"value cut short", echo(`Invalid value: "` + renderedToken[:9] + `..."`), false, true},
		{"whole value and a cut one", echo(`"` + renderedToken + `" and "` + liveOld[:10] + `"`), false, true},
		{"no value", echo(`Secret "web-creds" is invalid: metadata.name: too long`), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compute(context.Background(), fakeCluster(t, sc.live, tc.dryRun), sc.rendered,
				Options{Release: "web", Namespace: "ns1", Previous: sc.previous})
			require.Error(t, err)
			msg := err.Error()
			if !tc.redacted && !tc.withheld {
				assert.Contains(t, msg, "too long")
				assert.True(t, apierrors.IsInvalid(err), "the original error, unwrappable")
				return
			}
			for _, v := range []string{renderedToken, liveOld} {
				assert.NotContains(t, msg, v[:gramLen])
				assert.NotContains(t, msg, b64(v)[:gramLen])
			}
			var red *RedactedError
			require.ErrorAs(t, err, &red)
			if tc.redacted {
				assert.Contains(t, msg, Redacted)
				assert.True(t, strings.HasPrefix(msg, "apply v1 Secret ns1/web-creds: "), "the rest of the message stays: %s", msg)
			} else {
				assert.Contains(t, msg, "v1 Secret ns1/web-creds")
				assert.Contains(t, msg, "reason Invalid")
				assert.Contains(t, msg, "HTTP 422")
				assert.Contains(t, msg, "data[token]")
				assert.Contains(t, msg, "withheld")
			}
			var ec interface{ ExitCode() int }
			require.ErrorAs(t, err, &ec)
			assert.Equal(t, 6, ec.ExitCode(), "an API error: the cluster refused")
			assert.False(t, errors.As(err, new(apierrors.APIStatus)), "the server's message cannot be reached")
		})
	}
}

func TestRedactKeepsExitCodes(t *testing.T) {
	values := []string{"s3cr3t-value-123"}
	coded := &RedactedError{code: 5}
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"API error", fmt.Errorf("x s3cr3t-value-123: %w", apierrors.NewBadRequest("bad")), 6},
		{"own exit code", fmt.Errorf("x s3cr3t-value-123: %w", coded), 5},
		{"plain", errors.New("x s3cr3t-value-123"), 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := redact(tc.err, values, nil)
			var red *RedactedError
			require.ErrorAs(t, err, &red)
			assert.Equal(t, tc.want, red.ExitCode())
			assert.Equal(t, "x (redacted)", err.Error()[:len("x (redacted)")])
		})
	}
	plain := errors.New("nothing secret")
	assert.Same(t, plain, redact(plain, values, nil), "an error without values is returned as is")
	short := redact(errors.New("the value is abc"), []string{"abc"}, nil)
	assert.NotContains(t, short.Error(), "abc", "short values are withheld, not replaced")
}

func TestComputeGetErrorNamesTheObject(t *testing.T) {
	sc := newScenario(t)
	c := fakeCluster(t, sc.live, nil)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "web-config", errors.New("no"))
	c.Get = func(_ context.Context, obj *unstructured.Unstructured, _ string) (*unstructured.Unstructured, error) {
		return nil, fmt.Errorf("get %s: %w", object.RefOf(obj), forbidden)
	}
	_, err := Compute(context.Background(), c, sc.rendered[1:2], Options{Release: "web", Namespace: "ns1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "get v1 ConfigMap ns1/web-config")
	assert.True(t, apierrors.IsForbidden(err), "API errors stay API errors (exit code 6)")
}

func TestComputeRequiresRelease(t *testing.T) {
	_, err := Compute(context.Background(), fakeCluster(t, nil, nil), nil, Options{})
	require.Error(t, err)
}

func TestJSONDocumentShape(t *testing.T) {
	rep := computeScenario(t, newScenario(t))
	var b bytes.Buffer
	require.NoError(t, rep.WriteJSON(&b))
	var doc struct {
		Objects []map[string]any `json:"objects"`
		Summary map[string]int   `json:"summary"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
	assert.Equal(t, map[string]int{"change": 3, "create": 1, "prune": 1}, doc.Summary)
	require.Len(t, doc.Objects, 5)
	for _, o := range doc.Objects {
		assert.Contains(t, o, "object")
		assert.Contains(t, o, "action")
		assert.Contains(t, o, "diff")
	}
	assert.Equal(t, "prune", doc.Objects[4]["action"])
	assert.Contains(t, doc.Objects[3], "rollout")
}

// conflictDryRun is mergeDryRun over live that reports conflicts for the
// objects named in conflicts, as cluster.NewDiffCluster does for a dry run
// it had to repeat with force.
func conflictDryRun(live []*unstructured.Unstructured, conflicts map[string][]FieldConflict) DryRunFunc {
	dry := mergeDryRun(live, "ns1")
	return func(ctx context.Context, objs []*unstructured.Unstructured) ([]DryRunResult, error) {
		out, err := dry(ctx, objs)
		for i := range out {
			out[i].Conflicts = conflicts[out[i].Object.GetName()]
		}
		return out, err
	}
}

// computeConflict: the Deployment was scaled to 3 and its image set by
// hand (other field managers); the chart says 2 replicas and the image
// v0.11.0 as deployed.
func computeConflict(t *testing.T) *Report {
	t.Helper()
	live := obj(t, deploymentYAML("vllm/vllm-openai:v0.11.0-debug", 3, true))
	rendered := obj(t, deploymentYAML("vllm/vllm-openai:v0.11.0", 2, false))
	c := fakeCluster(t, []*unstructured.Unstructured{live}, conflictDryRun([]*unstructured.Unstructured{live}, map[string][]FieldConflict{
		"web": {
			{Field: ".spec.replicas", Manager: "kubectl-scale", Subresource: "scale"},
			{Field: `.spec.template.spec.containers[name="server"].image`, Manager: "kubectl-set"},
		},
	}))
	rep, err := Compute(context.Background(), c, []*unstructured.Unstructured{rendered}, Options{Release: "web", Namespace: "ns1"})
	require.NoError(t, err)
	return rep
}

func TestConflictsShowTheDriftAndCount(t *testing.T) {
	rep := computeConflict(t)
	require.Len(t, rep.Objects, 1)
	o := rep.Objects[0]
	assert.Equal(t, ActionChange, o.Action)
	assert.Equal(t, Summary{Change: 1, Conflicts: 1}, rep.Summary)
	assert.False(t, rep.Empty(), "a conflict is a change")
	assert.Contains(t, o.Diff, "-  replicas: 3\n+  replicas: 2\n")
	assert.Contains(t, o.Diff, "-        image: vllm/vllm-openai:v0.11.0-debug\n+        image: vllm/vllm-openai:v0.11.0\n")
	assert.Equal(t, `conflict: .spec.replicas owned by "kubectl-scale"; .spec.template.spec.containers[name="server"].image owned by "kubectl-set"; deploy needs --force-conflicts`, o.Note())
	var b bytes.Buffer
	require.NoError(t, rep.WriteText(&b, false))
	assert.True(t, strings.HasPrefix(b.String(), "~ apps/v1 Deployment ns1/web ("+o.Note()+")\n"), b.String())
	assert.True(t, strings.HasSuffix(b.String(), "\n1 to change, 0 to create, 0 to prune, 1 with field-manager conflicts (deploy needs --force-conflicts)\n"), b.String())
}

func TestConflictWithoutVisibleDriftStillCounts(t *testing.T) {
	// The other manager owns the field with the value the chart sets now
	// (say it was changed back by hand): the diff is empty, but a deploy
	// without --force-conflicts would still be refused.
	sc := newScenario(t)
	cm := sc.live[1]
	c := fakeCluster(t, sc.live, conflictDryRun(sc.live, map[string][]FieldConflict{
		"web-config": {{Field: ".data.model", Manager: "kubectl-edit"}, {Field: ".data.port", Manager: "kubectl-edit"}},
	}))
	rep, err := Compute(context.Background(), c, []*unstructured.Unstructured{cm}, Options{Release: "web", Namespace: "ns1"})
	require.NoError(t, err)
	require.Len(t, rep.Objects, 1)
	assert.Empty(t, rep.Objects[0].Diff)
	assert.Equal(t, `conflict: .data.model, .data.port owned by "kubectl-edit"; deploy needs --force-conflicts`, rep.Objects[0].Note())
	assert.Equal(t, Summary{Change: 1, Conflicts: 1}, rep.Summary)
}

func TestNoteWithoutConflicts(t *testing.T) {
	assert.Empty(t, ObjectDiff{}.Note())
	assert.Equal(t, "3 to change, 1 to create, 1 to prune", Summary{Change: 3, Create: 1, Prune: 1}.String())
}
