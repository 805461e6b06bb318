package store

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/testutil"
)

func mustPut(t testing.TB, s *Store, id chunk.ID, data []byte) {
	t.Helper()
	if err := s.PutChunk(id, data); err != nil {
		t.Fatalf("PutChunk(%v): %v", id, err)
	}
}

// encodeChunkValue is what PutChunk stores under key for payload.
func encodeChunkValue(key, payload []byte) []byte {
	v := NewValue(len(payload))
	copy(v.Payload(), payload)
	return v.seal(key)
}

func wantChunk(t testing.TB, s *Store, id chunk.ID, data []byte, tier Tier) {
	t.Helper()
	got, gotTier, err := s.GetChunk(id)
	if err != nil {
		t.Fatalf("GetChunk(%v): %v", id, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("GetChunk(%v): %d bytes differ from the %d put", id, len(got), len(data))
	}
	if tier != "" && gotTier != tier {
		t.Fatalf("GetChunk(%v) tier = %s, want %s", id, gotTier, tier)
	}
}

func wantMiss(t testing.TB, s *Store, id chunk.ID) {
	t.Helper()
	if got, tier, err := s.GetChunk(id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetChunk(%v) = %d bytes from %s, %v; want ErrNotFound", id, len(got), tier, err)
	}
}

// settle waits until the RAM tier has applied buffered sets and deletes.
func settle(s *Store) {
	if s.ram != nil {
		s.ram.Wait()
	}
}

// tierCase is a store with a RAM tier of ram bytes (0: none) and the tier
// its reads come from.
type tierCase struct {
	name string
	ram  int64
	tier Tier
}

// forEachTier runs test, as a subtest, on a new store with a RAM tier and
// on one without.
func forEachTier(t *testing.T, test func(t *testing.T, s *Store, tc tierCase)) {
	for _, tc := range []tierCase{{"ram", 8 << 20, TierRAM}, {"disk only", 0, TierDisk}} {
		t.Run(tc.name, func(t *testing.T) {
			test(t, newTestStore(t, func(o *Options) { o.RAMBytes = tc.ram }), tc)
		})
	}
}

func TestRoundTripByTier(t *testing.T) {
	forEachTier(t, func(t *testing.T, s *Store, tc tierCase) {
		id := testID("t", "b", "k", "e1", 0)
		data := payload(id, 300<<10)
		wantMiss(t, s, id)
		mustPut(t, s, id, data)
		settle(s)
		wantChunk(t, s, id, data, tc.tier)

		tiny := testID("t", "b", "k", "e1", 1)
		mustPut(t, s, tiny, []byte("x")) // below the value threshold: inline in the LSM tree
		settle(s)
		wantChunk(t, s, tiny, []byte("x"), tc.tier)

		o := id.Object
		if _, err := s.GetMeta(o); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetMeta before PutMeta: %v", err)
		}
		m := chunk.Meta{Size: 1 << 30, ETag: "e1", ContentType: "application/octet-stream",
			LastModified: time.Unix(1700000000, 0).UTC(), FetchedAt: time.Unix(1700000100, 5).UTC()}
		if err := s.PutMeta(o, m); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetMeta(o); err != nil || !got.LastModified.Equal(m.LastModified) || got.Size != m.Size ||
			got.ETag != m.ETag || got.ContentType != m.ContentType || !got.FetchedAt.Equal(m.FetchedAt) {
			t.Fatalf("GetMeta = %+v, %v; want %+v", got, err, m)
		}

		st := s.Stats()
		if st.Chunks != 2 || st.DiskBytes != int64(len(data)+1) || st.Misses != 1 {
			t.Errorf("stats = %+v", st)
		}
		if tc.ram > 0 && (st.RAMHits != 2 || st.RAMBytes != int64(len(data)+1)) {
			t.Errorf("ram stats: hits %d bytes %d", st.RAMHits, st.RAMBytes)
		}
		if tc.ram == 0 && st.DiskHits != 2 {
			t.Errorf("disk hits = %d, want 2", st.DiskHits)
		}
		if st.Tenants["t"] != (TenantStats{Bytes: st.DiskBytes, Chunks: 2}) {
			t.Errorf("tenant stats = %+v", st.Tenants)
		}
	})
}

