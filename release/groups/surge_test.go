package groups

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const groupYAML = `
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: chat-g0
  labels: {app: chat, vllmctl.io/group: "0", vllmctl.io/release: chat}
spec:
  replicas: 2
  serviceName: chat-nodes
  selector:
    matchLabels: {app: chat, vllmctl.io/group: "0"}
  template:
    metadata:
      labels: {app: chat, vllmctl.io/group: "0"}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels: {app: chat, vllmctl.io/group: "0"}
      containers:
      - name: server
        args: ["--nnodes", "2", "--master-addr", "chat-g0-0.chat-nodes.ml.svc", "--other", "xchat-g0-0.keep", "--port", "8000"]
        env:
        - {name: LEADER, value: "chat-g0-1.chat-nodes.ml.svc"}
        - {name: REPLICAS, value: "2"}
`

func TestSurgeCopy(t *testing.T) {
	g := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(groupYAML), &g.Object))
	c, err := SurgeCopy(g)
	require.NoError(t, err)
	assert.Equal(t, "chat-g0-surge", c.GetName())
	assert.Equal(t, "true", c.GetLabels()[SurgeLabel])
	assert.Equal(t, "0-surge", c.GetLabels()[Label])
	assert.Equal(t, "chat", c.GetLabels()["vllmctl.io/release"], "still the release's")
	sel, _, _ := unstructured.NestedStringMap(c.Object, "spec", "selector", "matchLabels")
	assert.Equal(t, map[string]string{"app": "chat", Label: "0-surge"}, sel, "never selects the group's own pods")
	tl, _, _ := unstructured.NestedStringMap(c.Object, "spec", "template", "metadata", "labels")
	assert.Equal(t, "0-surge", tl[Label])
	out, err := yaml.Marshal(c.Object)
	require.NoError(t, err)
	s := string(out)
	assert.Contains(t, s, "chat-g0-surge-0.chat-nodes.ml.svc", "the leader address is the copy's leader")
	assert.Contains(t, s, "chat-g0-surge-1.chat-nodes.ml.svc")
	assert.Contains(t, s, "xchat-g0-0.keep", "another name that merely ends alike is kept")
	assert.Equal(t, 4, strings.Count(s, "vllmctl.io/group: 0-surge"), "labels, selector, pod labels, anti-affinity:\n%s", s)
	assert.NotContains(t, s, `vllmctl.io/group: "0"`)
	aff, _, _ := unstructured.NestedSlice(c.Object, "spec", "template", "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
	require.Len(t, aff, 1)
	ml, _, _ := unstructured.NestedStringMap(aff[0].(map[string]any), "labelSelector", "matchLabels")
	assert.Equal(t, "0-surge", ml[Label], "one pod per node among the copy's pods")
	// The original is untouched.
	assert.Equal(t, "chat-g0", g.GetName())
	assert.Equal(t, "0", g.GetLabels()[Label])

	long := g.DeepCopy()
	long.SetName(strings.Repeat("a", 47))
	_, err = SurgeCopy(long)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "longer than 52")
}
