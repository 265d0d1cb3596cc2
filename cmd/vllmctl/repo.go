package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"helm.sh/helm/v4/pkg/repo/v1"

	"github.com/vllmctl/vllmctl/charts/source"
	"github.com/vllmctl/vllmctl/internal/termout"
)

func newRepoCommand(g *GlobalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "repo",
		Short: "Add, list, remove and update Helm chart repositories",
		Long: "Chart repositories (HTTP/HTTPS, an index.yaml and packaged charts) are kept in Helm's own\n" +
			"files: repositories.yaml and the index cache, at Helm's paths (HELM_REPOSITORY_CONFIG,\n" +
			"HELM_REPOSITORY_CACHE, HELM_CONFIG_HOME, HELM_CACHE_HOME), so a repository added with\n" +
			"`helm repo add` is seen here and the other way round. A chart of an added repository is\n" +
			"CHART REPO/NAME in deploy, diff, template and lint, at --version (a SemVer constraint).",
		Args: cobra.NoArgs,
		RunE: requireSubcommand("add, list, remove or update"),
	}
	cmd.AddCommand(newRepoAddCommand(g), newRepoListCommand(g), newRepoRemoveCommand(g), newRepoUpdateCommand(g))
	return cmd
}

// repoAddOptions are the inputs of `vllmctl repo add NAME URL`.
type repoAddOptions struct {
	g      *GlobalOptions
	source chartSourceFlags
	force  bool

	entry repo.Entry
}

func newRepoAddCommand(g *GlobalOptions) *cobra.Command {
	o := &repoAddOptions{g: g}
	cmd := &cobra.Command{
		Use:   "add NAME URL",
		Short: "Add a chart repository",
		Long: "Fetch the repository's index (a repository that cannot be reached is not added: exit 6)\n" +
			"and add it to Helm's repositories.yaml, as `helm repo add`. A repository of the same name and\n" +
			"configuration is left as it is; one of another configuration is refused unless --force-update.\n" +
			"The credentials are stored in repositories.yaml, as Helm stores them.",
		Example: "  vllmctl repo add models https://charts.example.com\n" +
			"  echo \"$TOKEN\" | vllmctl repo add private https://charts.example.com/private --username ci --password-stdin",
		Args: cobra.ExactArgs(2),
		RunE: runCommand(o),
	}
	o.source.addTransportFlags(cmd.Flags())
	commandLineOnly(cmd.Flags(), "password-stdin")
	cmd.Flags().BoolVar(&o.force, "force-update", false, "replace a repository of the same name")
	return cmd
}

// Complete builds the repository entry (reading the password with
// --password-stdin).
func (o *repoAddOptions) Complete(_ *cobra.Command, args []string) error {
	so, err := o.source.options(o.g.Streams.In)
	if err != nil {
		return err
	}
	o.entry = repo.Entry{
		Name: args[0], URL: args[1],
		Username: so.Username, Password: so.Password,
		CertFile: so.CertFile, KeyFile: so.KeyFile, CAFile: so.CAFile,
		InsecureSkipTLSVerify: so.InsecureSkipTLSVerify, PassCredentialsAll: so.PassCredentialsAll,
	}
	return nil
}

// Validate has nothing to check: AddRepository checks the name.
func (o *repoAddOptions) Validate() error { return nil }

// Run adds the repository.
func (o *repoAddOptions) Run(ctx context.Context) error {
	res, err := source.AddRepository(ctx, source.Settings(), o.entry, o.force)
	if err != nil {
		return err
	}
	switch res {
	case source.Unchanged:
		_, err = fmt.Fprintf(o.g.Streams.Out, "%q already exists with the same configuration, skipping\n", o.entry.Name)
	default:
		_, err = fmt.Fprintf(o.g.Streams.Out, "%q has been %s\n", o.entry.Name, res)
	}
	return err
}

// repoListOptions are the inputs of `vllmctl repo list`.
type repoListOptions struct {
	g      *GlobalOptions
	output outputFlags
}

