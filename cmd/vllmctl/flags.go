package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/preflight"
	"github.com/vllmctl/vllmctl/release/servecheck"
	"github.com/vllmctl/vllmctl/release/storage"
	"github.com/vllmctl/vllmctl/wait"
)

// verdictFlags are the failure-verdict thresholds of the rollout watcher,
// shared by deploy, rollback and wait.
type verdictFlags struct {
	maxRestarts          int32
	maxOOMKills          int
	imagePullObservation int
	unschedulableTimeout time.Duration
	controllerStall      time.Duration
	failOnKnownCause     bool
}

// AddFlags registers the verdict thresholds on fs.
func (v *verdictFlags) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&v.maxRestarts, "max-restarts", wait.DefaultMaxRestarts,
		"fail the rollout when a container of a new pod is in CrashLoopBackOff with this many restarts")
	fs.IntVar(&v.maxOOMKills, "max-oom-kills", wait.DefaultMaxOOMKills,
		"fail the rollout after this many OOMKilled terminations of a container of a new pod")
	fs.IntVar(&v.imagePullObservation, "image-pull-observations", wait.DefaultImagePullObservations,
		"fail the rollout after this many consecutive observations of a new pod's image pull error")
	fs.DurationVar(&v.unschedulableTimeout, "unschedulable-timeout", wait.DefaultUnschedulableTimeout,
		"fail the rollout when a new pod stays unschedulable this long")
	fs.DurationVar(&v.controllerStall, "controller-stall-timeout", wait.DefaultControllerStallTimeout,
		"fail the rollout (verdict ControllerStalled) when the controller of a Deployment, StatefulSet, Job or LeaderWorkerSet has not observed its latest generation this long while the API server answers (kube-controller-manager not running)")
	fs.BoolVar(&v.failOnKnownCause, "fail-on-known-cause", true,
		"fail the rollout at a container's first termination when its log names gpu-oom, kv-cache, model-auth, model-not-found, dtype-unsupported, tensor-parallel, gpu-not-visible or cuda-driver (false: such crashes wait for --max-restarts too)")
}

// Validate checks the thresholds.
func (v *verdictFlags) Validate() error {
	switch {
	case v.maxRestarts < 1:
		return newUsageError("--max-restarts %d: must be 1 or more", v.maxRestarts)
	case v.maxOOMKills < 1:
		return newUsageError("--max-oom-kills %d: must be 1 or more", v.maxOOMKills)
	case v.imagePullObservation < 1:
		return newUsageError("--image-pull-observations %d: must be 1 or more", v.imagePullObservation)
	case v.unschedulableTimeout <= 0:
		return newUsageError("--unschedulable-timeout %s: must be positive", v.unschedulableTimeout)
	case v.controllerStall <= 0:
		return newUsageError("--controller-stall-timeout %s: must be positive", v.controllerStall)
	}
	return nil
}

// options returns the watcher options of the flags.
func (v *verdictFlags) options() wait.RolloutOptions {
	return wait.RolloutOptions{
		MaxRestarts:            v.maxRestarts,
		MaxOOMKills:            v.maxOOMKills,
		ImagePullObservations:  v.imagePullObservation,
		UnschedulableTimeout:   v.unschedulableTimeout,
		ControllerStallTimeout: v.controllerStall,
		WaitOnKnownCause:       !v.failOnKnownCause,
	}
}

// preflightFlags select the capacity preflight and the surge policy.
type preflightFlags struct {
	policy      string
	skip        bool
	surgePolicy preflight.SurgePolicy
}

// AddFlags registers --surge-policy and --skip-preflight on fs.
func (p *preflightFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&p.policy, "surge-policy", string(preflight.SurgePolicyAuto),
		"when the rollout's surge cannot fit the free GPUs/quota: auto (switch to maxSurge 0 within the PodDisruptionBudget), strict (refuse) or off (report only)")
	fs.BoolVar(&p.skip, "skip-preflight", false, "do not run the preflights: GPU, cpu, memory and quota headroom, and whether each vLLM model fits its GPUs")
}

