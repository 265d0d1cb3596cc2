//go:build !unix

package canary

import "os/exec"

// setProcessGroup leaves cmd as it is: the context kills the process.
func setProcessGroup(*exec.Cmd) {}

// killProcessGroup does nothing: without process groups, the gate's
// children are not tracked (its output is still read no longer than
// gateDrainDelay after the shell exits).
func killProcessGroup(*exec.Cmd) {}
