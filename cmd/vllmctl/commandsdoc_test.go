package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// commandsDoc is the command reference TestCommandsDocMatchesHelp checks.
const commandsDoc = "../../docs/commands.md"

// TestCommandsDocMatchesHelp keeps docs/commands.md true to the commands'
// --help. It builds the command tree as main does and walks every command
// and subcommand (hidden ones and cobra's help left out), and checks that
// the page:
//
//   - names each command path: "vllmctl fleet deploy" written out, or as
//     one of the alternatives of a usage such as "vllmctl fleet
//     deploy|diff|status" (the root's "vllmctl" counts as named);
//   - mentions each non-hidden, non-deprecated local flag of the command
//     (its own flags, persistent ones included, not those it inherits) as
//     `--name`, in a section about that command: a "##" section (with its
//     "###" subsections) whose heading names the command's first word
//     ("## deploy", "## Values flags (deploy, diff, template, lint)",
//     "## completion, version"); the root's flags belong to "## Flags every
//     command has";
//   - states the flag's default as the code does, wherever a table with a
//     "default" column has a row for the flag in such a section: the
//     default cell's first `code` span (or "none"/"off", which stand for an
//     empty default, false or 0) must equal the flag's DefValue, durations
//     compared as durations ("10m" is "10m0s"), a list without its
//     brackets ("helm" is "[helm]"), and a flag whose DefValue is empty but
//     whose help says "(default X" (--kube-version) by X. A row naming several flags
//     gives one default for all, or one per flag, comma-separated. A cell
//     in words ("as for deploy", "chart's", "(deploy's)") is not checked,
//     nor is a table without a default column. A "commands" column
//     ("deploy, diff") narrows a row to those subcommands.
func TestCommandsDocMatchesHelp(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	raw, err := os.ReadFile(commandsDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := parseCommandsDoc(string(raw))
	root := NewRootCommand(context.Background(), genericiooptions.NewTestIOStreamsDiscard())

	var cmds []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		cmds = append(cmds, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if len(cmds) < 30 {
		t.Fatalf("walked %d commands: the tree is not built as main builds it", len(cmds))
	}

	for _, c := range cmds {
		path := c.CommandPath()
		if c != root && !doc.namesCommand(path) {
			t.Errorf("docs/commands.md does not name the command %q (as %q or in a usage like \"vllmctl %s a|b\")",
				path, path, strings.Join(strings.Fields(path)[1:len(strings.Fields(path))-1], " "))
		}
		sections := doc.sectionsFor(c, root)
		if len(sections) == 0 {
			t.Errorf("%s: docs/commands.md has no section about it (a \"## \" heading naming %q)", path, topName(c, root))
			continue
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Deprecated != "" || f.Name == "help" {
				return
			}
			re := flagRE(f.Name)
			found := false
			for _, s := range sections {
				if re.MatchString(s.text) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s --%s: not mentioned in docs/commands.md's sections about %q (%s)",
					path, f.Name, topName(c, root), sectionNames(sections))
			}
			for _, s := range sections {
				for _, row := range s.rows {
					def, ok := row.defaultFor(f.Name, c)
					if !ok {
						continue
					}
					if !sameDefault(def, effectiveDefault(f)) {
						t.Errorf("%s --%s: docs/commands.md (## %s) gives the default %q, the flag's is %q",
							path, f.Name, s.heading, def, effectiveDefault(f))
					}
				}
			}
		})
	}
}

// docSection is one "## " section of the page, its "### " subsections
// included.
type docSection struct {
	heading string
	words   map[string]bool
	text    string
	rows    []defaultRow
}

// defaultRow is a row of a table with a default column.
type defaultRow struct {
	flags    []string // the flags named in the first cell, without "--"
	def      string   // the default cell, trimmed
	commands []string // the "commands" cell's words, when the table has that column
}

type commandsDocPage struct {
	text     string
	sections []docSection
}

var (
	headingWordRE = regexp.MustCompile(`[a-z][a-z0-9-]*`)
	flagTokenRE   = regexp.MustCompile(`--([a-z0-9][a-z0-9-]*)`)
	codeSpanRE    = regexp.MustCompile("`([^`]*)`")
)

