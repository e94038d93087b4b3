package e2etest

import "syscall"

// groupAttr puts a child in its own process group, and has the kernel kill
// it when the test binary dies first.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
