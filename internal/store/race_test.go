package store

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/distcache/distcache/internal/chunk"
)

// checkConsistent verifies on a quiescent store that the index and badger
// agree exactly: every indexed chunk is on disk with the indexed size and
// verifies, every chunk on disk is indexed, nothing is in flight or reserved,
// and the totals add up. It reads badger directly, so a RAM copy cannot hide
// a chunk missing on disk.
func checkConsistent(t testing.TB, s *Store) {
	t.Helper()
	disk := map[string]int64{}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{typeChunk}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			p, err := decodeChunkValue(k, v)
			if err != nil {
				t.Errorf("chunk %q on disk does not verify: %v", k, err)
				continue
			}
			disk[string(k)] = int64(len(p))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list chunks on disk: %v", err)
	}

	s.mu.Lock()
	inflight := len(s.inflight)
	reserved := s.idx.reserved
	indexed := make(map[string]int64, len(s.idx.entries))
	var sum int64
	for k, e := range s.idx.entries {
		indexed[k] = e.size
		sum += e.size
	}
	total := s.idx.bytes
	tenants := map[string][2]int64{}
	for name, ts := range s.idx.tenants {
		tenants[name] = [2]int64{ts.bytes, ts.chunks}
	}
	var queued int
	for _, q := range []*list{&s.idx.small, &s.idx.main} {
		var n int
		var bytes int64
		for e := q.head; e != nil; e = e.links[linkQueue].next {
			if s.idx.queue(e) != q {
				t.Errorf("entry %q is on the wrong queue", e.key)
			}
			n++
			bytes += e.size
		}
		if bytes != q.bytes {
			t.Errorf("a queue's entries sum to %d bytes, the queue says %d", bytes, q.bytes)
		}
		queued += n
	}
	s.mu.Unlock()

	if inflight != 0 || reserved != 0 {
		t.Errorf("not quiescent: %d keys in flight, %d bytes reserved", inflight, reserved)
	}
	if sum != total || queued != len(indexed) {
		t.Errorf("index: entries sum to %d bytes, total is %d; %d entries, %d on the eviction queues", sum, total, len(indexed), queued)
	}
	perTenant := map[string][2]int64{}
	for k, n := range indexed {
		p, err := parseChunkKey([]byte(k))
		if err != nil {
			t.Errorf("indexed key %q: %v", k, err)
			continue
		}
		c := perTenant[p.id.Tenant]
		perTenant[p.id.Tenant] = [2]int64{c[0] + n, c[1] + 1}
		switch d, ok := disk[k]; {
		case !ok:
			t.Errorf("chunk %v is indexed (%d bytes) but not on disk", p.id, n)
		case d != n:
			t.Errorf("chunk %v is indexed with %d bytes, %d on disk", p.id, n, d)
		}
	}
	for name, c := range tenants {
		if c != perTenant[name] {
			t.Errorf("tenant %s accounts %d bytes/%d chunks, its entries %d/%d", name, c[0], c[1], perTenant[name][0], perTenant[name][1])
		}
	}
	for k, d := range disk {
		if _, ok := indexed[k]; !ok {
			p, _ := parseChunkKey([]byte(k))
			t.Errorf("chunk %v is on disk (%d bytes) but not indexed", p.id, d)
		}
	}
}

// pausePoint stops the first hooked operation that reaches the hook for
// key and holds it there until release is called; later ones pass once it
// is released.
type pausePoint struct {
	key      string
	once     sync.Once
	reached  chan struct{}
	released chan struct{}
}

func newPausePoint(key string) *pausePoint {
	return &pausePoint{key: key, reached: make(chan struct{}), released: make(chan struct{})}
}

// hook is for testHooks; keys other than p.key pass through.
func (p *pausePoint) hook(key string) {
	if key != p.key {
		return
	}
	p.once.Do(func() {
		close(p.reached)
		<-p.released
	})
}

func (p *pausePoint) release() { close(p.released) }

