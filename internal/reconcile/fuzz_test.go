package reconcile

import (
	"strings"
	"testing"
)

// FuzzClassify plays the scenario of scenario_test.go with the fuzzer's
// bytes as its choices: no input panics, and the oracle's safety property
// holds for every promotion the core allows. Run it in CI for a bounded
// time: go test -run='^$' -fuzz=FuzzClassify -fuzztime=20s ./internal/reconcile/
func FuzzClassify(f *testing.F) {
	for _, seed := range [][]byte{
		nil,
		{0, 0, 0, 1, 0, 0, 1, 1, 2, 1, 0, 3, 2, 2, 2, 2},
		// Dense positions, the retry drops an event (502 in
		// docs/design.md#retry-example).
		{1, 1, 0, 1, 1, 1, 1, 1, 1, 2, 1, 0, 1, 2, 0, 1, 2, 5, 0},
		// Sparse with markers: insert, evidence, replay.
		{2, 0, 1, 0, 0, 2, 3, 1, 3, 1, 3, 4, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0, 0},
		// Empty pages and token rotation.
		{0, 0, 1, 1, 1, 0, 2, 2, 4, 2, 3, 0, 6, 1, 0, 0, 1, 0, 0, 4, 0},
		// Renumbering insert under dense positions, boundary repeats.
		{1, 1, 0, 0, 0, 1, 1, 0, 1, 4, 4, 0, 3, 1, 2, 8, 0, 1, 0, 8, 2},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, log, err := runScenario(&bytesChooser{b: b}); err != nil {
			t.Fatalf("%v\n%s", err, strings.Join(log, "\n"))
		}
	})
}
