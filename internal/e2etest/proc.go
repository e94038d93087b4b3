package e2etest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proc is a child process started by Start.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	// Out holds what the process wrote to the stdout and stderr that the
	// Cmd did not direct elsewhere.
	Out *SyncBuffer

	done chan struct{}
	err  error // Wait's result, once done is closed
	kill sync.Once
}

// Start starts cmd in its own process group (cmd.SysProcAttr, when nil).
// Its stdout and stderr, unless set, go to Out. When t ends the whole group
// is killed (SIGKILL, by the process id) and, if t failed, the tail of Out
// is logged.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Name: name, Cmd: cmd, Out: &SyncBuffer{}, done: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = p.Out
	}
	if cmd.Stderr == nil {
		cmd.Stderr = p.Out
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = groupAttr()
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("e2etest: starting %s (%s): %v", name, cmd.Path, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- %s (pid %d) output, last 80 lines ---\n%s", p.Name, p.Pid(), p.Out.Tail(80))
		}
	})
	return p
}

// Pid is the process id (also its process group id).
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Signal sends sig to the process (not its group).
func (p *Proc) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Done is closed when the process has exited and been waited for.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the result of waiting for the process; nil while it runs.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Running returns nil while the process runs and an error saying how it
// ended afterwards: a guard for WaitFor.
func (p *Proc) Running() error {
	if !p.Exited() {
		return nil
	}
	return fmt.Errorf("%s (pid %d) exited (%v)", p.Name, p.Pid(), p.Cmd.ProcessState)
}

// Kill kills the process group with SIGKILL (a stopped process too) and
// waits for the process. It is idempotent.
func (p *Proc) Kill() {
	p.kill.Do(func() {
		if !p.Exited() {
			killGroup(p.Cmd.Process)
		}
		select {
		case <-p.done:
		case <-time.After(Patience):
		}
	})
}

// Stop asks the process group to shut down (SIGTERM) and kills it when it
// has not exited within grace. It reports whether the process exited by
// itself within grace.
func (p *Proc) Stop(grace time.Duration) bool {
	if p.Exited() {
		return true
	}
	termGroup(p.Cmd.Process)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		p.Kill()
		return false
	}
}

// Wait waits until the process exits by itself and returns its error; when
// timeout passes first it kills the process and says so.
func (p *Proc) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s (pid %d) did not exit within %s; killed", p.Name, p.Pid(), timeout)
	}
}

// Result is how a process run by Run ended.
type Result struct {
	Stdout, Stderr string
	// Output is stdout and stderr interleaved as written.
	Output string
	// Code is the exit code (0: success).
	Code int
}

// Run runs cmd to its end in its own process group, with stdin, and
// returns its output and exit code. Failing to start, or not ending within
// timeout (the group is then killed), fails t.
func Run(t testing.TB, timeout time.Duration, cmd *exec.Cmd) Result {
	t.Helper()
	var stdout, stderr strings.Builder
	all := &SyncBuffer{}
	// Each builder is written by one copying goroutine only, and read
	// after Wait.
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, all), io.MultiWriter(&stderr, all)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = groupAttr()
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("e2etest: starting %s: %v", strings.Join(cmd.Args, " "), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		killGroup(cmd.Process)
		<-done
		t.Fatalf("e2etest: %s did not end within %s; output tail:\n%s", strings.Join(cmd.Args, " "), timeout, all.Tail(40))
	}
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), Output: all.String()}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("e2etest: %s: %v\n%s", strings.Join(cmd.Args, " "), err, all.Tail(40))
		}
		res.Code = ee.ExitCode()
	}
	return res
}
