package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/diff"
	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/storage"
)

// newGetCommand is `vllmctl get values|manifest|hooks|notes RELEASE`: what one
// revision's record keeps. Each subcommand is a getSubcommand over the
// shared getOptions (release, --revision, the record store), so that
// another part of the record (hooks) slots in as one more entry of
// getSubcommands.
func newGetCommand(g *GlobalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show what a release revision's record keeps: its values, manifest, hooks or notes",
		Long: "Print one part of the record of a release revision: `values` (the user-supplied values, or with\n" +
			"--all the computed ones), `manifest` (the rendered manifest as recorded), `hooks` (its helm.sh/hook\n" +
			"objects) or `notes` (the chart's rendered NOTES.txt). The revision is --revision N, else the deployed one, else the latest.\n\n" +
			"Exit status: 0 printed, 2 invalid input (unknown release or revision).",
		Args: cobra.NoArgs,
		RunE: requireSubcommand(strings.Join(getSubcommandNames(), ", ")),
	}
	for _, sub := range getSubcommands() {
		cmd.AddCommand(newGetSubcommand(g, sub))
	}
	return cmd
}

// getSubcommand is one part of a record `get` prints.
type getSubcommand struct {
	name, short, long, example string
	// flags registers the subcommand's own flags on o (nil: none).
	flags func(cmd *cobra.Command, o *getOptions)
	// validate checks them (nil: nothing to check).
	validate func(o *getOptions) error
	// write prints the part of rec.
	write func(w, errOut io.Writer, o *getOptions, rec *storage.Release) error
}

// getSubcommands are the parts `get` prints, in help order.
func getSubcommands() []getSubcommand {
	return []getSubcommand{getValues(), getManifest(), getHooks(), getNotes()}
}

func getSubcommandNames() []string {
	var names []string
	for _, s := range getSubcommands() {
		names = append(names, s.name)
	}
	return names
}

// getOptions are the inputs of `vllmctl get PART RELEASE`.
type getOptions struct {
	g   *GlobalOptions
	sub getSubcommand

	revision int
	// revisionGiven: --revision was on the command line (0 is then refused).
	revisionGiven bool

	// values' flags.
	output outputFlags
	all    bool

	releaseTarget
	store storage.Store
}

func newGetSubcommand(g *GlobalOptions, sub getSubcommand) *cobra.Command {
	o := &getOptions{g: g, sub: sub}
	cmd := &cobra.Command{
		Use:     sub.name + " RELEASE",
		Short:   sub.short,
		Long:    sub.long,
		Example: sub.example,
		Args:    cobra.ExactArgs(1),
		RunE:    runCommand(o),
	}
	cmd.Flags().IntVar(&o.revision, "revision", 0, "the revision (default: the deployed one, else the latest)")
	if sub.flags != nil {
		sub.flags(cmd, o)
	}
	return cmd
}

// Complete resolves the release, the namespace and the record store.
func (o *getOptions) Complete(cmd *cobra.Command, args []string) error {
	// VLLMCTL_REVISION or the config file may set it without marking it
	// changed.
	o.revisionGiven = cmd.Flags().Changed("revision") || o.revision != 0
	if err := o.releaseTarget.complete(o.g, args); err != nil {
		return err
	}
	var err error
	o.store, err = o.g.Factory.Store(o.namespace)
	return err
}

// Validate checks the release name, --revision and the subcommand's flags.
func (o *getOptions) Validate() error {
	if err := storage.ValidateName(o.release); err != nil {
		return err
	}
	if o.revisionGiven && o.revision < 1 {
		return newUsageError("--revision %d: must be 1 or more", o.revision)
	}
	if o.sub.validate != nil {
		return o.sub.validate(o)
	}
	return nil
}

// Run reads the revision's record and prints the part.
func (o *getOptions) Run(ctx context.Context) error {
	rec, err := o.record(ctx)
	if err != nil {
		return err
	}
	return o.sub.write(o.g.Streams.Out, o.g.Streams.ErrOut, o, rec)
}

// record reads the record of --revision, else of the deployed revision,
// else of the latest (storage.Select). An unknown release or revision is a
// *storage.NotFoundError (exit code 2), as for history.
func (o *getOptions) record(ctx context.Context) (*storage.Release, error) {
	rev := 0
	if o.revisionGiven {
		rev = o.revision
	}
	return storage.Select(ctx, o.store, o.release, rev)
}

