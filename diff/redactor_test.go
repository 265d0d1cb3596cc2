package diff

import (
	"encoding/base64"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vllmctl/vllmctl/internal/exitcode"
)

type codedErr struct{}

func (codedErr) Error() string { return "login with hf_SuperSecretToken123 refused" }
func (codedErr) ExitCode() int { return 3 }

func TestRedactor(t *testing.T) {
	const token = "hf_SuperSecretToken123"
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "creds"},
		"data":       map[string]any{"token": base64.StdEncoding.EncodeToString([]byte(token)), "flag": base64.StdEncoding.EncodeToString([]byte("true"))},
		"stringData": map[string]any{"password": "correct-horse-battery"},
	}}
	r := NewRedactor()
	r.AddObjects(secret)

	for _, tc := range []struct{ name, in, want string }{
		{"no value", "deployment/chat: 2 of 3 updated", "deployment/chat: 2 of 3 updated"},
		{"decoded value", "Error: 401 for token " + token, "Error: 401 for token " + Redacted},
		{"encoded value", "data: " + base64.StdEncoding.EncodeToString([]byte(token)), "data: " + Redacted},
		{"stringData value", "password=correct-horse-battery", "password=" + Redacted},
		{"a value cut short is withheld", "token hf_SuperSecretTok…", Withheld},
		{"short values are left alone", "ready: true", "ready: true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, r.Line(tc.in))
		})
	}

	err := r.Err(codedErr{})
	require.Error(t, err)
	assert.Equal(t, "login with "+Redacted+" refused", err.Error())
	assert.Equal(t, 3, exitcode.Of(err), "the exit code survives")
	var ce codedErr
	assert.False(t, errors.As(err, &ce), "the original error cannot be reached")

	plain := errors.New("nothing secret")
	assert.Same(t, plain, r.Err(plain), "an error without a value is returned as is")

	var none *Redactor
	assert.Equal(t, "x "+token, none.Line("x "+token), "the nil Redactor changes nothing")
	none.AddObjects(secret)
}