// Validate checks --surge-policy.
func (p *preflightFlags) Validate() error {
	policy, err := preflight.ParseSurgePolicy(p.policy)
	if err != nil {
		return err
	}
	p.surgePolicy = policy
	return nil
}

// lockFlags are the terms of the lock an operation takes.
type lockFlags struct {
	lease time.Duration
}

// AddFlags registers --lock-lease on fs.
func (l *lockFlags) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&l.lease, "lock-lease", storage.DefaultLease,
		"how long this operation's lock survives without renewal (renewed every third of it) before another operation takes it over")
}

// Validate checks the lease.
func (l *lockFlags) Validate() error {
	if l.lease < 4*time.Second {
		return newUsageError("--lock-lease %s: must be 4s or more", l.lease)
	}
	return nil
}

// apply sets the lease on engine (which renews every third of it).
func (l *lockFlags) apply(engine *release.Engine) {
	engine.Lease = l.lease
}

// outputFlags is -o/--output: table, json or yaml.
type outputFlags struct {
	format string
	// help is the flag's help; "": outputHelp.
	help string
}

// outputHelp is the help of -o/--output.
const outputHelp = "output format: table, json or yaml"

// AddFlags registers -o/--output on fs.
func (o *outputFlags) AddFlags(fs *pflag.FlagSet) {
	help := o.help
	if help == "" {
		help = outputHelp
	}
	fs.StringVarP(&o.format, "output", "o", "table", help)
}

// Validate checks the format.
func (o *outputFlags) Validate() error {
	return validateRecordOutput(o.format)
}

// timeoutFlags is --timeout.
type timeoutFlags struct {
	timeout time.Duration
	given   bool // chosen by the user (flagGiven)
	help    string
}

// Help texts of --timeout.
const (
	// rolloutTimeoutHelp is deploy's and rollback's.
	rolloutTimeoutHelp = "how long to wait for the rollout (and, at most, to watch another operation's lock for renewals); " + timeoutFollowsHelp
	// waitTimeoutHelp is wait's.
	waitTimeoutHelp = "how long to wait for the revision's objects to become ready; " + timeoutFollowsHelp
	// staleLockTimeoutHelp is uninstall's.
	staleLockTimeoutHelp = "the age after which another operation's lock is stale"
)

// timeoutFollowsHelp ends the help of the --timeout flags of deploy,
// rollback and wait.
const timeoutFollowsHelp = "without one (flag, VLLMCTL_TIMEOUT or config file) it follows the pods' start-up budget " +
	"(the largest startup probe budget plus readiness initial delay, plus 1m) when that is longer than the default"

// AddFlags registers --timeout on fs.
func (t *timeoutFlags) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&t.timeout, "timeout", release.DefaultTimeout, t.help)
}

// Complete notes whether the user chose the timeout (flagGiven).
func (t *timeoutFlags) Complete(fs *pflag.FlagSet, g *GlobalOptions) {
	t.given = flagGiven(fs, g, "timeout")
}

// Validate checks the timeout.
func (t *timeoutFlags) Validate() error {
	if t.timeout <= 0 {
		return newUsageError("--timeout %s: must be positive", t.timeout)
	}
	return nil
}

// givenTimeout is the timeout an operation passes to the release engine: the
// --timeout the user chose, or 0 when none was given, for the engine to
// follow the objects' start-up budget (release.StartupTimeout).
func (t *timeoutFlags) givenTimeout() time.Duration {
	if t.given {
		return t.timeout
	}
	return 0
}

// historyFlags is --history-max.
type historyFlags struct {
	max  int
	help string
}

// Help texts of --history-max.
const (
	historyMaxHelp         = "release records to keep (0: unlimited)"
	rollbackHistoryMaxHelp = "release records the rollback keeps (0: unlimited)"
)

