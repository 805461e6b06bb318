package client_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// benchChunk is the chunk size of the benchmarks: what the B1 hit-path benchmark
// uses, in the 1-8 MiB range of real deployments.
const benchChunk = 4 << 20

// BenchmarkReadAt64KiB reads 64 KiB at random 64 KiB-aligned offsets of a
// 64 MiB object through a 3-node cluster whose nodes hold every chunk in
// RAM: "nodes" crosses mTLS to the owner for each read (a Range within the
// chunk), "nodes-parallel" does so from 8 goroutines per core, "pagecache"
// is served from the client's RAM.
func BenchmarkReadAt64KiB(b *testing.B) { benchReadAt(b, 64<<10) }

// BenchmarkReadAtChunk reads whole 4 MiB chunks, chunk-aligned, the same
// ways.
func BenchmarkReadAtChunk(b *testing.B) { benchReadAt(b, benchChunk) }

func benchReadAt(b *testing.B, size int) {
	const objectSize = 64 << 20
	c := nodecluster.StartWith(b, 3, nodecluster.Options{ChunkSize: benchChunk, Immutable: true, RAMBytes: 128 << 20})
	c.PutDirect("bucket-a", "hot", testutil.RandomBytes(rand.New(rand.NewPCG(1, 1)), objectSize))
	ctx := context.Background()
	for _, mode := range []struct {
		name      string
		pageCache int64
		parallel  bool
	}{{"nodes", 0, false}, {"nodes-parallel", 0, true}, {"pagecache", 256 << 20, false}} {
		b.Run(mode.name, func(b *testing.B) {
			cl, _ := newClient(b, c, c.TenantTLS("team-a"), func(cfg *client.Config) {
				cfg.PageCacheBytes = mode.pageCache
				cfg.ChunkSize = benchChunk
			})
			m, err := cl.Stat(ctx, "bucket-a", "hot")
			testutil.Must(b, err)
			warm := make([]byte, objectSize) // every chunk into the nodes' RAM (and the page cache)
			_, err = cl.ReadAt(ctx, "bucket-a", "hot", m, warm, 0)
			testutil.Must(b, err)
			slots := objectSize / size
			b.SetBytes(int64(size))
			b.ReportAllocs()
			read := func(r *rand.Rand, p []byte) {
				off := int64(r.IntN(slots) * size)
				if _, err := cl.ReadAt(ctx, "bucket-a", "hot", m, p, off); err != nil {
					b.Error(err)
				}
			}
			if mode.parallel {
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					r, p := rand.New(rand.NewPCG(rand.Uint64(), 3)), make([]byte, size)
					for pb.Next() {
						read(r, p)
					}
				})
				return
			}
			r, p := rand.New(rand.NewPCG(2, 3)), make([]byte, size)
			for b.Loop() {
				read(r, p)
			}
		})
	}
}
