package servertest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the server under test (the helper-process
// pattern): run as `<test binary> -test.run=^$ -- serve ADDR` it serves HTTP
// on ADDR; as `... -- exit` it exits at once.
func TestMain(m *testing.M) {
	if args := helperArgs(); args != nil {
		switch args[0] {
		case "serve":
			l, err := net.Listen("tcp", args[1])
			if err != nil {
				fmt.Fprintln(os.Stderr, "helper:", err)
				os.Exit(3)
			}
			fmt.Println("helper: serving on", l.Addr())
			_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, "ok")
			}))
		case "exit":
			fmt.Fprintln(os.Stderr, "helper: exiting at once")
		}
		os.Exit(4)
	}
	os.Exit(m.Run())
}

func helperArgs() []string {
	for i, a := range os.Args {
		if a == "--" && i+1 < len(os.Args) {
			return os.Args[i+1:]
		}
	}
	return nil
}

// helper returns a Config that runs the test binary as a helper server.
func helper(args func(port int) []string) Config {
	return Config{
		Name: "helper",
		Command: func(ports []int) []string {
			return append([]string{os.Args[0], "-test.run=^$", "--"}, args(ports[0])...)
		},
		StartTimeout: 5 * time.Second,
	}
}

// recorder is a testing.TB whose Skip and Fatalf are recorded instead of
// ending the test, to test the helpers' own failure paths.
type recorder struct {
	testing.TB
	skipped string
	failed  string
}

func (r *recorder) Skip(args ...any)                  { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUnavailableSkipsOrFails(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv("TIDEMARK_REQUIRE_SERVERS", "")
	r := &recorder{TB: t}
	NodeScript(r, "no-such-package-tidemark", "bin/x")
	if r.failed != "" || !strings.Contains(r.skipped, "no-such-package-tidemark") || !strings.Contains(r.skipped, InstallHint) {
		t.Fatalf("without CI: skipped %q failed %q; want a skip naming the package and %s", r.skipped, r.failed, InstallHint)
	}
	for _, env := range []string{"CI", "TIDEMARK_REQUIRE_SERVERS"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "1")
			r := &recorder{TB: t}
			Binary(r, "no-such-binary-tidemark")
			if r.skipped != "" || !strings.Contains(r.failed, "no-such-binary-tidemark") || !strings.Contains(r.failed, InstallHint) {
				t.Fatalf("with %s: skipped %q failed %q; want a failure", env, r.skipped, r.failed)
			}
		})
	}
}

func TestModuleRoot(t *testing.T) {
	root := ModuleRoot(t)
	b, err := os.ReadFile(root + "/go.mod")
	if err != nil || !strings.Contains(string(b), "module github.com/tidemark/tidemark") {
		t.Fatalf("ModuleRoot = %s: %v", root, err)
	}
}

func TestStartServesAndStops(t *testing.T) {
	var port int
	s := Start(t, helper(func(p int) []string {
		port = p
		return []string{"serve", "127.0.0.1:" + strconv.Itoa(p)}
	}))
	if s.URL != "http://127.0.0.1:"+strconv.Itoa(port) {
		t.Fatalf("URL %s for port %d", s.URL, port)
	}
	if err := HTTPProbe(http.MethodGet, "/", "", http.StatusOK)(context.Background(), s.URL); err != nil {
		t.Fatal(err)
	}
	pid := s.cmd.Process.Pid
	s.Stop()
	s.Stop() // idempotent
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("server pid %d still running after Stop", pid)
	}
	if _, err := http.Get(s.URL); err == nil {
		t.Fatal("server still answers after Stop")
	}
}

func TestStartServerThatExits(t *testing.T) {
	r := &recorder{TB: t}
	s := Start(r, helper(func(int) []string { return []string{"exit"} }))
	if s != nil || !strings.Contains(r.failed, "exited") || !strings.Contains(r.failed, "exiting at once") {
		t.Fatalf("Start of a server that exits: %v, failure %q; want a failure with its output", s, r.failed)
	}
}

func TestStartRefusesServerOnAllInterfaces(t *testing.T) {
	if !hasNonLoopbackAddr() {
		t.Skip("this machine has no non-loopback address to check against")
	}
	r := &recorder{TB: t}
	Start(r, helper(func(p int) []string { return []string{"serve", ":" + strconv.Itoa(p)} }))
	if !strings.Contains(r.failed, "must bind 127.0.0.1 only") {
		t.Fatalf("a server listening on every interface was accepted (failure %q)", r.failed)
	}
}

func hasNonLoopbackAddr() bool {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return true
		}
	}
	return false
}
