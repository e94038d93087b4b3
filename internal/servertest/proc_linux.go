package servertest

import (
	"os/exec"
	"syscall"
)

// sysProcAttr puts the server in its own process group (so that Stop kills
// its children too) and has the kernel kill it if the test binary dies
// first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills the server's process group, by its id.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