// AddFlags registers --history-max on fs.
func (h *historyFlags) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&h.max, "history-max", release.DefaultHistoryMax, h.help)
}

// Validate checks the number.
func (h *historyFlags) Validate() error {
	if h.max < 0 {
		return newUsageError("--history-max %d: must be 0 (unlimited) or more", h.max)
	}
	return nil
}

// conflictFlags is --force-conflicts.
type conflictFlags struct {
	force bool
	help  string
}

// Help texts of --force-conflicts.
const (
	forceConflictsHelp         = "take over fields other field managers own"
	rollbackForceConflictsHelp = "let the rollback take over fields other field managers own"
	diffForceConflictsHelp     = "dry-run as deploy --force-conflicts would: take over fields other field managers own"
)

// AddFlags registers --force-conflicts on fs.
func (c *conflictFlags) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&c.force, "force-conflicts", false, c.help)
}

// unlockFlags is --force-unlock.
type unlockFlags struct {
	force bool
}

// AddFlags registers --force-unlock on fs.
func (u *unlockFlags) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&u.force, "force-unlock", false, "take over the lock of another operation on the release")
}

// flagGiven reports whether the user chose the value of the flag name: on
// the command line, in VLLMCTL_<NAME> or in the config file. A value from
// the environment or the config file leaves the flag unchanged (see
// bindConfig): viper knows it was set.
func flagGiven(fs *pflag.FlagSet, g *GlobalOptions, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	return f.Changed || (g != nil && g.v != nil && g.v.IsSet(name)) || f.Value.String() != f.DefValue
}

// rollbackTimeoutFlags is --rollback-timeout, the time budget of a
// rollback after a failure (deploy, wait).
type rollbackTimeoutFlags struct {
	timeout time.Duration
	help    string
}

// AddFlags registers --rollback-timeout on fs.
func (r *rollbackTimeoutFlags) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&r.timeout, "rollback-timeout", release.DefaultRollbackTimeout, r.help)
}

// Validate checks the budget.
func (r *rollbackTimeoutFlags) Validate() error {
	if r.timeout <= 0 {
		return newUsageError("--rollback-timeout %s: must be positive", r.timeout)
	}
	return nil
}

// serveCheckFlags are --serve-check and --serve-check-timeout: the serve
// check of deploy, rollback, wait, fleet and test.
type serveCheckFlags struct {
	enabled bool
	timeout time.Duration
	// enabledGiven and timeoutGiven: chosen by the user (command line,
	// environment or config file), not defaults.
	enabledGiven, timeoutGiven bool
}

// AddFlags registers the flags on fs.
func (s *serveCheckFlags) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&s.enabled, "serve-check", true,
		"once the new pods are Ready (and during a canary hold), check that each lists the served model on /v1/models and completes one short request, "+
			"through the API server's port-forward (verdict NotServing); on by default for the built-in chart (its serveCheck values), "+
			"for other charts only when given (or their values say serveCheck.enabled: true)")
	fs.DurationVar(&s.timeout, "serve-check-timeout", wait.DefaultServeTimeout,
		"how long each pod has to pass the serve check, retries included (default: the chart's serveCheck.timeout, else 60s)")
}

// Complete notes which flags the user chose.
func (s *serveCheckFlags) Complete(fs *pflag.FlagSet, g *GlobalOptions) {
	s.enabledGiven = flagGiven(fs, g, "serve-check")
	s.timeoutGiven = flagGiven(fs, g, "serve-check-timeout")
}

// Validate checks --serve-check-timeout.
func (s *serveCheckFlags) Validate() error {
	return servecheck.ValidateTimeout("--serve-check-timeout", s.timeout)
}

// options are the engine's serve check options of the flags: only what
// the user chose, the chart's values deciding the rest.
func (s *serveCheckFlags) options() servecheck.Options {
	var o servecheck.Options
	if s.enabledGiven {
		on := s.enabled
		o.Enabled = &on
	}
	if s.timeoutGiven {
		o.Timeout = s.timeout
	}
	return o
}
