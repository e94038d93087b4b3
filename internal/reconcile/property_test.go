package reconcile

import (
	"flag"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

var propertySeed = flag.Int64("witness.seed", -1, "run only this seed of TestProperty_RetriesNeverSkipAnEvent")

// TestProperty_RetriesNeverSkipAnEvent plays seeded random scenarios (see
// scenario_test.go): random page sequences with random retries and
// mutations. The classifier never allows a promotion that skips an event
// some fetch showed existed (beyond what a coverage proof covers), never
// promotes with another response's verdict, never lets a loser publish, and
// always accepts exact replays of an accepted history.
func TestProperty_RetriesNeverSkipAnEvent(t *testing.T) {
	first, last := int64(0), int64(4000)
	if *propertySeed >= 0 {
		first, last = *propertySeed, *propertySeed+1
	}
	var total stats
	for seed := first; seed < last; seed++ {
		st, log, err := runScenario(rand.New(rand.NewPCG(uint64(seed), 0x7a11)))
		total.add(st)
		if err != nil {
			t.Fatalf("seed %d: %v\n%s\nrerun: go test ./internal/reconcile/ -run TestProperty_RetriesNeverSkipAnEvent -witness.seed=%d -v",
				seed, err, strings.Join(log, "\n"), seed)
		}
		if *propertySeed >= 0 {
			t.Log(strings.Join(log, "\n"))
		}
	}
	t.Logf("%d fetches, %d promotions offered, %d bad responses, %d replays, classes %v", total.fetches, total.promotions, total.errors, total.replays, total.classes)
	if *propertySeed < 0 {
		// The scenarios must exercise every outcome, or the property is
		// vacuous.
		assert.Greater(t, total.promotions, 1000)
		assert.Greater(t, total.errors, 100)
		assert.Greater(t, total.replays, 500)
		for c := FirstResponse; c <= HeadGrowth; c++ {
			assert.Greater(t, total.classes[c], 100, c.String())
		}
	}
}
