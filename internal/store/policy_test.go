package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/distcache/distcache/internal/chunk"
)

// policyChunk is the chunk size of the policy tests: MinDiskBytes holds
// about 150 of them below the live target.
const policyChunk = 64 << 10

func policyStore(t *testing.T, policy Eviction, quota func(string) int64) *Store {
	return newTestStore(t, func(o *Options) {
		o.DiskBytes = MinDiskBytes
		o.RAMBytes = 0
		o.Eviction = policy
		o.TenantQuota = quota
	})
}

// indexed reports whether id is in the index, without counting as a read.
func indexed(s *Store, id chunk.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idx.entries[string(chunkKey(id))] != nil
}

// readThrough is what the node does: a read, and on a miss a put of the
// chunk fetched from S3.
func readThrough(t *testing.T, s *Store, id chunk.ID) {
	t.Helper()
	_, _, err := s.GetChunk(id)
	switch {
	case errors.Is(err, ErrNotFound):
		mustPut(t, s, id, payload(id, policyChunk))
	case err != nil:
		t.Fatalf("GetChunk(%v): %v", id, err)
	}
}

// readHotThenScan reads the hot set through s three times, then the scan
// once.
func readHotThenScan(t *testing.T, s *Store, hot, scan []chunk.ID) {
	t.Helper()
	for range 3 {
		for _, id := range hot {
			readThrough(t, s, id)
		}
	}
	for _, id := range scan {
		readThrough(t, s, id)
	}
}

func chunkIDs(tenant, prefix string, n int) []chunk.ID {
	ids := make([]chunk.ID, n)
	for i := range ids {
		ids[i] = testID(tenant, "b", fmt.Sprintf("%s-%04d", prefix, i), "e", 0)
	}
	return ids
}

func survivors(s *Store, ids []chunk.ID) int {
	n := 0
	for _, id := range ids {
		if indexed(s, id) {
			n++
		}
	}
	return n
}

// TestScanKeepsHotSet: a hot set read a few times, then a scan of twice the
// capacity read through the store once. S3-FIFO keeps (nearly) all of the
// hot set; plain LRU, run as the control, loses all of it, which shows the
// test can tell the policies apart.
func TestScanKeepsHotSet(t *testing.T) {
	for _, tt := range []struct {
		policy  Eviction
		atLeast float64 // share of the hot set that must survive
		atMost  float64
	}{
		{EvictS3FIFO, 0.9, 1},
		{EvictLRU, 0, 0.1},
	} {
		t.Run(string(tt.policy), func(t *testing.T) {
			s := policyStore(t, tt.policy, nil)
			capacity := int(s.liveTarget / policyChunk)
			hot := chunkIDs("t", "hot", capacity/5)
			readHotThenScan(t, s, hot, chunkIDs("t", "scan", 2*capacity))
			got := survivors(s, hot)
			t.Logf("%s: %d of %d hot chunks survived a scan of %d chunks (capacity %d)", tt.policy, got, len(hot), 2*capacity, capacity)
			if share := float64(got) / float64(len(hot)); share < tt.atLeast || share > tt.atMost {
				t.Errorf("%s: %.0f%% of the hot set survived, want %.0f%%..%.0f%%", tt.policy, 100*share, 100*tt.atLeast, 100*tt.atMost)
			}
			for _, id := range hot {
				if indexed(s, id) {
					wantChunk(t, s, id, payload(id, policyChunk), TierDisk)
				}
			}
		})
	}
}

