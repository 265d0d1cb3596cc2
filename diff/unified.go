package diff

import (
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"
)

// contextLines is the number of unchanged lines around each change.
const contextLines = 3

// Labels of the two sides in a diff's ---/+++ header lines.
const (
	labelLive   = "live"
	labelDryRun = "dry-run"
	labelNone   = "/dev/null"
)

// toYAML renders an object's content as YAML with sorted keys; nil gives
// no lines.
func toYAML(obj map[string]any) ([]string, error) {
	if obj == nil {
		return nil, nil
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines, nil
}

// Unified returns a unified diff of the lines a and b (each ending in a
// newline) with n lines of context, headed "--- fromLabel" and
// "+++ toLabel"; "" when they are equal. The diff is the longest-matching
// one of Python's difflib, without its "popular lines are junk" heuristic
// (YAML repeats lines a lot).
func Unified(a, b []string, fromLabel, toLabel string, n int) string {
	m := difflib.NewMatcherWithJunk(a, b, false, nil)
	groups := m.GetGroupedOpCodes(n)
	if len(groups) == 0 {
		return ""
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", fromLabel, toLabel)
	for _, g := range groups {
		first, last := g[0], g[len(g)-1]
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", unifiedRange(first.I1, last.I2), unifiedRange(first.J1, last.J2))
		for _, c := range g {
			if c.Tag == 'e' {
				writeLines(&out, " ", a[c.I1:c.I2])
				continue
			}
			if c.Tag == 'r' || c.Tag == 'd' {
				writeLines(&out, "-", a[c.I1:c.I2])
			}
			if c.Tag == 'r' || c.Tag == 'i' {
				writeLines(&out, "+", b[c.J1:c.J2])
			}
		}
	}
	return out.String()
}

func writeLines(out *strings.Builder, prefix string, lines []string) {
	for _, l := range lines {
		out.WriteString(prefix)
		out.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// unifiedRange formats a hunk range as GNU diff does: "start,length",
// "start" for one line, and the line before for none.
func unifiedRange(start, stop int) string {
	begin := start + 1
	length := stop - start
	switch length {
	case 1:
		return fmt.Sprintf("%d", begin)
	case 0:
		begin--
	}
	return fmt.Sprintf("%d,%d", begin, length)
}