// putAsync starts a PutChunk and returns the channel its result arrives on.
func putAsync(s *Store, id chunk.ID, data []byte) <-chan error {
	errc := make(chan error, 1)
	go func() { errc <- s.PutChunk(id, data) }()
	return errc
}

// TestPutRacingDeleteObject stops a put of a chunk at each step while it
// holds the chunk's claim and runs DeleteObject of its object to completion
// meanwhile. The delete wins (the put was in flight when it was called), and
// the index and badger agree afterwards. Before the fix, a delete that
// listed the chunk after the put's badger write committed deleted it from
// badger while the put went on to index it: an indexed chunk that GetChunk
// could not read (served from RAM until the RAM copy went, then a miss).
func TestPutRacingDeleteObject(t *testing.T) {
	for _, stage := range []string{"before the badger write", "after the badger write"} {
		t.Run(strings.ReplaceAll(stage, " ", "_"), func(t *testing.T) {
			s := newTestStore(t)
			id := testID("t", "b", "k", "e", 0)
			other := testID("t", "b", "k", "e", 1) // same object, stored before
			keep := testID("t", "b", "k2", "e", 0) // another object
			mustPut(t, s, other, payload(other, 4<<10))
			mustPut(t, s, keep, payload(keep, 4<<10))

			p := newPausePoint(string(chunkKey(id)))
			if stage == "before the badger write" {
				s.hooks = &testHooks{putWrite: p.hook}
			} else {
				s.hooks = &testHooks{putIndex: p.hook}
			}
			errc := putAsync(s, id, payload(id, 8<<10))
			<-p.reached
			if err := s.DeleteObject(id.Object); err != nil {
				t.Fatalf("DeleteObject: %v", err)
			}
			p.release()
			if err := <-errc; err != nil {
				t.Fatalf("PutChunk: %v", err)
			}

			checkConsistent(t, s)
			settle(s)
			wantMiss(t, s, id)
			wantMiss(t, s, other)
			wantChunk(t, s, keep, payload(keep, 4<<10), "")
			if st := s.Stats(); st.Chunks != 1 || st.Errors != 0 {
				t.Errorf("Chunks = %d (want 1), Errors = %d", st.Chunks, st.Errors)
			}
			// The chunk can be stored again, and is then served from disk.
			mustPut(t, s, id, payload(id, 8<<10))
			s.ram.Clear()
			wantChunk(t, s, id, payload(id, 8<<10), TierDisk)
			checkConsistent(t, s)
		})
	}
}

// TestDeleteObjectRacingCompletedPut stops DeleteObject after it unindexed
// the object's chunks and before it lists the object on disk, and completes
// a put of a new chunk of the object meanwhile. DeleteObject finds that chunk
// on disk; it must unindex it as well as delete it (before the fix it only
// deleted it, leaving it indexed but gone from disk).
func TestDeleteObjectRacingCompletedPut(t *testing.T) {
	s := newTestStore(t, func(o *Options) { o.RAMBytes = 0 }) // no RAM copy to hide a missing chunk
	old := testID("t", "b", "k", "e", 0)
	id := testID("t", "b", "k", "e", 1)
	mustPut(t, s, old, payload(old, 4<<10))

	p := newPausePoint(string(chunkPrefix(id.Object)))
	s.hooks = &testHooks{deleteList: p.hook}
	errc := make(chan error, 1)
	go func() { errc <- s.DeleteObject(id.Object) }()
	<-p.reached
	mustPut(t, s, id, payload(id, 8<<10)) // completes: nothing holds its key
	p.release()
	if err := <-errc; err != nil {
		t.Fatalf("DeleteObject: %v", err)
	}

	checkConsistent(t, s)
	wantMiss(t, s, old)
	// Either outcome is a valid order for a put racing the delete, as long
	// as the index and the disk agree (checked above) and GetChunk follows.
	if st := s.Stats(); st.Chunks == 1 {
		wantChunk(t, s, id, payload(id, 8<<10), TierDisk)
	} else {
		wantMiss(t, s, id)
	}
	if st := s.Stats(); st.Errors != 0 {
		t.Errorf("Errors = %d", st.Errors)
	}
}

