//go:build race

package clustersim

// raceEnabled is true when the tests run under the race detector, which
// makes every step about ten times slower: TestSim then runs fewer
// schedules.
const raceEnabled = true
