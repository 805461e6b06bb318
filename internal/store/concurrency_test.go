package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/distcache/distcache/internal/chunk"
)

// TestConcurrentAccess runs puts, gets, metadata and invalidations from
// many goroutines on a store small enough that eviction, quota eviction,
// forced flushes and value-log GC all run at the same time. Run with -race.
func TestConcurrentAccess(t *testing.T) {
	s := newTestStore(t, func(o *Options) {
		o.DiskBytes = MinDiskBytes
		o.RAMBytes = 1 << 20
		o.TenantQuota = func(tenant string) int64 {
			if tenant == "t0" {
				return 1 << 20
			}
			return 0
		}
	})
	var ids []chunk.ID
	for tenant := range 3 {
		for k := range 4 {
			for _, etag := range []string{"v1", "v2"} {
				for i := range int64(4) {
					ids = append(ids, chunk.ID{
						Object: chunk.Object{Tenant: fmt.Sprintf("t%d", tenant), Bucket: "b", Key: fmt.Sprintf("k%d", k)},
						ETag:   etag, Size: 256 << 10, Index: i,
					})
				}
			}
		}
	}
	size := func(id chunk.ID) int { return 32<<10 + int(id.Index)*64<<10 + len(id.ETag)*1000 }

	const workers, ops = 8, 250
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range ops {
				id := ids[rng.IntN(len(ids))]
				switch r := rng.IntN(100); {
				case r < 50:
					got, _, err := s.GetChunk(id)
					if err == nil && !bytes.Equal(got, payload(id, size(id))) {
						t.Errorf("GetChunk(%v) returned wrong bytes", id)
					} else if err != nil && !errors.Is(err, ErrNotFound) {
						t.Errorf("GetChunk(%v): %v", id, err)
					}
				case r < 85:
					if err := s.PutChunk(id, payload(id, size(id))); err != nil && !errors.Is(err, ErrNoSpace) {
						t.Errorf("PutChunk(%v): %v", id, err)
					}
				case r < 90:
					if err := s.DeleteObject(id.Object); err != nil {
						t.Errorf("DeleteObject(%v): %v", id.Object, err)
					}
				case r < 95:
					if err := s.PutMeta(id.Object, chunk.Meta{ETag: id.ETag, Size: 1}); err != nil {
						t.Errorf("PutMeta: %v", err)
					}
				default:
					if _, err := s.GetMeta(id.Object); err != nil && !errors.Is(err, ErrNotFound) {
						t.Errorf("GetMeta: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()

	st := s.Stats()
	var bytesSum, chunks int64
	for _, ts := range st.Tenants {
		bytesSum += ts.Bytes
		chunks += ts.Chunks
	}
	if bytesSum != st.DiskBytes || chunks != st.Chunks {
		t.Errorf("tenants sum to %d bytes/%d chunks, totals are %d/%d", bytesSum, chunks, st.DiskBytes, st.Chunks)
	}
	if st.Tenants["t0"].Bytes > 1<<20 {
		t.Errorf("tenant t0 holds %d bytes over its 1 MiB quota", st.Tenants["t0"].Bytes)
	}
	if st.Errors != 0 || st.ChecksumFailures != 0 {
		t.Errorf("errors %d, checksum failures %d", st.Errors, st.ChecksumFailures)
	}
	if u := du(t, s.opts.Dir); u > s.opts.DiskBytes {
		t.Errorf("du %d over the bound %d", u, s.opts.DiskBytes)
	}
	// Quiescent: the index and the disk agree exactly (checked on badger
	// itself, so a RAM copy cannot hide a missing chunk), and everything
	// indexed is readable and exact.
	checkConsistent(t, s)
	found := int64(0)
	for _, id := range ids {
		got, _, err := s.GetChunk(id)
		if err == nil {
			found++
			if !bytes.Equal(got, payload(id, size(id))) {
				t.Errorf("GetChunk(%v) returned wrong bytes", id)
			}
		} else if !errors.Is(err, ErrNotFound) {
			t.Errorf("GetChunk(%v): %v", id, err)
		}
	}
	if found != st.Chunks {
		t.Errorf("%d chunks readable, %d indexed", found, st.Chunks)
	}
	t.Logf("puts admitted and live: %d chunks, %d bytes; evictions %d, rejected %d", st.Chunks, st.DiskBytes, st.Evictions, st.Rejected)
}
