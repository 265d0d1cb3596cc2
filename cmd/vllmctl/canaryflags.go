package main

import (
	"time"

	"github.com/spf13/pflag"
	"github.com/vllmctl/vllmctl/release/canary"
)

// canaryFlags are deploy's canary gate: --canary N|P%, --canary-hold,
// --canary-gate, --canary-gate-timeout, --canary-max-restarts.
type canaryFlags struct {
	count       string
	hold        time.Duration
	gate        string
	gateTimeout time.Duration
	maxRestarts int32

	holdSet bool
	opts    *canary.Options
}

// AddFlags registers the canary flags on fs.
func (c *canaryFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.count, "canary", "",
		"roll out N new pods (or P% of the replicas) first, hold them under watch, run --canary-gate, then promote or roll back")
	fs.DurationVar(&c.hold, "canary-hold", canary.DefaultHold, "how long the Ready canary pods are watched before the gate (with --canary)")
	fs.StringVar(&c.gate, "canary-gate", "",
		"shell command run once after the hold, with VLLMCTL_RELEASE, VLLMCTL_NAMESPACE, VLLMCTL_REVISION, VLLMCTL_CANARY_PODS and VLLMCTL_SERVICE set: exit 0 promotes")
	fs.DurationVar(&c.gateTimeout, "canary-gate-timeout", canary.DefaultGateTimeout, "time limit of the canary gate command")
	fs.Int32Var(&c.maxRestarts, "canary-max-restarts", 0, "restarts a canary container may have before the canary fails")
}

// Validate parses the flags; canary flags without --canary are refused.
func (c *canaryFlags) Validate(fs *pflag.FlagSet) error {
	if c.count == "" {
		for _, name := range []string{"canary-hold", "canary-gate", "canary-gate-timeout", "canary-max-restarts"} {
			if fs.Changed(name) {
				return newUsageError("--%s needs --canary", name)
			}
		}
		return nil
	}
	count, err := canary.ParseCount(c.count)
	if err != nil {
		return newUsageError("%s", err.Error())
	}
	switch {
	case c.hold < 0:
		return newUsageError("--canary-hold %s: must not be negative", c.hold)
	case c.gateTimeout <= 0:
		return newUsageError("--canary-gate-timeout %s: must be positive", c.gateTimeout)
	case c.maxRestarts < 0:
		return newUsageError("--canary-max-restarts %d: must be 0 or more", c.maxRestarts)
	}
	c.opts = &canary.Options{Count: count, Hold: c.hold, Gate: c.gate, GateTimeout: c.gateTimeout, MaxRestarts: c.maxRestarts}
	return nil
}
