package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vllmctl/vllmctl/charts/source"
)

func newRegistryCommand(g *GlobalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "registry",
		Short: "Log in to and out of OCI registries",
		Long: "Credentials of OCI registries are kept in Helm's registry config (HELM_REGISTRY_CONFIG,\n" +
			"under HELM_CONFIG_HOME), so a login with `helm registry login` is seen here and the other way\n" +
			"round; without a login there, docker's config is read, as helm does. A chart of a registry is\n" +
			"CHART oci://HOST/PATH/NAME in deploy, diff, template and lint.",
		Args: cobra.NoArgs,
		RunE: requireSubcommand("login or logout"),
	}
	cmd.AddCommand(newRegistryLoginCommand(g), newRegistryLogoutCommand(g))
	return cmd
}

// registryLoginOptions are the inputs of `vllmctl registry login HOST`.
type registryLoginOptions struct {
	g      *GlobalOptions
	source chartSourceFlags

	host string
	opts source.RegistryOptions
}

func newRegistryLoginCommand(g *GlobalOptions) *cobra.Command {
	o := &registryLoginOptions{g: g}
	cmd := &cobra.Command{
		Use:   "login HOST",
		Short: "Log in to an OCI registry",
		Long: "Check the credentials against the registry and store them in Helm's registry config, as\n" +
			"`helm registry login`. A registry that cannot be reached or refuses the credentials: exit 6,\n" +
			"nothing stored.",
		Example: "  echo \"$TOKEN\" | vllmctl registry login registry.example.com --username ci --password-stdin",
		Args:    cobra.ExactArgs(1),
		RunE:    runCommand(o),
	}
	fs := cmd.Flags()
	fs.StringVar(&o.source.username, "username", "", "registry username")
	fs.BoolVar(&o.source.passwordStdin, "password-stdin", false, "read the registry password (or token) from stdin")
	fs.StringVar(&o.source.caFile, "ca-file", "", "verify the registry's certificate with this CA bundle")
	fs.StringVar(&o.source.certFile, "cert-file", "", "client certificate for the registry (TLS)")
	fs.StringVar(&o.source.keyFile, "key-file", "", "client key for the registry (TLS)")
	fs.BoolVar(&o.source.insecure, "insecure", false, "do not verify the registry's certificate")
	fs.BoolVar(&o.source.plainHTTP, "plain-http", false, "talk HTTP, not HTTPS, to the registry")
	commandLineOnly(fs, "password-stdin")
	return cmd
}

// Complete reads the password with --password-stdin.
func (o *registryLoginOptions) Complete(_ *cobra.Command, args []string) error {
	so, err := o.source.options(o.g.Streams.In)
	if err != nil {
		return err
	}
	o.host = args[0]
	o.opts = source.RegistryOptions{
		Username: so.Username, Password: so.Password, PlainHTTP: so.PlainHTTP,
		CAFile: so.CAFile, CertFile: so.CertFile, KeyFile: so.KeyFile, InsecureSkipTLSVerify: so.InsecureSkipTLSVerify,
	}
	return nil
}

// Validate asks for the credentials.
func (o *registryLoginOptions) Validate() error {
	if o.opts.Username == "" || o.opts.Password == "" {
		return newUsageError("registry login needs --username and --password-stdin")
	}
	return nil
}

// Run logs in.
func (o *registryLoginOptions) Run(ctx context.Context) error {
	if err := source.RegistryLogin(ctx, source.Settings(), o.host, o.opts); err != nil {
		return err
	}
	_, err := fmt.Fprintln(o.g.Streams.Out, "Login Succeeded")
	return err
}

// registryLogoutOptions are the inputs of `vllmctl registry logout HOST`.
type registryLogoutOptions struct {
	g    *GlobalOptions
	host string
}

func newRegistryLogoutCommand(g *GlobalOptions) *cobra.Command {
	o := &registryLogoutOptions{g: g}
	return &cobra.Command{
		Use:   "logout HOST",
		Short: "Log out of an OCI registry",
		Long:  "Remove the registry's credentials from Helm's registry config, as `helm registry logout`.",
		Args:  cobra.ExactArgs(1),
		RunE:  runCommand(o),
	}
}

// Complete takes the host.
func (o *registryLogoutOptions) Complete(_ *cobra.Command, args []string) error {
	o.host = args[0]
	return nil
}

// Validate has nothing to check.
func (o *registryLogoutOptions) Validate() error { return nil }

// Run logs out.
func (o *registryLogoutOptions) Run(ctx context.Context) error {
	if err := source.RegistryLogout(ctx, source.Settings(), o.host); err != nil {
		return err
	}
	_, err := fmt.Fprintf(o.g.Streams.Out, "Removing login credentials for %s\n", o.host)
	return err
}
