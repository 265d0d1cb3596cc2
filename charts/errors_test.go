package charts

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInputErrors renders bad input of every kind and checks that the
// error is an *InputError (exit code 2) naming the file and line, or the
// values path, or the flag value at fault.
func TestInputErrors(t *testing.T) {
	tests := []struct {
		name      string
		chart     string            // chart ref; "" = a chart written from templates
		templates map[string]string // files of the written chart
		opts      RenderOptions     // ReleaseName defaults to "r"
		want      InputError        // Source, File, Line, Path compared
		msg       string            // the exact Error()
	}{
		{
			name:  "malformed values file",
			chart: handwritten,
			opts:  RenderOptions{ValueFiles: []string{"testdata/bad/values-bad.yaml"}},
			want:  InputError{Source: "values file", File: "testdata/bad/values-bad.yaml", Line: 3},
			msg:   "values file testdata/bad/values-bad.yaml line 3: mapping values are not allowed in this context",
		},
		{
			name:  "malformed second document of a values file",
			chart: handwritten,
			opts:  RenderOptions{ValueFiles: []string{"testdata/values/handwritten-extra.yaml", "testdata/bad/values-bad-second-doc.yaml"}},
			want:  InputError{Source: "values file", File: "testdata/bad/values-bad-second-doc.yaml", Line: 6},
			msg:   "values file testdata/bad/values-bad-second-doc.yaml line 6: mapping values are not allowed in this context",
		},
		{
			name:  "values file that is a list",
			chart: handwritten,
			opts:  RenderOptions{ValueFiles: []string{"testdata/bad/values-list.yaml"}},
			want:  InputError{Source: "values file", File: "testdata/bad/values-list.yaml", Line: 2},
			msg:   "values file testdata/bad/values-list.yaml line 2: a values document must be a map of keys to values",
		},
		{
			name:  "missing values file",
			chart: handwritten,
			opts:  RenderOptions{ValueFiles: []string{"testdata/bad/nope.yaml"}},
			want:  InputError{Source: "values file", File: "testdata/bad/nope.yaml"},
			msg:   "values file testdata/bad/nope.yaml: no such file or directory",
		},
		{
			name:  "schema violation from a values file",
			chart: "vllm",
			opts:  RenderOptions{ValueFiles: []string{"testdata/bad/vllm-schema.yaml"}},
			want:  InputError{Source: "values do not match the schema of chart vllm", Path: "resources.gpu"},
			msg:   "values do not match the schema of chart vllm: resources.gpu: got string, want integer",
		},
		{
			name:  "schema violation from --set",
			chart: handwritten,
			opts:  RenderOptions{Set: []string{"replicas=-1"}},
			want:  InputError{Source: "values do not match the schema of chart handwritten", Path: "replicas"},
			msg:   "values do not match the schema of chart handwritten: replicas: minimum: got -1, want 0",
		},
		{
			name:  "schema violation in a list from a values file",
			chart: handwritten,
			opts:  RenderOptions{ValueFiles: []string{"testdata/bad/handwritten-schema.yaml"}},
			want:  InputError{Source: "values do not match the schema of chart handwritten", Path: "workers[1].port"},
			msg:   "values do not match the schema of chart handwritten: workers[1].port: maximum: got 70,000, want 65,535",
		},
		{
			name:  "several schema violations, sorted by path",
			chart: handwritten,
			opts:  RenderOptions{Set: []string{"replicas=many", "image.digest=x", "workers[0].name=Bad"}},
			want:  InputError{Source: "values do not match the schema of chart handwritten", Path: "image.digest"},
			msg: "values do not match the schema of chart handwritten: image.digest: additional properties 'digest' not allowed; " +
				"replicas: got string, want integer; workers[0].name: value does not match pattern '^[a-z][a-z0-9-]*$'; " +
				"workers[0].port: missing property 'port'",
		},
		{
			name:  "required",
			chart: handwritten,
			opts:  RenderOptions{Set: []string{"image.tag="}},
			want:  InputError{Source: "template", File: "handwritten/templates/deployment.yaml", Line: 26},
			msg:   "template handwritten/templates/deployment.yaml line 26: image.tag is required",
		},
		{
			name:  "fail",
			chart: handwritten,
			opts:  RenderOptions{Set: []string{"replicas=11"}},
			want:  InputError{Source: "template", File: "handwritten/templates/deployment.yaml", Line: 2},
			msg:   "template handwritten/templates/deployment.yaml line 2: replicas must be 10 or less",
		},
		{
			name:      "parse error",
			templates: map[string]string{"templates/a.yaml": "a: 1\nb: {{ .Values.x }\n"},
			want:      InputError{Source: "template", File: "c/templates/a.yaml", Line: 2},
			msg:       `template c/templates/a.yaml line 2: unexpected "}" in operand`,
		},
		{
			name:      "unknown function",
			templates: map[string]string{"templates/a.yaml": "\n\na: {{ nosuchfunc 1 }}\n"},
			want:      InputError{Source: "template", File: "c/templates/a.yaml", Line: 3},
			msg:       `template c/templates/a.yaml line 3: function "nosuchfunc" not defined`,
		},
		{
			name: "execution error inside an include names the helper",
			templates: map[string]string{
				"templates/_helpers.tpl": "{{- define \"c.h\" -}}\n{{ .nope.deeper }}\n{{- end -}}\n",
				"templates/a.yaml":       "a: {{ include \"c.h\" . }}\n",
			},
			want: InputError{Source: "template", File: "c/templates/_helpers.tpl", Line: 2},
			msg:  "template c/templates/_helpers.tpl line 2: at <.nope.deeper>: nil pointer evaluating interface {}.deeper (included from c/templates/a.yaml line 1)",
		},
		{
			name:      "required inside tpl",
			templates: map[string]string{"templates/a.yaml": "a: 1\nb: {{ tpl \"{{ required \\\"x is required\\\" .Values.x }}\" . }}\n"},
			want:      InputError{Source: "template", File: "c/templates/a.yaml", Line: 2},
			msg:       "template c/templates/a.yaml line 2: x is required",
		},
		{
			name:      "rendered output is not YAML",
			templates: map[string]string{"templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: a: b\n"},
			want:      InputError{Source: "template", File: "c/templates/a.yaml"},
			msg:       "template c/templates/a.yaml: rendered document 1: invalid YAML at line 5 of the rendered document: mapping values are not allowed in this context",
		},
		{
			name:      "rendered output is not an object",
			templates: map[string]string{"templates/a.yaml": "# Source: nothing\n---\n- just\n- a list\n"},
			want:      InputError{Source: "template", File: "c/templates/a.yaml"},
			msg:       `template c/templates/a.yaml: rendered document 2: not a Kubernetes object (a YAML map with apiVersion, kind and metadata.name): "- just ..."`,
		},
		{
			name:      "rendered object without kind",
			templates: map[string]string{"templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n---\napiVersion: v1\nmetadata:\n  name: x\n"},
			want:      InputError{Source: "template", File: "c/templates/a.yaml"},
			msg:       "template c/templates/a.yaml: rendered document 2: object x: kind is not set",
		},
		{
			name:      "rendered object without name",
			templates: map[string]string{"templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\ndata: {}\n"},
			want:      InputError{Source: "template", File: "c/templates/a.yaml"},
			msg:       "template c/templates/a.yaml: rendered document 1: ConfigMap (unnamed) has no metadata.name",
		},
		{
			name: "object rendered twice",
			templates: map[string]string{
				"templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
				"templates/b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
			},
			want: InputError{Source: "template", File: "c/templates/b.yaml"},
			msg:  "template c/templates/b.yaml: ConfigMap x is rendered twice (also by c/templates/a.yaml)",
		},
		{
			name:  "malformed --set",
			chart: handwritten,
			opts:  RenderOptions{Set: []string{"replicas=1,image"}},
			want:  InputError{Source: "--set"},
			msg:   `--set: argument 1 (keys replicas, image): key "image" has no value`,
		},
		{
			name:  "malformed --set index",
			chart: handwritten,
			opts:  RenderOptions{Set: []string{"workers[x].port=1"}},
			want:  InputError{Source: "--set"},
			msg:   `--set: argument 1 (keys workers[x].port): error parsing index: strconv.Atoi: parsing "x": invalid syntax`,
		},
		{
			name:  "malformed --set-string",
			chart: handwritten,
			opts:  RenderOptions{SetString: []string{"image.tag"}},
			want:  InputError{Source: "--set-string"},
			msg:   `--set-string: argument 1 (keys image.tag): key "tag" has no value`,
		},
		{
			name:  "malformed --set-string never echoes a value",
			chart: handwritten,
			opts:  RenderOptions{SetString: []string{"image.tag=v1", "image.tag=hf_SeCrEtToKeN1234,oops"}},
			want:  InputError{Source: "--set-string"},
			msg:   `--set-string: argument 2 (keys image.tag, oops): key "oops" has no value`,
		},
		{
			name:  "invalid release name",
			chart: handwritten,
			opts:  RenderOptions{ReleaseName: "My_Release"},
			want:  InputError{Source: "release name"},
			msg: `release name: "My_Release" is invalid: it must be a DNS-1123 label of at most 53 characters ` +
				`(lowercase letters, digits and '-', starting and ending with a letter or digit)`,
		},
		{
			name:      "kubeVersion constraint",
			templates: map[string]string{"Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\nkubeVersion: \"<1.30.0\"\n"},
			want:      InputError{Source: "chart", File: "c"},
			msg:       "chart c: requires kubeVersion <1.30.0, which is incompatible with Kubernetes v1.37.0",
		},
		{
			name:      "library chart",
			templates: map[string]string{"Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\ntype: library\n"},
			want:      InputError{Source: "chart", File: "c"},
			msg:       "chart c: is a library chart, which cannot be rendered",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := tt.chart
			if ref == "" {
				ref = writeChart(t, tt.templates)
			}
			ch, err := Load(ref)
			require.NoError(t, err)
			opts := tt.opts
			if opts.ReleaseName == "" {
				opts.ReleaseName = "r"
			}
			opts.Namespace = "ns"
			_, err = Render(ch, opts)
			require.Error(t, err)

			var ie *InputError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tt.want.Source, ie.Source, "Source")
			assert.Equal(t, tt.want.File, ie.File, "File")
			assert.Equal(t, tt.want.Line, ie.Line, "Line")
			assert.Equal(t, tt.want.Path, ie.Path, "Path")
			assert.Equal(t, tt.msg, err.Error())

			var coder interface{ ExitCode() int }
			require.ErrorAs(t, fmt.Errorf("wrapped: %w", err), &coder)
			assert.Equal(t, 2, coder.ExitCode())
		})
	}
}

