package analysis

import "github.com/vllmctl/vllmctl/release/storage"

// Of is the analysis of a deploy: file (--analysis FILE, already
// validated), else the chart's analysis values when the chart is
// the built-in one (its default values carry enabled) and they
// are enabled; canary says the deploy has one (--canary), prometheus that
// it was given --prometheus-url. An invalid spec is exit code 2, before
// anything is applied.
func Of(file *Config, defaults, computed map[string]any, canary, prometheus bool) (*Config, error) {
	cfg := file
	if cfg == nil {
		if d, ok := defaults["analysis"].(map[string]any); !ok || d["enabled"] == nil {
			return nil, nil
		}
		spec, err := FromValues(computed)
		if err != nil || spec == nil {
			return nil, err
		}
		if cfg, err = spec.Validate("values analysis", canary); err != nil {
			return nil, err
		}
	}
	if cfg.Provider == ProviderPrometheus && !prometheus {
		return nil, &InputError{Source: cfg.Source, Field: "provider", Msg: "prometheus needs --prometheus-url"}
	}
	return cfg, nil
}

// OfWait is the analysis a wait on rec bakes once the rollout is Ready
// and serving: file (`wait --analysis FILE`, already validated without a
// baseline; prometheus: --prometheus-url given), else the revision's recorded analysis
// values when its chart is the built-in one and they are enabled. A wait
// has no canary: a --analysis spec with a check that compares with
// stable pods is refused, as deploy without --canary refuses it (exit
// code 2, before anything is waited for); recorded values with such a
// check (written for deploy --canary) are not baked, and skip says why.
func OfWait(file *Config, rec *storage.Release, prometheus bool) (cfg *Config, skip string, err error) {
	cfg = file
	if cfg == nil {
		if !rec.Chart.Builtin {
			return nil, "", nil
		}
		values := rec.ComputedValues
		if values == nil {
			values = rec.Values
		}
		spec, err := FromValues(values)
		if err != nil || spec == nil {
			return nil, "", err
		}
		if cfg, err = spec.Validate("values analysis", true); err != nil {
			return nil, "", err
		}
		if cfg.NeedsBaseline() {
			return nil, "the revision's analysis values compare the canary with the stable pods (deploy --canary): a wait has no canary, so it bakes none; wait --analysis FILE bakes one without a baseline", nil
		}
	}
	if cfg.Provider == ProviderPrometheus && !prometheus {
		return nil, "", &InputError{Source: cfg.Source, Field: "provider", Msg: "prometheus needs --prometheus-url"}
	}
	return cfg, "", nil
}
