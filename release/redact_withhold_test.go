package release_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vllmctl/vllmctl/release"
)

func TestWithholdSecretValues(t *testing.T) {
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k:   spaced\n"
	out, err := release.WithholdSecretValues(cm)
	require.NoError(t, err)
	assert.Equal(t, cm, out, "no Secret: byte for byte")

	out, err = release.WithholdSecretValues(cm + "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n" +
		"data:\n  token: aGZfc2VjcmV0\nstringData:\n  pw: hunter22\n---\napiVersion: example.com/v1\nkind: Secret\n" +
		"metadata:\n  name: other\ndata:\n  kept: yes-not-core\n")
	require.NoError(t, err)
	assert.NotContains(t, out, "aGZfc2VjcmV0")
	assert.NotContains(t, out, "hunter22")
	assert.Contains(t, out, "token: (redacted)")
	assert.Contains(t, out, "pw: (redacted)")
	assert.Contains(t, out, "kept: yes-not-core", "only core Secrets")
	assert.Contains(t, out, "k: spaced")

	_, err = release.WithholdSecretValues("kind: [")
	require.Error(t, err)
}
