package storage

import (
	"time"
)

// CanaryReport is what a canary phase did: in the revision's record, the
// result document and history.
type CanaryReport struct {
	// Count is --canary as given ("1", "34%").
	Count string `json:"count"`
	// Pods are the canary pods (Ready when the hold began).
	Pods []string `json:"pods"`
	// Hold is --canary-hold.
	Hold string `json:"hold"`
	// Gate is the gate command's run, when there is one.
	Gate *GateResult `json:"gate,omitempty"`
	// Outcome is promoted, failed, interrupted or skipped.
	Outcome string `json:"outcome"`
	// Reason says why the canary failed or was skipped.
	Reason string `json:"reason,omitempty"`
	// Phases are the phases run, in order, with their timings.
	Phases []CanaryPhase `json:"phases"`
}

// The outcomes of a canary.
const (
	CanaryPromoted    = "promoted"
	CanaryFailed      = "failed"
	CanaryInterrupted = "interrupted"
	CanarySkipped     = "skipped"
)

// CanaryPhase is one phase of a canary and its timing.
type CanaryPhase struct {
	Name            string    `json:"name"`
	Start           time.Time `json:"start"`
	DurationSeconds float64   `json:"durationSeconds"`
}

// GateResult is one run of a canary gate command.
type GateResult struct {
	Command string `json:"command"`
	// ExitCode is the command's exit code (-1 when it was killed).
	ExitCode int `json:"exitCode"`
	// TimedOut is set when --canary-gate-timeout killed it.
	TimedOut        bool     `json:"timedOut,omitempty"`
	DurationSeconds float64  `json:"durationSeconds"`
	OutputTail      []string `json:"outputTail,omitempty"`
}

// Passed reports whether the gate lets the canary promote.
func (g *GateResult) Passed() bool { return g != nil && g.ExitCode == 0 && !g.TimedOut }
