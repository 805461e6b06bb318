package ring

import (
	"fmt"
	"testing"
)

// Run: go test -run '^$' -bench . -benchmem ./internal/ring/

func BenchmarkOwner(b *testing.B) {
	for _, n := range []int{3, 16, 64} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			r := mustNew(b, specOf(1, members(n)))
			ids := testIDs()[:1024]
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				_ = r.Owner(ids[i%len(ids)])
				i++
			}
		})
	}
}

func BenchmarkCandidates3(b *testing.B) {
	for _, n := range []int{3, 16, 64} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			r := mustNew(b, specOf(1, members(n)))
			ids := testIDs()[:1024]
			b.Run("Candidates", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					_ = r.Candidates(ids[i%len(ids)], 3)
					i++
				}
			})
			b.Run("AppendCandidates", func(b *testing.B) {
				dst := make([]Member, 0, 3)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					dst = r.AppendCandidates(dst[:0], ids[i%len(ids)], 3)
					i++
				}
			})
		})
	}
}

func BenchmarkPreviousOwner(b *testing.B) {
	spec := specOf(2, members(17))
	spec.Previous = &PreviousRing{Epoch: 1, Members: members(16)}
	r := mustNew(b, spec)
	ids := testIDs()[:1024]
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_, _ = r.PreviousOwner(ids[i%len(ids)])
		i++
	}
}
