package e2etest

import (
	"testing"

	"github.com/tidemark/tidemark/internal/dynalitetest"
	"github.com/tidemark/tidemark/internal/servertest"
)

// Required reports whether the environment demands the tests that need the
// binary or a server: CI, TIDEMARK_REQUIRE_DYNALITE or
// TIDEMARK_REQUIRE_SERVERS set. Then -short does not skip them, and a
// missing server is a failure.
func Required() bool { return dynalitetest.Required() || servertest.Required() }

// SkipUnderShort skips t under -short unless Required. why says what the
// test needs ("builds the connect binary", "runs dynalite").
func SkipUnderShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() && !Required() {
		t.Skip("-short: this test " + why + " (set TIDEMARK_REQUIRE_DYNALITE or TIDEMARK_REQUIRE_SERVERS to run it anyway)")
	}
}
