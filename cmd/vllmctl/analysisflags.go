package main

import (
	"github.com/spf13/pflag"

	"github.com/vllmctl/vllmctl/release/analysis"
)

// analysisFlags are the canary analysis of deploy, wait and fleet deploy:
// --analysis FILE and the prometheus provider's endpoint
// (--prometheus-url, --prometheus-token-file or --prometheus-username
// with --prometheus-password-file, --prometheus-ca-file).
type analysisFlags struct {
	// help is --analysis' help (default: deploy's).
	help string

	file                       string
	promURL, promToken, promCA string
	promUser, promPasswordFile string

	cfg  *analysis.Config
	prom *analysis.PrometheusEndpoint
}

// The help of --analysis: deploy's, and that of the commands without a
// canary (wait, fleet deploy), which bake the new pods alone.
const (
	deployAnalysisHelp   = "analysis spec (YAML: provider, interval, count, minRequests, inconclusive, load, presets, metrics): measure the canary pods against the stable pods during the canary hold (--canary), or the new pods alone after the rollout"
	rollbackAnalysisHelp = "analysis spec (YAML: provider, interval, count, minRequests, inconclusive, load, presets, metrics): measure the restored pods alone once they are Ready and serving; a refusal fails the rollback (presets that compare with stable pods are refused)"
	bakeAnalysisHelp     = "analysis spec (YAML: provider, interval, count, minRequests, inconclusive, load, presets, metrics): measure the new pods alone once they are Ready and serving (presets that compare with stable pods are refused)"
)

// AddFlags registers the analysis flags on fs.
func (a *analysisFlags) AddFlags(fs *pflag.FlagSet) {
	help := a.help
	if help == "" {
		help = deployAnalysisHelp
	}
	fs.StringVar(&a.file, "analysis", "", help)
	fs.StringVar(&a.promURL, "prometheus-url", "", "Prometheus HTTP API the analysis' prometheus provider queries (e.g. http://prometheus.monitoring:9090)")
	fs.StringVar(&a.promToken, "prometheus-token-file", "", "file holding a bearer token for --prometheus-url (read at every query)")
	fs.StringVar(&a.promUser, "prometheus-username", "", "basic-auth user name for --prometheus-url (with --prometheus-password-file)")
	fs.StringVar(&a.promPasswordFile, "prometheus-password-file", "", "file holding the basic-auth password for --prometheus-url (read at every query, never printed)")
	fs.StringVar(&a.promCA, "prometheus-ca-file", "", "PEM CA bundle that signs --prometheus-url's certificate")
}

// Validate reads and checks the spec (exit code 2 naming the field);
// without --canary (canary says whether it was given) the checks that
// compare with the stable pods are refused.
func (a *analysisFlags) Validate(fs *pflag.FlagSet, canary bool) error {
	if a.promURL == "" {
		for _, name := range []string{"prometheus-token-file", "prometheus-username", "prometheus-password-file", "prometheus-ca-file"} {
			if fs.Changed(name) {
				return newUsageError("--%s needs --prometheus-url", name)
			}
		}
	} else {
		a.prom = &analysis.PrometheusEndpoint{URL: a.promURL, TokenFile: a.promToken,
			Username: a.promUser, PasswordFile: a.promPasswordFile, CAFile: a.promCA}
		if err := a.prom.Check(); err != nil {
			return err
		}
	}
	if a.file == "" {
		return nil
	}
	spec, err := analysis.ReadFile(a.file)
	if err != nil {
		return err
	}
	cfg, err := spec.Validate(a.file, canary)
	if err != nil {
		return err
	}
	if cfg.Provider == analysis.ProviderPrometheus && a.prom == nil {
		return newUsageError("--analysis %s: provider: prometheus needs --prometheus-url", a.file)
	}
	a.cfg = cfg
	return nil
}