// flagRE matches --name as a whole flag: not the start of a longer one
// (--set in --set-string).
func flagRE(name string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[^a-z0-9-])--` + regexp.QuoteMeta(name) + `($|[^a-z0-9-])`)
}

func parseCommandsDoc(text string) *commandsDocPage {
	p := &commandsDocPage{text: text}
	var cur *docSection
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "## ") {
			p.sections = append(p.sections, docSection{heading: strings.TrimPrefix(line, "## "), words: map[string]bool{}})
			cur = &p.sections[len(p.sections)-1]
			for _, w := range headingWordRE.FindAllString(strings.ToLower(cur.heading), -1) {
				cur.words[w] = true
			}
			continue
		}
		if cur == nil {
			continue
		}
		cur.text += line + "\n"
		if !strings.HasPrefix(line, "|") || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "|---") {
			continue
		}
		// A table: find its default and commands columns.
		header := splitRow(line)
		defCol, cmdCol := -1, -1
		for j, h := range header {
			switch strings.ToLower(h) {
			case "default":
				defCol = j
			case "commands":
				cmdCol = j
			}
		}
		i++ // the separator
		cur.text += lines[i] + "\n"
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "|") {
			i++
			cur.text += lines[i] + "\n"
			if defCol < 0 {
				continue
			}
			cells := splitRow(lines[i])
			if len(cells) <= defCol || len(cells) == 0 {
				continue
			}
			row := defaultRow{def: cells[defCol]}
			for _, m := range flagTokenRE.FindAllStringSubmatch(cells[0], -1) {
				row.flags = append(row.flags, m[1])
			}
			if cmdCol >= 0 && cmdCol < len(cells) {
				row.commands = headingWordRE.FindAllString(strings.ToLower(cells[cmdCol]), -1)
			}
			cur.rows = append(cur.rows, row)
		}
	}
	return p
}

// splitRow splits a Markdown table row into its trimmed cells; `\|` inside
// a cell is a literal bar.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	line = strings.ReplaceAll(line, `\|`, "\x00")
	var cells []string
	for _, c := range strings.Split(line, "|") {
		cells = append(cells, strings.TrimSpace(strings.ReplaceAll(c, "\x00", "|")))
	}
	return cells
}

// namesCommand reports whether the page names the command path: written
// out, or as one alternative of "PARENT a|b|c".
func (p *commandsDocPage) namesCommand(path string) bool {
	words := strings.Fields(path)
	parent := strings.Join(words[:len(words)-1], `\s+`)
	name := regexp.QuoteMeta(words[len(words)-1])
	re := regexp.MustCompile(parent + `\s+([a-z0-9-]+\|)*` + name + `(\|[a-z0-9-]+)*($|[^a-z0-9-])`)
	return re.MatchString(p.text)
}

// topName is the first word of c's path after "vllmctl" ("" for the root).
func topName(c, root *cobra.Command) string {
	for c.HasParent() && c.Parent() != root {
		c = c.Parent()
	}
	if c == root {
		return ""
	}
	return c.Name()
}

// sectionsFor returns the sections about c: those whose heading names its
// first word; for the root, "Flags every command has".
func (p *commandsDocPage) sectionsFor(c, root *cobra.Command) []*docSection {
	top := topName(c, root)
	var out []*docSection
	for i := range p.sections {
		s := &p.sections[i]
		if top == "" && strings.Contains(strings.ToLower(s.heading), "every command") ||
			top != "" && s.words[top] {
			out = append(out, s)
		}
	}
	return out
}

func sectionNames(ss []*docSection) string {
	var names []string
	for _, s := range ss {
		names = append(names, "## "+s.heading)
	}
	return strings.Join(names, "; ")
}

// defaultFor returns the default the row states for the flag name of c, and
// whether it states one that can be checked.
func (r defaultRow) defaultFor(name string, c *cobra.Command) (string, bool) {
	idx := -1
	for j, f := range r.flags {
		if f == name {
			idx = j
		}
	}
	if idx < 0 {
		return "", false
	}
	if len(r.commands) > 0 {
		ok := false
		for _, w := range r.commands {
			if w == c.Name() || w == "all" {
				ok = true
			}
		}
		if !ok {
			return "", false
		}
	}
	cell := r.def
	if len(r.flags) > 1 {
		parts := strings.Split(cell, ",")
		if len(parts) == len(r.flags) {
			cell = strings.TrimSpace(parts[idx])
		}
	}
	switch strings.ToLower(cell) {
	case "none", "off":
		return "", true
	}
	if !strings.HasPrefix(cell, "`") {
		return "", false // in words: "as for deploy", "chart's", "(required)"
	}
	m := codeSpanRE.FindStringSubmatch(cell)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// defaultInUsageRE finds the default a flag's help states itself when its
// DefValue is empty ("(default v1.37.0, ...": --kube-version).
var defaultInUsageRE = regexp.MustCompile(`\(default ([^ ,;)]+)`)

// effectiveDefault is the default --help shows for f: its DefValue (a list
// without its brackets), else the default its usage names.
func effectiveDefault(f *pflag.Flag) string {
	def := f.DefValue
	if strings.HasPrefix(def, "[") && strings.HasSuffix(def, "]") {
		def = strings.TrimSuffix(strings.TrimPrefix(def, "["), "]")
	}
	if def == "" {
		if m := defaultInUsageRE.FindStringSubmatch(f.Usage); m != nil {
			return m[1]
		}
	}
	return def
}

// sameDefault compares a default as the page writes it with a flag's
// DefValue.
func sameDefault(doc, def string) bool {
	doc = strings.Trim(strings.TrimSpace(doc), `"`)
	if doc == def {
		return true
	}
	switch doc {
	case "":
		return def == "" || def == "false" || def == "0"
	}
	if d1, err := time.ParseDuration(doc); err == nil {
		if d2, err := time.ParseDuration(def); err == nil {
			return d1 == d2
		}
	}
	return false
}