func TestStatsReportCapacities(t *testing.T) {
	for _, ram := range []int64{8 << 20, 0} {
		s := newTestStore(t, func(o *Options) { o.DiskBytes, o.RAMBytes = 48<<20, ram })
		if st := s.Stats(); st.DiskCapacity != 48<<20 || st.RAMCapacity != ram {
			t.Errorf("RAMBytes %d: Stats reports disk capacity %d and RAM capacity %d, want %d and %d",
				ram, st.DiskCapacity, st.RAMCapacity, 48<<20, ram)
		}
	}
}

func TestRAMEvictionFallsBackToDisk(t *testing.T) {
	const n = 256 << 10
	s := newTestStore(t, func(o *Options) { o.RAMBytes = n }) // room for one chunk
	a, b := testID("t", "b", "a", "e", 0), testID("t", "b", "b", "e", 0)
	da, db := payload(a, n), payload(b, n)
	mustPut(t, s, a, da)
	settle(s)
	wantChunk(t, s, a, da, TierRAM)
	mustPut(t, s, b, db) // evicts a from RAM
	settle(s)
	wantChunk(t, s, a, da, TierDisk) // ... and promotes it again
	settle(s)
	wantChunk(t, s, a, da, TierRAM)
	wantChunk(t, s, b, db, TierDisk)
	if st := s.Stats(); st.RAMBytes > n {
		t.Errorf("RAMBytes %d over the %d bound", st.RAMBytes, n)
	}
}

func TestDeleteObject(t *testing.T) {
	s := newTestStore(t)
	target := obj("a", "bc", "k")
	others := []chunk.Object{
		obj("ab", "c", "k"),  // length prefixes: not the same object
		obj("a", "bc", "kk"), // the target's key is a prefix of this key
		obj("a", "bc", ""),
		obj("z", "bc", "k"), // another tenant, same bucket and key
	}
	var targetIDs []chunk.ID
	for _, etag := range []string{"v1", "v2"} {
		for _, size := range []int64{1 << 20, 4 << 20} {
			for i := range int64(3) {
				targetIDs = append(targetIDs, chunk.ID{Object: target, ETag: etag, Size: size, Index: i})
			}
		}
	}
	var otherIDs []chunk.ID
	for _, o := range others {
		otherIDs = append(otherIDs, chunk.ID{Object: o, ETag: "v1", Size: 1 << 20, Index: 0})
	}
	for _, id := range append(append([]chunk.ID{}, targetIDs...), otherIDs...) {
		mustPut(t, s, id, payload(id, 64<<10))
	}
	for _, o := range append([]chunk.Object{target}, others...) {
		if err := s.PutMeta(o, chunk.Meta{ETag: "v1", Size: 1}); err != nil {
			t.Fatal(err)
		}
	}
	settle(s)
	wantChunk(t, s, targetIDs[0], payload(targetIDs[0], 64<<10), TierRAM)

	if err := s.DeleteObject(target); err != nil {
		t.Fatal(err)
	}
	settle(s)
	for _, id := range targetIDs {
		if _, ok := s.ram.Get(string(chunkKey(id))); ok {
			t.Errorf("%v still in RAM", id)
		}
		wantMiss(t, s, id)
	}
	if _, err := s.GetMeta(target); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetMeta after DeleteObject: %v", err)
	}
	for i, id := range otherIDs {
		wantChunk(t, s, id, payload(id, 64<<10), "")
		if _, err := s.GetMeta(others[i]); err != nil {
			t.Errorf("GetMeta(%v): %v", others[i], err)
		}
	}
	st := s.Stats()
	if st.Chunks != int64(len(otherIDs)) || st.DiskBytes != int64(len(otherIDs))*64<<10 {
		t.Errorf("after delete: %d chunks, %d bytes", st.Chunks, st.DiskBytes)
	}

	// Gone from disk too, not only from the index.
	s = reopen(t, s)
	for _, id := range targetIDs {
		wantMiss(t, s, id)
	}
	if st := s.Stats(); st.Chunks != int64(len(otherIDs)) {
		t.Errorf("after restart: %d chunks", st.Chunks)
	}
}

