package analysis

import (
	"fmt"
	"regexp"
	"strings"
)

// placeholderRE finds {{…}} placeholders in a query.
var placeholderRE = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// CheckPromQL checks a custom metric's query before anything is applied:
// its placeholders are known ones, and it is lexically PromQL (strings
// closed, brackets balanced and nested, only PromQL's characters outside
// strings and comments, not ending on an operator). It is not a full
// parse: github.com/prometheus/prometheus (whose promql/parser would be)
// brings most of the Prometheus server's dependency graph into a module
// that must stay `go install`-able, and the Prometheus provider has the
// server itself parse the query (its 400 bad_data names the error).
func CheckPromQL(query string) error {
	q := strings.TrimSpace(query)
	if q == "" {
		return fmt.Errorf("the query is empty")
	}
	for _, m := range placeholderRE.FindAllStringSubmatch(q, -1) {
		switch "{{" + m[1] + "}}" {
		case PlaceholderNamespace, PlaceholderCanaryPods, PlaceholderStablePods:
		default:
			return fmt.Errorf("unknown placeholder %s: want %s, %s or %s", m[0], PlaceholderNamespace, PlaceholderCanaryPods, PlaceholderStablePods)
		}
	}
	q = placeholderRE.ReplaceAllString(q, "x")
	var stack []rune
	closing := map[rune]rune{')': '(', ']': '[', '}': '{'}
	last := rune(0) // last significant character outside strings
	rs := []rune(q)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '"' || r == '\'' || r == '`':
			j := i + 1
			for ; j < len(rs) && rs[j] != r; j++ {
				if rs[j] == '\\' && r != '`' {
					j++
				}
				if r != '`' && j < len(rs) && rs[j] == '\n' {
					return fmt.Errorf("string at offset %d is not closed on its line", i)
				}
			}
			if j >= len(rs) {
				return fmt.Errorf("string at offset %d is not closed", i)
			}
			i, last = j, 'x'
		case r == '#':
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
			last = r
		case r == ')' || r == ']' || r == '}':
			if len(stack) == 0 || stack[len(stack)-1] != closing[r] {
				return fmt.Errorf("unexpected %q at offset %d", r, i)
			}
			stack = stack[:len(stack)-1]
			last = r
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
		case isIdent(r) || strings.ContainsRune(",=!~<>+-*/%^@:", r):
			last = r
		default:
			return fmt.Errorf("unexpected character %q at offset %d", r, i)
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("%q is not closed", stack[len(stack)-1])
	}
	if strings.ContainsRune(",=!~<>+-*/%^@", last) {
		return fmt.Errorf("the query ends with %q", last)
	}
	return nil
}

func isIdent(r rune) bool {
	return r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}
