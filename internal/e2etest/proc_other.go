//go:build unix && !linux

package e2etest

import "syscall"

// groupAttr puts a child in its own process group.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