// Deleting an object the store holds nothing of (every write of a new key
// invalidates it) commits nothing; one with only metadata loses it.
func TestDeleteObjectAbsentCommitsNothing(t *testing.T) {
	s := newTestStore(t)
	held := obj("a", "b", "held")
	if err := s.PutMeta(held, chunk.Meta{ETag: "v1", Size: 1}); err != nil {
		t.Fatal(err)
	}
	before := s.db.MaxVersion()
	if err := s.DeleteObject(obj("a", "b", "new")); err != nil {
		t.Fatal(err)
	}
	if after := s.db.MaxVersion(); after != before {
		t.Errorf("deleting an absent object committed (badger version %d -> %d)", before, after)
	}
	if err := s.DeleteObject(held); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMeta(held); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetMeta after deleting an object with only metadata: %v", err)
	}
}

// TestDeleteObjectRemovesUnindexedChunks covers chunks badger has but the
// index does not (left by a delete that failed).
func TestDeleteObjectRemovesUnindexedChunks(t *testing.T) {
	s := newTestStore(t)
	id := testID("t", "b", "k", "e", 0)
	key := chunkKey(id)
	dbUpdate(t, s, func(txn *badger.Txn) error { return txn.Set(key, encodeChunkValue(key, []byte("stray"))) })
	if err := s.DeleteObject(id.Object); err != nil {
		t.Fatal(err)
	}
	if err := s.db.View(func(txn *badger.Txn) error { _, err := txn.Get(key); return err }); !errors.Is(err, badger.ErrKeyNotFound) {
		t.Fatalf("stray chunk still in badger: %v", err)
	}
}

func TestLRUEviction(t *testing.T) {
	const n = 1 << 20
	s := newTestStore(t, func(o *Options) { o.RAMBytes = 0 }) // live target 0.6*64 MiB: 38 chunks
	fit := int(s.liveTarget / n)
	ids := make([]chunk.ID, fit+3)
	for i := range ids {
		ids[i] = testID("t", "b", fmt.Sprintf("k%d", i), "e", 0)
	}
	for _, id := range ids[:fit] {
		mustPut(t, s, id, payload(id, n))
	}
	wantChunk(t, s, ids[0], payload(ids[0], n), TierDisk) // ids[0] is now the most recent
	for _, id := range ids[fit:] {
		mustPut(t, s, id, payload(id, n))
	}
	// Three puts evicted the three least recently used: 1, 2 and 3.
	for i, id := range ids {
		if i >= 1 && i <= 3 {
			wantMiss(t, s, id)
		} else {
			wantChunk(t, s, id, payload(id, n), "")
		}
	}
	if st := s.Stats(); st.Evictions != 3 || st.DiskBytes > s.liveTarget {
		t.Errorf("evictions %d, live %d (target %d)", st.Evictions, st.DiskBytes, s.liveTarget)
	}
}

