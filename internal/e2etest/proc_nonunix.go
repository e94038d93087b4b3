//go:build !unix

package e2etest

import (
	"os"
	"syscall"
)

func groupAttr() *syscall.SysProcAttr { return nil }

func killGroup(p *os.Process) { _ = p.Kill() }

func termGroup(p *os.Process) { _ = p.Kill() }
