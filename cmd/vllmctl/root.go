package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"

	"github.com/vllmctl/vllmctl/charts"
	"github.com/vllmctl/vllmctl/diff"
)

// DefaultStreams are the process's standard streams.
func DefaultStreams() genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}

// GlobalOptions holds what every command shares: the kubectl connection
// flags and the viper instance that binds flags to VLLMCTL_* and the config
// file.
type GlobalOptions struct {
	ConfigFlags *genericclioptions.ConfigFlags
	Streams     genericiooptions.IOStreams
	v           *viper.Viper

	// apiQPS and apiBurst are the client-side rate limit of the REST
	// clients (--kube-api-qps, --kube-api-burst).
	apiQPS   float32
	apiBurst int

	// Factory builds what commands take from the cluster: set once, by
	// NewRootCommand, for every command (tests set one on fakes).
	Factory Factory

	// Redactor is the command's one redactor: the engines teach it the
	// values of the Secrets they render or read, and Streams' Out and
	// ErrOut (diff.Writer) pass every line and document through it.
	Redactor *diff.Redactor
}

// Client-side rate limits. client-go's defaults (QPS 5, burst 10) queue a
// deploy's few dozen requests in the client; the API server's priority and
// fairness protects it. Discovery gets kubectl's own limits.
const (
	DefaultAPIQPS         = 100
	DefaultAPIBurst       = 200
	defaultDiscoveryQPS   = 50
	defaultDiscoveryBurst = 300
)

// restConfig applies the rate limit flags to a client configuration.
func (g *GlobalOptions) restConfig(c *rest.Config) *rest.Config {
	c.QPS, c.Burst = g.apiQPS, g.apiBurst
	return c
}

// newGlobalOptions returns the options of one command line, whose output
// leaves the program through its Redactor: streams' Out and ErrOut are
// wrapped in diff.Writers (FlushStreams writes what they hold at the end).
func newGlobalOptions(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *GlobalOptions {
	red := diff.NewRedactor()
	return &GlobalOptions{
		ConfigFlags: flags,
		Streams: genericiooptions.IOStreams{In: streams.In,
			Out: diff.NewWriter(streams.Out, red), ErrOut: diff.NewWriter(streams.ErrOut, red)},
		v:        viper.New(),
		Redactor: red,
	}
}

// FlushStreams writes what the command's output writers still hold (the
// end of a last line without a newline).
func FlushStreams(cmd *cobra.Command) error {
	var first error
	for _, w := range []io.Writer{cmd.OutOrStdout(), cmd.ErrOrStderr()} {
		if f, ok := w.(interface{ Flush() error }); ok {
			if err := f.Flush(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// NewRootCommand builds the vllmctl command tree.
func NewRootCommand(ctx context.Context, streams genericiooptions.IOStreams) *cobra.Command {
	g := newGlobalOptions(genericclioptions.NewConfigFlags(true).
		WithDiscoveryBurst(defaultDiscoveryBurst).WithDiscoveryQPS(defaultDiscoveryQPS), streams)
	g.ConfigFlags.WrapConfigFn = g.restConfig
	g.Factory = newClusterFactory(g.ConfigFlags)
	cmd := &cobra.Command{
		Use:           "vllmctl",
		Short:         "Declarative rollouts for LLM inference services on Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.bindConfig(cmd); err != nil {
				return err
			}
			if g.apiQPS > 0 && g.apiBurst < 1 {
				return newUsageError("--kube-api-burst %d: must be 1 or more when --kube-api-qps is positive", g.apiBurst)
			}
			return nil
		},
	}
	cmd.SetIn(g.Streams.In)
	cmd.SetOut(g.Streams.Out)
	cmd.SetErr(g.Streams.ErrOut)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	g.ConfigFlags.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().Float32Var(&g.apiQPS, "kube-api-qps", DefaultAPIQPS,
		"client-side limit of requests per second to the API server (negative: no limit)")
	cmd.PersistentFlags().IntVar(&g.apiBurst, "kube-api-burst", DefaultAPIBurst,
		"client-side burst of requests to the API server")

	for _, sub := range subcommands() {
		cmd.AddCommand(sub(g))
	}
	addCompletionCommand(cmd)
	for _, c := range cmd.Commands() {
		wrapArgs(c)
	}
	return cmd
}

// subcommands lists the constructors of vllmctl's commands, one file each.
func subcommands() []func(*GlobalOptions) *cobra.Command {
	return []func(*GlobalOptions) *cobra.Command{
		newVersionCommand,
		newHistoryCommand,
		newListCommand,
		newTemplateCommand,
		newLintCommand,
		newRepoCommand,
		newRegistryCommand,
		newDependencyCommand,
		newDiffCommand,
		newDeployCommand,
		newRollbackCommand,
		newWaitCommand,
		newTestCommand,
		newStatusCommand,
		newUninstallCommand,
		newGetCommand,
		newDiagnoseCommand,
		newAdoptCommand,
		newHandoverCommand,
		newFleetCommand,
	}
}

// commandOptions are the inputs of a command, taken in kubectl's three
// steps.
type commandOptions interface {
	// Complete fills in what the flags and args leave to find out.
	Complete(cmd *cobra.Command, args []string) error
	// Validate checks the inputs.
	Validate() error
	// Run does the command's work.
	Run(ctx context.Context) error
}

// runCommand is the RunE of a command whose inputs are o: Complete,
// Validate, then Run.
func runCommand(o commandOptions) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(commandContext(cmd))
	}
}

// commandContext is cmd's context, else context.Background().
func commandContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// validateAll runs the checks in order and returns the first error.
func validateAll(checks ...func() error) error {
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// wrapArgs makes argument-count errors usage errors (exit 2).
func wrapArgs(c *cobra.Command) {
	if c.Args != nil {
		args := c.Args
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// bindConfig applies, for every flag the user did not set, the value from
// VLLMCTL_<FLAG> or the config file ($XDG_CONFIG_HOME/vllmctl/config.yaml).
// Precedence: flags > environment > config file > defaults.
//
// Such a value is a default, not a flag given: it is set on the flag's
// Value, and the flag stays unchanged (pflag's Changed, FlagSet.Changed),
// so that checks of the command line ("--canary-hold needs --canary",
// "--rollback-on-failure and --no-rollback contradict each other") see
// only what was typed.
func (g *GlobalOptions) bindConfig(cmd *cobra.Command) error {
	v := g.v
	v.SetEnvPrefix("VLLMCTL")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	if path := configFilePath(); path != "" {
		v.SetConfigFile(path)
		if err := readConfigFile(v, path); err != nil {
			var notFound viper.ConfigFileNotFoundError
			if !errors.As(err, &notFound) && !os.IsNotExist(err) {
				if _, statErr := os.Stat(path); statErr == nil {
					return usageError{fmt.Errorf("config file %s: %w", path, err)}
				}
			}
		} else if err := unknownConfigKeys(cmd.Root(), path, v.AllKeys()); err != nil {
			return err
		}
	}
	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || noConfig(f) || !v.IsSet(f.Name) {
			return
		}
		val := v.Get(f.Name)
		var s string
		switch x := val.(type) {
		case []any:
			parts := make([]string, 0, len(x))
			for _, p := range x {
				parts = append(parts, fmt.Sprint(p))
			}
			s = strings.Join(parts, ",")
		default:
			s = fmt.Sprint(x)
		}
		if err := f.Value.Set(s); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q from environment or config file: %w", f.Name, s, err))
		}
	})
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}

// noConfigAnnotation marks a flag that only the command line sets: not
// VLLMCTL_<FLAG>, not the config file (a per-invocation choice such as
// --version, which a VLLMCTL_VERSION of a build environment must not set).
const noConfigAnnotation = "vllmctl/no-config"

// noConfig reports whether f is only set on the command line.
func noConfig(f *pflag.Flag) bool {
	_, ok := f.Annotations[noConfigAnnotation]
	return ok
}

// commandLineOnly marks the named flags of fs as set on the command line only.
func commandLineOnly(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		_ = fs.SetAnnotation(n, noConfigAnnotation, []string{"true"})
	}
}