// TestGhostReadmitsToMain: a chunk evicted unread from the small queue and
// fetched again is remembered by the ghost and enters the main queue, so a
// scan that follows does not evict it; a chunk fetched for the first time
// just before the scan (the control) is evicted by it.
func TestGhostReadmitsToMain(t *testing.T) {
	s := policyStore(t, EvictS3FIFO, nil)
	capacity := int(s.liveTarget / policyChunk)
	again := testID("t", "b", "again", "e", 0)
	fresh := testID("t", "b", "fresh", "e", 0)
	readThrough(t, s, again)
	for _, id := range chunkIDs("t", "fill", capacity) {
		readThrough(t, s, id)
	}
	if indexed(s, again) {
		t.Fatal("an unread chunk survived a capacity's worth of new ones")
	}
	readThrough(t, s, again) // a miss, but the ghost remembers it
	readThrough(t, s, fresh)
	s.mu.Lock()
	inMain := s.idx.entries[string(chunkKey(again))].queue == queueMain
	s.mu.Unlock()
	if !inMain {
		t.Fatal("a chunk fetched again after its eviction did not enter the main queue")
	}
	for _, id := range chunkIDs("t", "scan", 2*capacity) {
		readThrough(t, s, id)
	}
	if !indexed(s, again) {
		t.Error("the re-admitted chunk did not survive a scan")
	}
	if indexed(s, fresh) {
		t.Error("a chunk fetched once survived a scan of twice the capacity")
	}
}

// TestQuotaEvictionKeepsReadChunks: a tenant at its quota reads a few
// chunks repeatedly, then scans twice its quota. Quota eviction (CLOCK
// over the tenant's chunks under S3-FIFO) keeps the chunks it read; under
// LRU they go. Another tenant's chunks are never touched either way.
func TestQuotaEvictionKeepsReadChunks(t *testing.T) {
	const quotaChunks = 40
	quota := func(tenant string) int64 {
		if tenant == "a" {
			return quotaChunks * policyChunk
		}
		return 0
	}
	for _, tt := range []struct {
		policy   Eviction
		wantKept bool
	}{
		{EvictS3FIFO, true},
		{EvictLRU, false},
	} {
		t.Run(string(tt.policy), func(t *testing.T) {
			s := policyStore(t, tt.policy, quota)
			other := chunkIDs("b", "other", 10)
			for _, id := range other {
				readThrough(t, s, id)
			}
			hot := chunkIDs("a", "hot", quotaChunks/5)
			readHotThenScan(t, s, hot, chunkIDs("a", "scan", 2*quotaChunks))
			got := survivors(s, hot)
			t.Logf("%s: %d of %d read chunks survived", tt.policy, got, len(hot))
			if kept := got == len(hot); kept != tt.wantKept {
				t.Errorf("%s: %d of %d read chunks survived a scan of twice the quota", tt.policy, got, len(hot))
			}
			if st := s.Stats().Tenants; st["a"].Bytes > quotaChunks*policyChunk || st["b"].Chunks != int64(len(other)) {
				t.Errorf("tenants after the scan: %+v", st)
			}
		})
	}
}

// TestRestartEvictsOldestFirst: after a restart nothing read before counts
// and eviction follows write order, under both policies.
func TestRestartEvictsOldestFirst(t *testing.T) {
	for _, policy := range []Eviction{EvictS3FIFO, EvictLRU} {
		t.Run(string(policy), func(t *testing.T) {
			s := policyStore(t, policy, nil)
			capacity := int(s.liveTarget / policyChunk)
			ids := chunkIDs("t", "k", capacity)
			for _, id := range ids {
				mustPut(t, s, id, payload(id, policyChunk))
			}
			s = reopen(t, s)
			for _, id := range chunkIDs("t", "new", 5) {
				mustPut(t, s, id, payload(id, policyChunk))
			}
			for i, id := range ids {
				if got, want := indexed(s, id), i >= 5; got != want {
					t.Errorf("chunk %d of %d: indexed %v, want %v", i, len(ids), got, want)
				}
			}
		})
	}
}

func TestOpenRejectsUnknownEviction(t *testing.T) {
	_, err := Open(Options{Dir: t.TempDir(), DiskBytes: MinDiskBytes, Eviction: "mru", Logger: testLogger()})
	if err == nil {
		t.Fatal("Open accepted an unknown eviction policy")
	}
}
