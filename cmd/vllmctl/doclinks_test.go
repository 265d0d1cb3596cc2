package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks checks every relative link of README.md and docs/*.md: the
// file or directory it names exists, and a #fragment names a heading of
// the Markdown file it points to (GitHub's anchors: lower case, punctuation
// dropped, spaces as hyphens, -1, -2 … for repeated headings). Links in
// code blocks and inline code are not links; absolute URLs are not checked.
func TestDocLinks(t *testing.T) {
	const repo = "../.."
	files := []string{filepath.Join(repo, "README.md")}
	docs, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files: run from cmd/vllmctl", len(files))
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		anchors[path] = markdownAnchors(string(raw))
		return anchors[path]
	}
	checked := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(repo, file)
		for _, l := range markdownLinks(string(raw)) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			checked++
			target, frag, _ := strings.Cut(l.target, "#")
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), target)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", name, l.line, l.target, target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s:%d: link %q: a fragment of a file that is not Markdown", name, l.line, l.target)
				continue
			}
			if !anchorsOf(path)[frag] {
				t.Errorf("%s:%d: link %q: no heading with the anchor #%s in %s", name, l.line, l.target, frag, filepath.Base(path))
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked only %d relative links: the parser lost them", checked)
	}
}

type mdLink struct {
	target string
	line   int
}

var (
	mdLinkRE     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
)

// markdownLinks returns the targets of the inline links of text, outside
// fenced code blocks and inline code.
func markdownLinks(text string) []mdLink {
	var out []mdLink
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = inlineCodeRE.ReplaceAllStringFunc(line, func(s string) string {
			// keep link texts that are code: [`x`](target)
			return strings.Repeat("c", len(s))
		})
		for _, m := range mdLinkRE.FindAllStringSubmatch(line, -1) {
			out = append(out, mdLink{target: m[1], line: i + 1})
		}
	}
	return out
}

// markdownAnchors returns the anchors GitHub gives the headings of text.
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		if heading == "" || !strings.HasPrefix(line, strings.Repeat("#", len(line)-len(strings.TrimLeft(line, "#")))+" ") {
			continue
		}
		slug := githubSlug(heading)
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// githubSlug is GitHub's anchor of a heading: lower case, every character
// but letters, digits, spaces, hyphens and underscores dropped, spaces
// turned into hyphens.
func githubSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
