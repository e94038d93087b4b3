//go:build unix

package e2etest

import (
	"os"
	"syscall"
)

// killGroup sends SIGKILL to the process group of p (by its id).
func killGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }

// termGroup sends SIGTERM to the process group of p.
func termGroup(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGTERM) }
