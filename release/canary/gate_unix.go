//go:build unix

package canary

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs cmd in a process group of its own, killed whole
// when its context ends (a gate's children, such as curl, die with it).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// killProcessGroup kills what is left of cmd's process group once its
// shell has exited: the gate's background children never outlive it. The
// group keeps the shell's pid as its id while any member lives; an empty
// group is ESRCH, nothing to kill.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
