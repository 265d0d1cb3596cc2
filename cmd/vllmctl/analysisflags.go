package main

import (
	"github.com/spf13/pflag"

	"github.com/vllmctl/vllmctl/release/analysis"
)

// analysisFlags are deploy's canary analysis: --analysis FILE.
type analysisFlags struct {
	file string

	cfg *analysis.Config
}

// AddFlags registers the analysis flags on fs.
func (a *analysisFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&a.file, "analysis", "",
		"analysis spec (YAML: provider, interval, count, minRequests, inconclusive, load, presets, metrics): measure the canary pods against the stable pods during the canary hold (with --canary)")
}

// Validate reads and checks the spec (exit code 2 naming the field);
// it needs --canary (canary says whether it was given).
func (a *analysisFlags) Validate(canary bool) error {
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
	if !canary {
		return newUsageError("--analysis %s: the analysis runs during the canary hold: it needs --canary", a.file)
	}
	a.cfg = cfg
	return nil
}
