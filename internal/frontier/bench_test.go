package frontier

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tidemark/tidemark/internal/coord"
)

var benchSizes = []int{10_000, 100_000}

// benchTracker returns a tracker of n partitions, each with an integer
// watermark in [0, 1000), and those watermarks.
func benchTracker(b *testing.B, n int) (*Tracker, []string, []int64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	names := make([]string, n)
	marks := make([]int64, n)
	for i := range names {
		names[i] = fmt.Sprintf("shard-%06d", i)
	}
	tr, err := NewTracker(1, names)
	if err != nil {
		b.Fatal(err)
	}
	for i := range names {
		marks[i] = rng.Int64N(1000)
		if _, err := tr.Update(names[i], coord.Integer(marks[i])); err != nil {
			b.Fatal(err)
		}
	}
	return tr, names, marks
}

// BenchmarkTrackerUpdate advances one random partition per operation by a
// random step of 1..100 (the picks are precomputed so the generator is not
// measured).
func BenchmarkTrackerUpdate(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("P=%d", n), func(b *testing.B) {
			tr, names, marks := benchTracker(b, n)
			const mask = 1<<16 - 1
			rng := rand.New(rand.NewPCG(7, uint64(n)))
			picks := make([]int, mask+1)
			steps := make([]int64, mask+1)
			for i := range picks {
				picks[i] = rng.IntN(n)
				steps[i] = rng.Int64N(100) + 1
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				k := picks[i&mask]
				marks[k] += steps[i&mask]
				i++
				if _, err := tr.Update(names[k], coord.Integer(marks[k])); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTrackerUpdateMinHolder always advances the partition holding the
// frontier, the worst case for the heap (it sifts down from the root).
func BenchmarkTrackerUpdateMinHolder(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("P=%d", n), func(b *testing.B) {
			tr, _, _ := benchTracker(b, n)
			b.ReportAllocs()
			i := int64(0)
			for b.Loop() {
				p, w, _ := tr.MinHolder()
				i++
				if _, err := tr.Update(p, coord.Integer(w.Int+1+i%100)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTrackerFrontier measures the O(P) snapshot (vector copy).
func BenchmarkTrackerFrontier(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("P=%d", n), func(b *testing.B) {
			tr, _, _ := benchTracker(b, n)
			b.ReportAllocs()
			for b.Loop() {
				_ = tr.Frontier()
			}
		})
	}
}
