package charts

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckNumbers(t *testing.T) {
	cases := []struct {
		name, manifest string
		// want is the field path named, "" for no error.
		want, msg string
	}{
		{name: "in range", manifest: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: c\n        ports: [{containerPort: 8000}]\n"},
		{name: "int32 overflow", manifest: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: 4294967297\n",
			want: "spec.replicas", msg: "4294967297 is out of range"},
		{name: "values number too big for int64", manifest: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: -9223372036854775808\n",
			want: "spec.replicas", msg: "a number too big for a 64-bit integer"},
		{name: "negative replicas", manifest: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: -1\n",
			want: "spec.replicas", msg: "must not be negative"},
		{name: "port beyond int32 in a list", manifest: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports:\n  - port: 80\n  - port: 9999999999\n",
			want: "spec.ports.[1].port", msg: "9999999999 is out of range"},
		{name: "int-or-string takes a number", manifest: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  strategy:\n    rollingUpdate: {maxSurge: 1, maxUnavailable: 25%}\n"},
		{name: "unknown field left to the server", manifest: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicaz: 99999999999\n"},
		{name: "custom resource left to its server", manifest: "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t}\nspec:\n  replicas: 99999999999\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := parseDocument(tc.manifest)
			require.NoError(t, err)
			err = CheckNumbers(objs)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tc.want, ie.Path)
			assert.Contains(t, ie.Error(), tc.msg)
			assert.Contains(t, ie.Error(), objs[0].GetKind()+" "+objs[0].GetName(), "names the object")
		})
	}
}
