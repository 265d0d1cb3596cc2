package charts

import (
	"errors"
	"testing"
)

// FuzzSetValues: any --set/--set-string argument either parses or is an
// *InputError (exit 2) that never echoes a value of the argument.
func FuzzSetValues(f *testing.F) {
	for _, s := range []string{"a=b", "a.b[0]=1,c=d", "a={x,y}", `a=b\,c`, "token=hf_abcdefgh,oops", "x[2147483648]=1", "=", "a[", "a.b.=c"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, arg string, asString bool) {
		opts := RenderOptions{Set: []string{arg}}
		if asString {
			opts = RenderOptions{SetString: []string{arg}}
		}
		_, err := UserValues(opts)
		if err == nil {
			return
		}
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Fatalf("%q: not an *InputError: %v", arg, err)
		}
	})
}

// FuzzParseDocument: any YAML document parses to objects or fails with an
// error; it never panics, and numbers a field cannot hold are refused.
func FuzzParseDocument(f *testing.F) {
	for _, s := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 99999999999}\n",
		"kind: [\n", "---\n---\n", "apiVersion: v1\nkind: List\nitems: []\n", "\x00\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		objs, err := parseDocument(doc)
		if err != nil {
			return
		}
		_ = CheckNumbers(objs)
	})
}
