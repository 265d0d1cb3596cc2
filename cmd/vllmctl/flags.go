package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/vllmctl/vllmctl/release"
	"github.com/vllmctl/vllmctl/release/preflight"
	"github.com/vllmctl/vllmctl/wait"
)

// verdictFlags are the failure-verdict thresholds of the rollout watcher,
// shared by deploy, rollback and wait.
type verdictFlags struct {
	maxRestarts          int32
	maxOOMKills          int
	imagePullObservation int
	unschedulableTimeout time.Duration
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
	}
	return nil
}

// options returns the watcher options of the flags.
func (v *verdictFlags) options() wait.RolloutOptions {
	return wait.RolloutOptions{
		MaxRestarts:           v.maxRestarts,
		MaxOOMKills:           v.maxOOMKills,
		ImagePullObservations: v.imagePullObservation,
		UnschedulableTimeout:  v.unschedulableTimeout,
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
	fs.BoolVar(&p.skip, "skip-preflight", false, "do not check GPU, cpu, memory and quota headroom before applying")
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
	fs.DurationVar(&l.lease, "lock-lease", release.DefaultLease,
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