// TestPutRacingPutOfSameChunk: a second put of a chunk whose first put is
// still in flight returns at once (it is dropped), the first one completes,
// and the chunk is stored once.
func TestPutRacingPutOfSameChunk(t *testing.T) {
	s := newTestStore(t)
	id := testID("t", "b", "k", "e", 0)
	p := newPausePoint(string(chunkKey(id)))
	s.hooks = &testHooks{putIndex: p.hook}
	errc := putAsync(s, id, payload(id, 8<<10))
	<-p.reached
	if err := s.PutChunk(id, payload(id, 8<<10)); err != nil {
		t.Fatalf("second PutChunk: %v", err)
	}
	p.release()
	if err := <-errc; err != nil {
		t.Fatalf("PutChunk: %v", err)
	}
	checkConsistent(t, s)
	s.ram.Clear()
	wantChunk(t, s, id, payload(id, 8<<10), TierDisk)
	if st := s.Stats(); st.Chunks != 1 {
		t.Errorf("Chunks = %d, want 1", st.Chunks)
	}
}

// TestPutDeleteChurnConsistent hammers a few chunks of two objects with
// concurrent puts, gets and DeleteObject calls, under a tenant quota small
// enough that puts also evict, and checks after each burst that the index
// and the disk agree. It does not depend on timing: any interleaving must
// leave them consistent.
func TestPutDeleteChurnConsistent(t *testing.T) {
	const quota = 128 << 10
	s := newTestStore(t, func(o *Options) {
		o.DiskBytes = MinDiskBytes
		o.RAMBytes = 64 << 10
		o.TenantQuota = func(string) int64 { return quota }
	})
	var ids []chunk.ID
	for _, key := range []string{"k0", "k1"} {
		for i := range int64(6) {
			ids = append(ids, testID("t", "b", key, "e", i))
		}
	}
	size := func(id chunk.ID) int { return 16<<10 + int(id.Index)<<10 }
	data := map[chunk.ID][]byte{}
	for _, id := range ids {
		data[id] = payload(id, size(id))
	}
	const bursts, workers, ops = 20, 6, 200
	for b := range bursts {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(b), uint64(w)))
				for range ops {
					id := ids[rng.IntN(len(ids))]
					switch r := rng.IntN(10); {
					case r < 6:
						if err := s.PutChunk(id, data[id]); err != nil && !errors.Is(err, ErrNoSpace) {
							t.Errorf("PutChunk(%v): %v", id, err)
						}
					case r < 8:
						if err := s.DeleteObject(id.Object); err != nil {
							t.Errorf("DeleteObject(%v): %v", id.Object, err)
						}
					default:
						got, _, err := s.GetChunk(id)
						if err == nil && !bytes.Equal(got, data[id]) {
							t.Errorf("GetChunk(%v) returned wrong bytes", id)
						} else if err != nil && !errors.Is(err, ErrNotFound) {
							t.Errorf("GetChunk(%v): %v", id, err)
						}
					}
				}
			})
		}
		wg.Wait()
		checkConsistent(t, s)
		if t.Failed() {
			t.Fatalf("inconsistent after burst %d", b)
		}
	}
	st := s.Stats()
	if st.Errors != 0 || st.ChecksumFailures != 0 {
		t.Errorf("errors %d, checksum failures %d", st.Errors, st.ChecksumFailures)
	}
	if st.Tenants["t"].Bytes > quota {
		t.Errorf("tenant holds %d bytes over its quota %d", st.Tenants["t"].Bytes, quota)
	}
	if st.Evictions == 0 {
		t.Error("no evictions: the test no longer races puts and deletes with eviction")
	}
}