// getValues is `get values`: the user-supplied values, or the computed
// ones with --all, as YAML or JSON.
func getValues() getSubcommand {
	return getSubcommand{
		name:  "values",
		short: "Print a revision's user-supplied values (--all: the computed values)",
		long: "Print the values the user supplied for the revision (-f, --set, ... as recorded, the previous\n" +
			"revision's included with --reuse-values), as YAML (default) or JSON. With --all, the computed\n" +
			"values: the chart's defaults coalesced with those, as the templates saw them; records written\n" +
			"before vllmctl kept them cannot answer --all (exit 2). A value the revision's manifest or hooks\n" +
			"put into a Secret is Secret data and is printed as \"" + diff.Redacted + "\".",
		example: "  vllmctl get values qwen\n  vllmctl get values qwen --revision 3 --all -o json",
		flags: func(cmd *cobra.Command, o *getOptions) {
			cmd.Flags().StringVarP(&o.output.format, "output", "o", "yaml", "output format: yaml or json (table: yaml, as helm prints values)")
			cmd.Flags().BoolVarP(&o.all, "all", "a", false, "print the computed values (chart defaults and user-supplied values)")
		},
		validate: func(o *getOptions) error {
			switch o.output.format {
			case "table":
				// VLLMCTL_OUTPUT or the config file may say table for
				// every command: values are YAML then, as with helm.
				o.output.format = "yaml"
				return nil
			case "yaml", "json":
				return nil
			}
			return newUsageError("--output %q: want yaml or json", o.output.format)
		},
		write: func(w, _ io.Writer, o *getOptions, rec *storage.Release) error {
			values := rec.Values
			if o.all {
				if rec.ComputedValues == nil {
					return newUsageError("release %s revision %d: its record keeps no computed values (written before vllmctl kept them): "+
						"--all cannot be answered; `get values` without --all prints the user-supplied values", rec.Name, rec.Revision)
				}
				values = rec.ComputedValues
			}
			if values == nil {
				values = map[string]any{}
			}
			// A value a template put into a Secret is Secret data: the
			// output withholds what the record's Secrets hold.
			if err := release.LearnRecord(o.g.Redactor, rec); err != nil {
				return err
			}
			return writeRecordDocument(w, o.output.format, values)
		},
	}
}

// getManifest is `get manifest`: the manifest as recorded, Secrets'
// values withheld.
func getManifest() getSubcommand {
	return getSubcommand{
		name:  "manifest",
		short: "Print a revision's manifest as recorded",
		long: "Print the rendered manifest the revision applied, one YAML stream, as its record keeps it, except\n" +
			"that the values of Secrets (data, stringData) are withheld: each is printed as \"" + diff.Redacted + "\".",
		example: "  vllmctl get manifest qwen --revision 2",
		write: func(w, _ io.Writer, _ *getOptions, rec *storage.Release) error {
			out, err := release.WithholdSecretValues(rec.Manifest)
			if err != nil {
				return fmt.Errorf("release %s revision %d: %w", rec.Name, rec.Revision, err)
			}
			_, err = io.WriteString(w, out)
			return err
		},
	}
}

// getHooks is `get hooks`: the revision's hooks as recorded.
func getHooks() getSubcommand {
	return getSubcommand{
		name:  "hooks",
		short: "Print a revision's hooks as recorded",
		long: "Print the hooks (objects annotated helm.sh/hook) of the revision, one YAML stream, each preceded\n" +
			"by a \"# Source: TEMPLATE\" line as `helm get hooks` prints them; the values of Secrets are withheld.",
		example: "  vllmctl get hooks qwen",
		write: func(w, _ io.Writer, _ *getOptions, rec *storage.Release) error {
			var b strings.Builder
			for _, h := range rec.Hooks {
				m, err := release.WithholdSecretValues(h.Manifest)
				if err != nil {
					return fmt.Errorf("release %s revision %d: hook %s %s: %w", rec.Name, rec.Revision, h.Kind, h.Name, err)
				}
				fmt.Fprintf(&b, "---\n# Source: %s\n%s", h.Path, m)
			}
			_, err := io.WriteString(w, b.String())
			return err
		},
	}
}

// getNotes is `get notes`: the chart's rendered NOTES.txt as recorded.
func getNotes() getSubcommand {
	return getSubcommand{
		name:  "notes",
		short: "Print a revision's rendered NOTES.txt",
		long: "Print the chart's NOTES.txt as rendered for the revision. A chart without NOTES.txt, or a\n" +
			"record written before vllmctl kept notes, prints nothing (a note on stderr says so). A value of\n" +
			"one of the revision's Secrets in the notes is printed as \"" + diff.Redacted + "\".",
		example: "  vllmctl get notes qwen",
		write: func(w, errOut io.Writer, o *getOptions, rec *storage.Release) error {
			if rec.Notes == "" {
				fmt.Fprintf(errOut, "release %s revision %d has no notes\n", rec.Name, rec.Revision)
				return nil
			}
			if err := release.LearnRecord(o.g.Redactor, rec); err != nil {
				return err
			}
			notes := rec.Notes
			if !strings.HasSuffix(notes, "\n") {
				notes += "\n"
			}
			_, err := io.WriteString(w, notes)
			return err
		},
	}
}
