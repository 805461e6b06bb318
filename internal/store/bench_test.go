package store

import (
	"fmt"
	"testing"

	"github.com/distcache/distcache/internal/chunk"
)

var benchSizes = []int{1 << 20, 4 << 20}

func sizeName(n int) string { return fmt.Sprintf("%dMiB", n>>20) }

func benchIDs(n int) []chunk.ID {
	ids := make([]chunk.ID, n)
	for i := range ids {
		ids[i] = testID("tenant", "bucket", fmt.Sprintf("obj-%d", i), "etag", int64(i))
	}
	return ids
}

func benchGet(b *testing.B, ram int64, want Tier) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			s := newTestStore(b, func(o *Options) {
				o.DiskBytes = 256 << 20
				o.RAMBytes = ram
			})
			ids := benchIDs(8)
			for _, id := range ids {
				mustPut(b, s, id, payload(id, n))
			}
			settle(s)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_, tier, err := s.GetChunk(ids[i%len(ids)])
				if err != nil || tier != want {
					b.Fatalf("GetChunk: %s, %v; want a %s hit", tier, err, want)
				}
			}
		})
	}
}

// BenchmarkGetChunkRAM: hits in the RAM tier.
func BenchmarkGetChunkRAM(b *testing.B) { benchGet(b, 64<<20, TierRAM) }

// BenchmarkGetChunkDisk: hits on disk (value log, through the page cache),
// checksum verified, with the RAM tier disabled.
func BenchmarkGetChunkDisk(b *testing.B) { benchGet(b, 0, TierDisk) }

// BenchmarkPutChunk: puts of new chunks into a full store, so eviction,
// forced flushes and value-log GC are part of the cost.
func BenchmarkPutChunk(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			s := newTestStore(b, func(o *Options) {
				o.DiskBytes = 256 << 20
				o.RAMBytes = 0
			})
			data := payload(testID("t", "b", "k", "e", 0), n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				id := testID("tenant", "bucket", fmt.Sprintf("obj-%d", i), "etag", 0)
				if err := s.PutChunk(id, data); err != nil {
					b.Fatalf("PutChunk: %v", err)
				}
			}
		})
	}
}

// BenchmarkFill is a node's miss as it stores the chunk: the bytes arrive
// (from S3) into a new buffer, which is then stored. "copy" reads into a
// plain buffer and stores it with PutChunk (how fills were stored before
// store.Value); "in place" reads into a Value and stores it with PutValue.
func BenchmarkFill(b *testing.B) {
	const n = 4 << 20
	src := payload(testID("t", "b", "k", "e", 0), n)
	for _, inPlace := range []bool{false, true} {
		name := "copy"
		if inPlace {
			name = "in place"
		}
		b.Run(name, func(b *testing.B) {
			s := newTestStore(b, func(o *Options) {
				o.DiskBytes = 4 << 30 // 256 MiB value-log files, as on a node
				o.RAMBytes = 64 << 20
			})
			b.SetBytes(n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				id := testID("tenant", "bucket", fmt.Sprintf("obj-%d", i), "etag", 0)
				var err error
				if inPlace {
					v := NewValue(n)
					copy(v.Payload(), src) // the body read
					err = s.PutValue(id, v)
				} else {
					buf := make([]byte, n)
					copy(buf, src) // the body read
					err = s.PutChunk(id, buf)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