func TestTenantQuota(t *testing.T) {
	const n = 256 << 10
	var quotaA atomic.Int64
	quotaA.Store(4 * n)
	s := newTestStore(t, func(o *Options) {
		o.RAMBytes = 0
		o.TenantQuota = func(tenant string) int64 {
			if tenant == "a" {
				return quotaA.Load()
			}
			return 0
		}
	})
	var bIDs []chunk.ID
	for i := range 3 {
		id := testID("b", "bucket", fmt.Sprintf("k%d", i), "e", 0)
		bIDs = append(bIDs, id)
		mustPut(t, s, id, payload(id, n))
	}
	var aIDs []chunk.ID
	for i := range 7 {
		id := testID("a", "bucket", fmt.Sprintf("k%d", i), "e", 0)
		aIDs = append(aIDs, id)
		mustPut(t, s, id, payload(id, n))
		if i == 4 {
			// a holds 1..4; touch its least recently used chunk, so the
			// next puts evict 2 and 3 rather than 1.
			wantChunk(t, s, aIDs[1], payload(aIDs[1], n), "")
		}
	}
	st := s.Stats()
	if st.Tenants["a"] != (TenantStats{Bytes: 4 * n, Chunks: 4}) {
		t.Errorf("tenant a: %+v, want 4 chunks", st.Tenants["a"])
	}
	if st.Tenants["b"] != (TenantStats{Bytes: 3 * n, Chunks: 3}) {
		t.Errorf("tenant b: %+v, want its 3 chunks untouched", st.Tenants["b"])
	}
	for _, id := range bIDs {
		wantChunk(t, s, id, payload(id, n), "")
	}
	for i, id := range aIDs {
		if i == 1 || i >= 4 {
			wantChunk(t, s, id, payload(id, n), "")
		} else {
			wantMiss(t, s, id)
		}
	}

	// A chunk larger than the whole quota is refused, not stored.
	big := testID("a", "bucket", "big", "e", 0)
	if err := s.PutChunk(big, payload(big, 5*n)); !errors.Is(err, ErrNoSpace) {
		t.Errorf("put over the quota: %v, want ErrNoSpace", err)
	}
	if st := s.Stats(); st.Rejected != 1 {
		t.Errorf("Rejected = %d, want 1", st.Rejected)
	}

	// A lowered quota applies on the next put ...
	quotaA.Store(2 * n)
	id := testID("a", "bucket", "k10", "e", 0)
	mustPut(t, s, id, payload(id, n))
	if got := s.Stats().Tenants["a"]; got.Chunks != 2 {
		t.Errorf("after lowering the quota: tenant a holds %d chunks, want 2", got.Chunks)
	}
	// ... and maintenance enforces it without one.
	quotaA.Store(n)
	s.maintain(true)
	if got := s.Stats().Tenants["a"]; got.Chunks != 1 {
		t.Errorf("after maintenance: tenant a holds %d chunks, want 1", got.Chunks)
	}
	if got := s.Stats().Tenants["b"]; got.Chunks != 3 {
		t.Errorf("tenant b lost chunks to a's quota: %+v", got)
	}
}

func TestOversizedChunkRejected(t *testing.T) {
	s := newTestStore(t, func(o *Options) { o.DiskBytes = MinDiskBytes })
	id := testID("t", "b", "k", "e", 0)
	if err := s.PutChunk(id, make([]byte, s.liveTarget+1)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("PutChunk over the live target: %v, want ErrNoSpace", err)
	}
	if st := s.Stats(); st.Rejected != 1 || st.Chunks != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestRestartIsWarm(t *testing.T) {
	s := newTestStore(t)
	sizes := []int{0, 1, valueThreshold - valueHeaderLen - 1, valueThreshold - valueHeaderLen, valueThreshold, 64 << 10, 1 << 20}
	var ids []chunk.ID
	for i, n := range sizes {
		for _, tenant := range []string{"t1", "t2"} {
			id := testID(tenant, "b", fmt.Sprintf("k%d", i), "e", int64(i))
			ids = append(ids, id)
			mustPut(t, s, id, payload(id, n))
		}
	}
	m := chunk.Meta{Size: 42, ETag: "e", LastModified: time.Unix(1700000000, 0).UTC()}
	if err := s.PutMeta(ids[0].Object, m); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()

	s = reopen(t, s)
	after := s.Stats()
	if after.DiskBytes != before.DiskBytes || after.Chunks != before.Chunks || !maps.Equal(after.Tenants, before.Tenants) {
		t.Fatalf("accounting not rebuilt:\nbefore %+v\nafter  %+v", before, after)
	}
	for i, id := range ids {
		wantChunk(t, s, id, payload(id, sizes[i/2]), TierDisk)
	}
	if got, err := s.GetMeta(ids[0].Object); err != nil || got.Size != 42 || !got.LastModified.Equal(m.LastModified) {
		t.Fatalf("GetMeta after restart = %+v, %v", got, err)
	}
	if st := s.Stats(); st.DiskHits != uint64(len(ids)) || st.ChecksumFailures != 0 {
		t.Errorf("after restart: %d disk hits, %d checksum failures", st.DiskHits, st.ChecksumFailures)
	}
}

// TestRestartKeepsLRUOrder: the index is rebuilt in write order.
func TestRestartKeepsLRUOrder(t *testing.T) {
	const n = 1 << 20
	s := newTestStore(t, func(o *Options) { o.RAMBytes = 0 })
	fit := int(s.liveTarget / n)
	var ids []chunk.ID
	for i := range fit {
		id := testID("t", "b", fmt.Sprintf("k%03d", fit-i), "e", 0) // key order is the reverse of write order
		ids = append(ids, id)
		mustPut(t, s, id, payload(id, n))
	}
	s = reopen(t, s)
	extra := testID("t", "b", "extra", "e", 0)
	mustPut(t, s, extra, payload(extra, n))
	wantMiss(t, s, ids[0]) // the first written is the first evicted
	for _, id := range ids[1:] {
		wantChunk(t, s, id, payload(id, n), "")
	}
}

func TestUndecodableValues(t *testing.T) {
	s := newTestStore(t, func(o *Options) { o.RAMBytes = 0 })
	cases := map[string]func(v []byte) []byte{
		"truncated header":  func(v []byte) []byte { return v[:3] },
		"truncated payload": func(v []byte) []byte { return v[:len(v)-1] },
		"unknown version":   func(v []byte) []byte { v[0] = 9; return v },
		"flipped payload":   func(v []byte) []byte { v[len(v)/2] ^= 0x10; return v },
		"empty":             func([]byte) []byte { return nil },
	}
	i := 0
	for name, damage := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			id := testID("t", "b", "k", "e", int64(i))
			data := payload(id, 4<<10)
			mustPut(t, s, id, data)
			key := chunkKey(id)
			bad := damage(encodeChunkValue(key, data))
			dbUpdate(t, s, func(txn *badger.Txn) error { return txn.Set(key, bad) })
			failures := s.Stats().ChecksumFailures
			wantMiss(t, s, id)
			if got := s.Stats().ChecksumFailures; got != failures+1 {
				t.Errorf("ChecksumFailures = %d, want %d", got, failures+1)
			}
			if err := s.db.View(func(txn *badger.Txn) error { _, err := txn.Get(key); return err }); !errors.Is(err, badger.ErrKeyNotFound) {
				t.Errorf("corrupt entry not deleted: %v", err)
			}
			wantMiss(t, s, id)
			mustPut(t, s, id, data) // refetched
			wantChunk(t, s, id, data, TierDisk)
		})
	}
}