func TestLoadUnknownChartIsInputError(t *testing.T) {
	_, err := Load("mistral")
	var ie *InputError
	require.True(t, errors.As(err, &ie))
	assert.Equal(t, 2, ie.ExitCode())
	assert.Equal(t, "chart mistral: not a chart directory nor a built-in chart (built-in charts: vllm)", err.Error())
}

func TestInputErrorFormat(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		name string
		err  *InputError
		want string
	}{
		{"all parts", &InputError{Source: "values file", File: "v.yaml", Line: 3, Path: "a.b", Msg: "bad"}, "values file v.yaml line 3: a.b: bad"},
		{"no line", &InputError{Source: "template", File: "c/templates/x.yaml", Msg: "bad"}, "template c/templates/x.yaml: bad"},
		{"path only", &InputError{Path: "a.b", Msg: "bad"}, "a.b: bad"},
		{"message only", &InputError{Msg: "bad", Err: cause}, "bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.err.Error())
			assert.Equal(t, tt.err.Err, tt.err.Unwrap())
		})
	}
}

func TestTokensToPath(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"a"}, "a"},
		{[]string{"a", "b", "0", "c"}, "a.b[0].c"},
		{[]string{"0"}, "0"},
		{[]string{"a/b", "c~d"}, "a/b.c~d"},
		{[]string{"workers", "12", "port"}, "workers[12].port"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, tokensToPath(tc.in))
		})
	}
}

func TestMaskWord(t *testing.T) {
	for _, tc := range []struct{ msg, value, want string }{
		{"index of 99999999 is greater than maximum supported index", "x", "index of 99999999 is greater than maximum supported index"},
		{`key "tok" has no value`, "tok", `key "<value>" has no value`},
		{"tok tok,tok", "tok", "<value> <value>,<value>"},
		{"atok tok_ tok", "tok", "atok tok_ <value>"},
		{"é=\x93 \x93", "\x93", "é=<value> <value>"},
	} {
		assert.Equal(t, tc.want, maskWord(tc.msg, tc.value), "%q in %q", tc.value, tc.msg)
	}
}
