//go:build !unix

package release

import "os/exec"

// setProcessGroup leaves cmd as it is: the context kills the process.
func setProcessGroup(*exec.Cmd) {}