func TestBadgerErrorsAreReturned(t *testing.T) {
	s := newTestStore(t)
	id := testID("t", "b", "k", "e", 0)
	mustPut(t, s, id, payload(id, 4<<10))
	s.ram.Clear()
	// Close badger behind the store's back: every badger call now fails.
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetChunk(id); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("GetChunk on a failing badger: %v, want a badger error", err)
	}
	other := testID("t", "b", "k2", "e", 0)
	if err := s.PutChunk(other, payload(other, 4<<10)); err == nil || errors.Is(err, ErrNoSpace) {
		t.Errorf("PutChunk on a failing badger: %v, want a badger error", err)
	}
	if err := s.PutMeta(id.Object, chunk.Meta{}); err == nil {
		t.Error("PutMeta on a failing badger succeeded")
	}
	if _, err := s.GetMeta(id.Object); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("GetMeta on a failing badger: %v", err)
	}
	if st := s.Stats(); st.Chunks != 1 {
		t.Errorf("Chunks = %d: a failed put must not be indexed, a failed read must not drop the chunk", st.Chunks)
	}
	// A failed invalidation still unindexes the object, so it is not served.
	if err := s.DeleteObject(id.Object); err == nil {
		t.Error("DeleteObject on a failing badger succeeded")
	}
	if st := s.Stats(); st.Errors < 5 || st.Chunks != 0 {
		t.Errorf("Errors = %d (want >= 5), Chunks = %d (want 0)", st.Errors, st.Chunks)
	}
}