func newRepoListCommand(g *GlobalOptions) *cobra.Command {
	o := &repoListOptions{g: g}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the added chart repositories",
		Long:    "One row per repository of Helm's repositories.yaml: NAME and URL. No repositories: no rows\n(and [] with -o json).",
		Args:    cobra.NoArgs,
		RunE:    runCommand(o),
	}
	o.output.AddFlags(cmd.Flags())
	return cmd
}

// Complete has nothing to fill in.
func (o *repoListOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate checks the output format.
func (o *repoListOptions) Validate() error { return o.output.Validate() }

// Run prints the repositories.
func (o *repoListOptions) Run(context.Context) error {
	repos, err := source.Repositories(source.Settings())
	if err != nil {
		return err
	}
	if o.output.format != "table" {
		return writeRecordDocument(o.g.Streams.Out, o.output.format, repos)
	}
	if len(repos) == 0 {
		_, err := fmt.Fprintln(o.g.Streams.ErrOut, "No repositories (vllmctl repo add NAME URL).")
		return err
	}
	tw := newRecordTable(o.g.Streams.Out)
	fmt.Fprintln(tw, "NAME\tURL")
	for _, r := range repos {
		// repositories.yaml is shared with helm and hand edits: its text
		// is untrusted.
		fmt.Fprintf(tw, "%s\t%s\n", termout.SanitizeLine(r.Name), termout.SanitizeLine(r.URL))
	}
	return tw.Flush()
}

// repoRemoveOptions are the inputs of `vllmctl repo remove NAME...`.
type repoRemoveOptions struct {
	g     *GlobalOptions
	names []string
}

func newRepoRemoveCommand(g *GlobalOptions) *cobra.Command {
	o := &repoRemoveOptions{g: g}
	return &cobra.Command{
		Use:     "remove NAME...",
		Aliases: []string{"rm"},
		Short:   "Remove chart repositories",
		Long: "Remove the repositories from Helm's repositories.yaml and their cached index, as\n" +
			"`helm repo remove`. A name that is not added is refused (exit 2) and nothing is removed.",
		Args: cobra.MinimumNArgs(1),
		RunE: runCommand(o),
	}
}

// Complete takes the names.
func (o *repoRemoveOptions) Complete(_ *cobra.Command, args []string) error {
	o.names = args
	return nil
}

// Validate has nothing to check.
func (o *repoRemoveOptions) Validate() error { return nil }

// Run removes the repositories.
func (o *repoRemoveOptions) Run(ctx context.Context) error {
	if err := source.RemoveRepositories(ctx, source.Settings(), o.names...); err != nil {
		return err
	}
	for _, n := range o.names {
		if _, err := fmt.Fprintf(o.g.Streams.Out, "%q has been removed\n", n); err != nil {
			return err
		}
	}
	return nil
}

// repoUpdateOptions are the inputs of `vllmctl repo update [NAME...]`.
type repoUpdateOptions struct {
	g     *GlobalOptions
	names []string
}

func newRepoUpdateCommand(g *GlobalOptions) *cobra.Command {
	o := &repoUpdateOptions{g: g}
	return &cobra.Command{
		Use:     "update [NAME...]",
		Aliases: []string{"up"},
		Short:   "Fetch the latest index of chart repositories",
		Long: "Fetch the index of the named repositories (all when none is named) into Helm's cache, as\n" +
			"`helm repo update`. A name that is not added is refused (exit 2) before anything is fetched;\n" +
			"a repository that cannot be reached fails the command (exit 6) after the others are updated.",
		Args: cobra.ArbitraryArgs,
		RunE: runCommand(o),
	}
}

// Complete takes the names.
func (o *repoUpdateOptions) Complete(_ *cobra.Command, args []string) error {
	o.names = args
	return nil
}

// Validate has nothing to check.
func (o *repoUpdateOptions) Validate() error { return nil }

// Run updates the indexes.
func (o *repoUpdateOptions) Run(ctx context.Context) error {
	updated, err := source.UpdateRepositories(ctx, source.Settings(), o.names...)
	for _, n := range updated {
		if _, werr := fmt.Fprintf(o.g.Streams.Out, "%q updated\n", n); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}
