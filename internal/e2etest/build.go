package e2etest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

var build struct {
	once sync.Once
	dir  string
	path string
	took time.Duration
	err  error
}

// ModuleRoot is the repository root (this file is internal/e2etest/build.go).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("e2etest: cannot locate the module root")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Connect returns the path of the connect binary, built from ./cmd/connect
// on the first call of the test process. Under -short it skips t (see
// SkipUnderShort); a build failure fails every test that asks for it.
func Connect(t testing.TB) string {
	t.Helper()
	SkipUnderShort(t, "builds and runs the connect binary")
	root := ModuleRoot(t)
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "tidemark-e2e-")
		if build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "connect")
		start := time.Now()
		cmd := exec.Command("go", "build", "-o", build.path, "./cmd/connect")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build ./cmd/connect: %v\n%s", err, out)
			return
		}
		build.took = time.Since(start)
		t.Logf("e2etest: built %s in %s", build.path, build.took.Round(time.Millisecond))
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// Main runs the tests of a package and removes the binary Connect built.
// Use it as the package's TestMain:
//
//	func TestMain(m *testing.M) { e2etest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
	os.Exit(code)
}
