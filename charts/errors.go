package charts

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// InputError reports bad user input: a chart reference, a values file, a
// --set flag, a value rejected by the chart's schema, a template that fails,
// rendered output that is not a Kubernetes object, or a release name. The
// command line maps it to exit code 2 through ExitCode.
//
// Error() reads "<Source> <File> line <Line>: <Path>: <Msg>", leaving out
// the parts that are empty, e.g.
//
//	values file values-bad.yaml line 3: mapping values are not allowed in this context
//	values do not match the schema of chart vllm: resources.gpu: got string, want integer
//	template vllm/templates/deployment.yaml line 12: model.name is required
type InputError struct {
	// Source names the kind of input at fault, e.g. "values file",
	// "template", "chart", "--set", "release name".
	Source string
	// File is the file at fault (values file, template as
	// "<chart>/templates/x.yaml", chart reference), if any.
	File string
	// Line is the 1-based line in File, 0 when unknown.
	Line int
	// Path is the values path at fault, e.g. "resources.gpu", if any.
	Path string
	// Msg says what is wrong.
	Msg string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *InputError) Error() string {
	var head []string
	if e.Source != "" {
		head = append(head, e.Source)
	}
	if e.File != "" {
		head = append(head, e.File)
	}
	if e.Line > 0 {
		head = append(head, "line "+strconv.Itoa(e.Line))
	}
	var b strings.Builder
	b.WriteString(strings.Join(head, " "))
	if e.Path != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(e.Path)
	}
	if e.Msg != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(e.Msg)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *InputError) Unwrap() error { return e.Err }

// ExitCode is 2 (invalid input) for every InputError.
func (e *InputError) ExitCode() int { return 2 }

// SourceTemplate is the InputError.Source of a template that failed to
// execute.
const SourceTemplate = "template"

// yamlLineRe finds the line of a YAML parser error ("yaml: line 3: ...").
var yamlLineRe = regexp.MustCompile(`^line (\d+):?\s*`)

// yamlErrorLine extracts the line number and the bare message of a YAML
// parser error from sigs.k8s.io/yaml (which prefixes "error converting YAML
// to JSON: yaml: line N: ..."). The line is 0 when the error names none.
func yamlErrorLine(err error) (int, string) {
	msg := err.Error()
	for _, prefix := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "yaml: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	if m := yamlLineRe.FindStringSubmatchIndex(msg); m != nil {
		n, _ := strconv.Atoi(msg[m[2]:m[3]])
		return n, strings.TrimSpace(msg[m[1]:])
	}
	return 0, msg
}

// templateLocRe matches a template location as Helm's engine prints it:
// "<chart>/templates/x.yaml:12" or "<chart>/templates/x.yaml:12:3".
var templateLocRe = regexp.MustCompile(`([^\s():"<>]+/templates/[^\s():"<>]+):(\d+)(?::\d+)?`)

// helmExecPrefixRe matches the location prefix of Helm's reformatted
// execution and parse errors, which the InputError already shows.
var helmExecPrefixRe = regexp.MustCompile(`^(?:execution|parse) error at \([^)]*\): `)

// templateError turns an error of Helm's engine into an InputError naming
// the template file and line. Helm formats errors in several ways:
//
//	parse error at (vllm/templates/x.yaml:12): function "foo" not defined
//	execution error at (vllm/templates/x.yaml:12:3): <message of required/fail>
//	vllm/templates/x.yaml:12:3
//	  executing "vllm/templates/x.yaml" at <...>:
//	    error calling include: ...
//
// In a trace through include or tpl the innermost location is the one
// reported in File/Line, since that is where the failing action is; the
// message keeps Helm's full text.
func templateError(err error) *InputError {
	msg := strings.TrimSpace(err.Error())
	ie := &InputError{Source: SourceTemplate, Err: err, Msg: msg}
	locs := templateLocRe.FindAllStringSubmatch(msg, -1)
	if len(locs) == 0 {
		return ie
	}
	last := locs[len(locs)-1]
	ie.File = last[1]
	ie.Line, _ = strconv.Atoi(last[2])
	if prefix := helmExecPrefixRe.FindString(msg); prefix != "" {
		ie.Msg = strings.TrimPrefix(msg, prefix)
		return ie
	}
	if !strings.Contains(msg, "\n") {
		// A chained text/template error: drop the repeated location.
		ie.Msg = strings.TrimPrefix(strings.TrimPrefix(msg, "template: "+locs[0][0]+": "), "template: ")
		return ie
	}
	// A trace: location, "executing ... at <action>:", message, repeated
	// once per include/tpl level. Keep the innermost action and message.
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	final := lines[len(lines)-1]
	for i := len(lines) - 2; i >= 0; i-- {
		if _, after, ok := strings.Cut(lines[i], `" at <`); ok && strings.HasPrefix(lines[i], "executing ") {
			final = "at <" + strings.TrimSuffix(after, ":") + ": " + final
			break
		}
	}
	if len(locs) > 1 {
		final += fmt.Sprintf(" (included from %s line %s)", locs[0][1], locs[0][2])
	}
	ie.Msg = final
	return ie
}

// schemaViolation is one value rejected by a chart's values.schema.json.
type schemaViolation struct {
	Path string // values path, e.g. resources.gpu ("" for the root)
	Msg  string
}

// quotedValueRe is the value the validator quotes at the start of some
// messages ("'tok-…' does not match pattern '^hf_'").
var quotedValueRe = regexp.MustCompile(`^'(?:[^'\\]|\\.)*'`)

// withoutValue names the rule a value broke, not the value: a value may be
// a token.
func withoutValue(msg string) string {
	return quotedValueRe.ReplaceAllString(msg, "value")
}

// tokensToPath turns the tokens of a JSON pointer (["a","b","0","c"])
// into a values path ("a.b[0].c").
func tokensToPath(tokens []string) string {
	var b strings.Builder
	for _, seg := range tokens {
		if _, err := strconv.Atoi(seg); err == nil && b.Len() > 0 {
			fmt.Fprintf(&b, "[%s]", seg)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

func joinValuesPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}