// unknownConfigKeys refuses config file keys that are no flag of any
// command: a typo would otherwise be ignored silently.
func unknownConfigKeys(root *cobra.Command, path string, keys []string) error {
	known := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags(), c.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if !noConfig(f) {
					known[f.Name] = true
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	var unknown []string
	for _, k := range keys {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return newUsageError("config file %s: unknown keys %s (keys are flag names, e.g. timeout, history-max)", path, strings.Join(unknown, ", "))
	}
	return nil
}

// maxConfigFileBytes caps the config file: a few flag values.
const maxConfigFileBytes = 1 << 20

// readConfigFile reads the config file at path into v as v.ReadInConfig
// does (its extension names its format), but at most maxConfigFileBytes
// (charts.ReadFileCapped): a larger or endless file (a symlink to
// /dev/zero) is refused at once instead of read whole.
func readConfigFile(v *viper.Viper, path string) error {
	if ext := strings.TrimPrefix(filepath.Ext(path), "."); !slices.Contains(viper.SupportedExts, ext) {
		return viper.UnsupportedConfigError(ext)
	}
	data, err := charts.ReadFileCapped(path, maxConfigFileBytes)
	if err != nil {
		return err
	}
	return v.ReadConfig(bytes.NewReader(data))
}

func configFilePath() string {
	if p := os.Getenv("VLLMCTL_CONFIG"); p != "" {
		return p
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "vllmctl", "config.yaml")
}

// Execute runs the command tree. An error before any command ran is
// cobra's about the command line (an unknown command: cobra marks a
// command called once it finds it) and a usage error: exit code 2.
func Execute(ctx context.Context, cmd *cobra.Command) error {
	c, err := cmd.ExecuteContextC(ctx)
	if err != nil && c != nil && c.CalledAs() == "" {
		return usageError{err}
	}
	return err
}