func TestClosedStore(t *testing.T) {
	s := newTestStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	id := testID("t", "b", "k", "e", 0)
	if _, _, err := s.GetChunk(id); !errors.Is(err, ErrClosed) {
		t.Errorf("GetChunk after Close: %v", err)
	}
	if err := s.PutChunk(id, []byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("PutChunk after Close: %v", err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	_ = s.Stats()
}

func TestOpenValidatesOptions(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]Options{
		"no dir":        {DiskBytes: 1 << 30},
		"tiny bound":    {Dir: dir, DiskBytes: MinDiskBytes - 1},
		"negative ram":  {Dir: dir, DiskBytes: 1 << 30, RAMBytes: -1},
		"fraction of 1": {Dir: dir, DiskBytes: 1 << 30, LiveFraction: 1},
	} {
		if s, err := Open(o); err == nil {
			_ = s.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}
}

// TestPutSameIDDifferentLength: a chunk ID put again with other bytes of
// another length replaces the old version everywhere, with exact accounting.
func TestPutSameIDDifferentLength(t *testing.T) {
	s := newTestStore(t)
	id := testID("t", "b", "k", "e", 0)
	mustPut(t, s, id, payload(id, 10<<10))
	newer := payload(testID("t", "b", "other", "e", 0), 20<<10)
	mustPut(t, s, id, newer)
	settle(s)
	wantChunk(t, s, id, newer, TierRAM)
	if st := s.Stats(); st.Chunks != 1 || st.DiskBytes != 20<<10 || st.Evictions != 0 {
		t.Fatalf("stats = %+v", st)
	}
	s = reopen(t, s)
	wantChunk(t, s, id, newer, TierDisk)
	if st := s.Stats(); st.Chunks != 1 || st.DiskBytes != 20<<10 {
		t.Fatalf("after restart: stats = %+v", st)
	}
}

// TestPutValueKeepsTheBuffer: PutValue stores the bytes read into a
// Value's payload without copying them (the RAM tier hands out that very
// buffer), and the disk copy is the same, checksum verified.
func TestPutValueKeepsTheBuffer(t *testing.T) {
	forEachTier(t, func(t *testing.T, s *Store, tc tierCase) {
		id := testID("t", "b", "k", "e1", 0)
		data := payload(id, 300<<10)
		v := NewValue(len(data))
		copy(v.Payload(), data)
		if err := s.PutValue(id, v); err != nil {
			t.Fatal(err)
		}
		settle(s)
		wantChunk(t, s, id, data, tc.tier)
		got, _, _ := s.GetChunk(id)
		if same := &got[0] == &v.Payload()[0]; same != (tc.ram > 0) {
			t.Errorf("GetChunk returned the put buffer: %v, want %v", same, tc.ram > 0)
		}
		if tc.ram > 0 {
			s.ram.Clear() // the disk copy next
			wantChunk(t, s, id, data, TierDisk)
		}
	})
}

// TestPutValueOnDiskKeepsNoReference: PutValueOnDisk stores the chunk on
// disk only and holds on to nothing of the Value, which its caller reuses:
// bytes written into it afterwards change nothing stored, whole values and
// chunks in parts alike, and the first read comes from disk even with a
// RAM tier (putting a stored chunk again does not bring it to RAM either).
func TestPutValueOnDiskKeepsNoReference(t *testing.T) {
	forEachTier(t, func(t *testing.T, s *Store, tc tierCase) {
		for i, size := range []int{300 << 10, 2*partBytes + 5} {
			id := testID("t", "b", "k", "e1", int64(i))
			data := payload(id, size)
			v := NewValue(len(data))
			copy(v.Payload(), data)
			testutil.Must(t, s.PutValueOnDisk(id, v))
			testutil.Must(t, s.PutValueOnDisk(id, v)) // already stored: touched only
			settle(s)
			for j := range v.Payload() {
				v.Payload()[j] = 0xee // the caller reusing the buffer
			}
			wantChunk(t, s, id, data, TierDisk)
			if tc.ram > 0 {
				settle(s)
				wantChunk(t, s, id, data, TierRAM) // a read brings it to RAM
			}
		}
	})
}

// dbUpdate writes to s's badger behind the store's back, as its own writes
// do: holding writeGate shared, so that a forced flush of the maintenance
// goroutine (badger's DropPrefix, which refuses concurrent writes) does not
// fail it.
func dbUpdate(t *testing.T, s *Store, fn func(*badger.Txn) error) {
	t.Helper()
	if err := s.update(fn); err != nil {
		t.Fatal(err)
	}
}

func TestReplaceMetaOnlyReplacesTheVersionItNames(t *testing.T) {
	s := newTestStore(t)
	o := chunk.Object{Tenant: "t", Bucket: "b", Key: "k"}
	v1 := chunk.Meta{Size: 10, ETag: `"v1"`, ContentType: "a/b", LastModified: time.Unix(100, 0).UTC()}
	exact := v1
	exact.ContentType, exact.LastModified = "a/c", time.Unix(101, 0).UTC()

	if changed, err := s.ReplaceMeta(o, v1.ETag, &exact); err != nil || changed {
		t.Fatalf("ReplaceMeta of nothing stored = %v, %v; want no change", changed, err)
	}
	if _, err := s.GetMeta(o); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReplaceMeta created metadata: %v", err)
	}
	if err := s.PutMeta(o, v1); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.ReplaceMeta(o, `"v0"`, &exact); err != nil || changed {
		t.Fatalf("ReplaceMeta of another version = %v, %v; want no change", changed, err)
	}
	if changed, err := s.ReplaceMeta(o, v1.ETag, &exact); err != nil || !changed {
		t.Fatalf("ReplaceMeta of the stored version = %v, %v; want a change", changed, err)
	}
	if got, err := s.GetMeta(o); err != nil || got.ContentType != "a/c" || !got.LastModified.Equal(exact.LastModified) {
		t.Fatalf("GetMeta = %+v, %v; want %+v", got, err, exact)
	}
	if changed, err := s.ReplaceMeta(o, `"v2"`, nil); err != nil || changed {
		t.Fatalf("deleting another version = %v, %v; want no change", changed, err)
	}
	if changed, err := s.ReplaceMeta(o, v1.ETag, nil); err != nil || !changed {
		t.Fatalf("deleting the stored version = %v, %v; want a change", changed, err)
	}
	if _, err := s.GetMeta(o); !errors.Is(err, ErrNotFound) {
		t.Fatalf("metadata still there: %v", err)
	}
}

// TestReplaceMetaLosesToAWriteMeanwhile: a PutMeta or DeleteObject that
// commits between ReplaceMeta's read of the version it replaces and its own
// commit stands; ReplaceMeta changes nothing. (Before badger's conflict
// detection was on, ReplaceMeta wrote over the newer version, and over a
// deletion brought the deleted object's metadata back.)
func TestReplaceMetaLosesToAWriteMeanwhile(t *testing.T) {
	o := chunk.Object{Tenant: "t", Bucket: "b", Key: "k"}
	v1 := chunk.Meta{Size: 10, ETag: `"v1"`, ContentType: "a/b", LastModified: time.Unix(100, 0).UTC()}
	v2 := chunk.Meta{Size: 20, ETag: `"v2"`, ContentType: "a/b", LastModified: time.Unix(200, 0).UTC()}
	confirmed := v1
	confirmed.ContentType = "a/c"
	for _, tc := range []struct {
		name      string
		meanwhile func(s *Store) error
		want      *chunk.Meta // nil: no metadata
	}{
		{"PutMeta", func(s *Store) error { return s.PutMeta(o, v2) }, &v2},
		{"DeleteObject", func(s *Store) error { return s.DeleteObject(o) }, nil},
	} {
		for _, replacement := range []*chunk.Meta{&confirmed, nil} {
			t.Run(fmt.Sprintf("%s/replace with %v", tc.name, replacement != nil), func(t *testing.T) {
				s := newTestStore(t, func(o *Options) { o.MaintenanceInterval = time.Hour })
				if err := s.PutMeta(o, v1); err != nil {
					t.Fatal(err)
				}
				var hookErr error
				s.hooks = &testHooks{replaceRead: func(string) { hookErr = tc.meanwhile(s) }}
				if changed, err := s.ReplaceMeta(o, v1.ETag, replacement); err != nil || changed {
					t.Errorf("ReplaceMeta = %v, %v; want no change", changed, err)
				}
				if hookErr != nil {
					t.Fatal(hookErr)
				}
				got, err := s.GetMeta(o)
				switch {
				case tc.want == nil && !errors.Is(err, ErrNotFound):
					t.Errorf("GetMeta = %+v, %v; want ErrNotFound", got, err)
				case tc.want != nil && (err != nil || got.ETag != tc.want.ETag || got.Size != tc.want.Size):
					t.Errorf("GetMeta = %+v, %v; want %+v", got, err, *tc.want)
				}
			})
		}
	}
}
