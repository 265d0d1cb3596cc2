package diff

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

type inner struct {
	Message string
	Lines   []string
}

type document struct {
	Name     string `redact:"keep"`
	Message  string
	Status   kind
	Inner    *inner
	Items    []inner
	Values   map[string]any
	Kept     map[string]any `redact:"keep"`
	Any      any
	When     time.Time
	Bytes    []byte
	Count    int
	private  string
	Children []*document
}

type kind string

func TestRedactCopy(t *testing.T) {
	const token = "hf_SecretToken<&>9"
	red := NewRedactor()
	red.AddValues(token, "12345678")
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	doc := document{
		Name:     "web " + token,
		Message:  "401 for " + token,
		Status:   kind(token),
		Inner:    &inner{Message: "line one\nusing " + token + "\nline three", Lines: []string{"a", token}},
		Items:    []inner{{Message: token}},
		Values:   map[string]any{"token": token, "pin": 12345678, "pinf": float64(12345678), "other": 42, "nested": []any{map[string]any{"k": token}}},
		Kept:     map[string]any{"token": token},
		Any:      token,
		When:     now,
		Bytes:    []byte(token),
		Count:    7,
		private:  token,
		Children: []*document{{Message: token}, nil},
	}
	out := RedactCopy(red, doc)

	assert.Equal(t, "web "+token, out.Name, "keep")
	assert.Equal(t, "401 for (redacted)", out.Message)
	assert.Equal(t, kind("(redacted)"), out.Status, "named string types too")
	assert.Equal(t, "line one\nusing (redacted)\nline three", out.Inner.Message, "line by line")
	assert.Equal(t, []string{"a", "(redacted)"}, out.Inner.Lines)
	assert.Equal(t, "(redacted)", out.Items[0].Message)
	assert.Equal(t, "(redacted)", out.Values["token"])
	assert.Equal(t, "(redacted)", out.Values["pin"], "a number quoted into a Secret")
	assert.Equal(t, "(redacted)", out.Values["pinf"])
	assert.Equal(t, 42, out.Values["other"])
	assert.Equal(t, "(redacted)", out.Values["nested"].([]any)[0].(map[string]any)["k"])
	assert.Equal(t, token, out.Kept["token"])
	assert.Equal(t, "(redacted)", out.Any)
	assert.Equal(t, now, out.When)
	assert.Equal(t, 7, out.Count)
	assert.Equal(t, "(redacted)", out.Children[0].Message)
	assert.Nil(t, out.Children[1])

	// The original is untouched.
	assert.Equal(t, "401 for "+token, doc.Message)
	assert.Equal(t, token, doc.Inner.Lines[1])
	assert.Equal(t, token, doc.Values["token"])
	assert.Equal(t, 12345678, doc.Values["pin"])
	assert.Equal(t, token, doc.private)

	// Encoded, no form of the value is left outside the kept fields.
	out.Name, out.Kept, out.Bytes = "", nil, nil
	for _, enc := range []func(any) ([]byte, error){json.Marshal, yaml.Marshal} {
		b, err := enc(out)
		require.NoError(t, err)
		assert.NotContains(t, string(b), "hf_SecretToken")
	}

	// A Redactor that knows nothing returns the same value.
	assert.Equal(t, doc.Message, RedactCopy(NewRedactor(), doc).Message)
	assert.Equal(t, doc.Message, RedactCopy[document](nil, doc).Message)
}

func TestWriter(t *testing.T) {
	const token = "hf_SecretToken<&>9"
	red := NewRedactor()
	var buf bytes.Buffer
	w := NewWriter(&buf, red)

	// Before the value is known, it passes (nothing could have hidden it).
	_, err := w.Write([]byte("early\n"))
	require.NoError(t, err)
	red.AddValues(token)

	// A line cut across writes is redacted whole.
	for _, part := range []string{"using hf_Secr", "etToken<&>9 now", "\nprogress "} {
		n, err := w.Write([]byte(part))
		require.NoError(t, err)
		assert.Equal(t, len(part), n)
	}
	assert.Equal(t, "early\nusing (redacted) now\n", buf.String(), "the unfinished line waits")

	// \r ends a line (a live view), JSON escapes and a fragment are caught.
	js, err := json.Marshal(map[string]string{"m": "token " + token})
	require.NoError(t, err)
	require.NotContains(t, string(js), token, "JSON escaped <, > and &")
	_, err = w.Write([]byte("1/2\r2/2 " + token[:10] + "\n" + string(js) + "\nlast " + token))
	require.NoError(t, err)
	require.NoError(t, w.Flush())
	out := buf.String()
	assert.NotContains(t, out, "hf_SecretT")
	assert.Contains(t, out, "progress 1/2\r")
	assert.Contains(t, out, "\r"+Withheld+"\n", "a value cut short withholds its whole line")
	assert.Contains(t, out, `{"m":"token (redacted)"}`)
	assert.True(t, strings.HasSuffix(out, "last (redacted)"), out)
	require.NoError(t, w.Flush(), "nothing left")
}

func TestEscapedForms(t *testing.T) {
	assert.Empty(t, escapedForms("plainvalue"))
	assert.ElementsMatch(t, []string{`a\u003cb\u0026c\"d`, `a<b&c\"d`}, escapedForms(`a<b&c"d`))
	assert.Equal(t, []string{"it''s-a-value"}, escapedForms("it's-a-value"))
}

func TestWriterUnwrap(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, NewRedactor())
	assert.Same(t, &buf, w.Unwrap())
}
