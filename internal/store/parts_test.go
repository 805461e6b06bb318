package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/testutil"
)

// diskKeyCount counts the badger keys under prefix.
func diskKeyCount(t *testing.T, s *Store, prefix []byte) int {
	t.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	testutil.Must(t, err)
	return n
}

func noRAM(o *Options) { o.RAMBytes = 0 }

// TestChunksInParts stores chunks longer than a part in parts and reads
// them back from disk, before and after a restart, and deletes them whole.
func TestChunksInParts(t *testing.T) {
	s := newTestStore(t, noRAM)
	sizes := map[string]int{
		"one part":       partBytes,
		"a byte over":    partBytes + 1,
		"four parts":     3*partBytes + 100,
		"eight parts":    8 * partBytes,
		"small, a value": 100,
	}
	var total int64
	for name, n := range sizes {
		id := testID("t", "b", name, "e", 0)
		mustPut(t, s, id, payload(id, n))
		total += int64(n)
		want := 1 + (n-1)/partBytes
		if n <= partBytes {
			want = 1
		} else {
			want++ // the chunk key holds the header
		}
		if got := diskKeyCount(t, s, chunkKey(id)); got != want {
			t.Errorf("%s (%d bytes): %d keys on disk, want %d", name, n, got, want)
		}
		wantChunk(t, s, id, payload(id, n), TierDisk)
	}
	s = reopen(t, s)
	if st := s.Stats(); st.DiskBytes != total || st.Chunks != int64(len(sizes)) {
		t.Errorf("after restart: %d chunks, %d bytes indexed; want %d, %d", st.Chunks, st.DiskBytes, len(sizes), total)
	}
	for name, n := range sizes {
		id := testID("t", "b", name, "e", 0)
		wantChunk(t, s, id, payload(id, n), TierDisk)
		if err := s.DeleteObject(id.Object); err != nil {
			t.Fatal(err)
		}
		wantMiss(t, s, id)
		if got := diskKeyCount(t, s, chunkPrefix(id.Object)); got != 0 {
			t.Errorf("%s: %d keys left on disk after DeleteObject", name, got)
		}
	}
}

// TestEvictedChunksLeaveNoParts fills a store several times over with
// chunks in parts: every chunk evicted takes its parts with it, and every
// chunk kept has all of them.
func TestEvictedChunksLeaveNoParts(t *testing.T) {
	s := newTestStore(t, noRAM)
	const n = 5*partBytes/2 + 3 // three parts
	var ids []chunk.ID
	for i := range 96 { // 240 MiB into a 64 MiB bound
		id := testID("t", "b", fmt.Sprintf("k%d", i), "e", 0)
		ids = append(ids, id)
		if err := s.PutChunk(id, payload(id, n)); err != nil && !errors.Is(err, ErrNoSpace) {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Evictions == 0 {
		t.Fatalf("no evictions (%d chunks kept): the test does not test eviction", st.Chunks)
	}
	if got, want := diskKeyCount(t, s, []byte{typeChunk}), 4*int(st.Chunks); got != want {
		t.Errorf("%d chunk and part keys on disk for %d chunks, want %d", got, st.Chunks, want)
	}
	kept := 0
	for _, id := range ids {
		if got, _, err := s.GetChunk(id); err == nil {
			kept++
			if string(got) != string(payload(id, n)) {
				t.Fatalf("chunk %v: wrong bytes", id)
			}
		}
	}
	if kept != int(st.Chunks) || s.Stats().ChecksumFailures != 0 {
		t.Errorf("%d chunks read back of %d indexed, %d checksum failures", kept, st.Chunks, s.Stats().ChecksumFailures)
	}
}

// TestChunkPartsDamaged: a part with other bytes, a missing part or a
// header left without its parts is never served; a stray part is deleted
// at the next start.
func TestChunkPartsDamaged(t *testing.T) {
	const n = 2*partBytes + 10 // three parts
	set := func(t *testing.T, s *Store, k, v []byte) {
		dbUpdate(t, s, func(txn *badger.Txn) error { return txn.Set(k, v) })
	}
	del := func(t *testing.T, s *Store, k []byte) {
		dbUpdate(t, s, func(txn *badger.Txn) error { return txn.Delete(k) })
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, s *Store, key []byte)
	}{
		{"part with other bytes", func(t *testing.T, s *Store, key []byte) {
			set(t, s, partKey(key, 1), make([]byte, partBytes))
		}},
		{"part cut short", func(t *testing.T, s *Store, key []byte) {
			set(t, s, partKey(key, 2), []byte{1, 2, 3})
		}},
		{"part missing", func(t *testing.T, s *Store, key []byte) { del(t, s, partKey(key, 1)) }},
		{"last part missing", func(t *testing.T, s *Store, key []byte) { del(t, s, partKey(key, 2)) }},
		{"header damaged", func(t *testing.T, s *Store, key []byte) {
			set(t, s, key, append([]byte{partsVersion}, make([]byte, partsHeaderLen-1)...))
		}},
		{"header with another length", func(t *testing.T, s *Store, key []byte) {
			h := []byte{partsVersion, 0, 0, 0, 0}
			h = binary.BigEndian.AppendUint32(h, n+1) // still three parts
			h = binary.BigEndian.AppendUint32(h, partBytes)
			set(t, s, key, h)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newTestStore(t, noRAM)
			id := testID("t", "b", "k", "e", 0)
			mustPut(t, s, id, payload(id, n))
			c.damage(t, s, chunkKey(id))
			wantMiss(t, s, id)
			if st := s.Stats(); st.ChecksumFailures != 1 || st.Chunks != 0 {
				t.Errorf("%d checksum failures, %d chunks indexed; want 1, 0", st.ChecksumFailures, st.Chunks)
			}
			if got := diskKeyCount(t, s, chunkPrefix(id.Object)); got != 0 {
				t.Errorf("%d keys left on disk", got)
			}
			// Damaged before a restart: the rebuilt index does not serve it either.
			mustPut(t, s, id, payload(id, n))
			c.damage(t, s, chunkKey(id))
			s = reopen(t, s)
			wantMiss(t, s, id)
			if got := diskKeyCount(t, s, chunkPrefix(id.Object)); got != 0 {
				t.Errorf("after restart: %d keys left on disk", got)
			}
		})
	}

	t.Run("stray parts", func(t *testing.T) {
		s := newTestStore(t, noRAM)
		before := testID("t", "b", "a", "e", 0) // its key comes right before the stray parts
		mustPut(t, s, before, payload(before, 100))
		id := testID("t", "b", "k", "e", 0)
		mustPut(t, s, id, payload(id, n))
		del(t, s, chunkKey(id)) // as a delete cut short between transactions
		s = reopen(t, s)
		if got := diskKeyCount(t, s, chunkPrefix(id.Object)); got != 0 {
			t.Errorf("%d stray parts left on disk after a restart", got)
		}
		if st := s.Stats(); st.Chunks != 1 || st.DiskBytes != 100 {
			t.Errorf("%d chunks, %d bytes indexed; want the other chunk's 1, 100", st.Chunks, st.DiskBytes)
		}
		wantChunk(t, s, before, payload(before, 100), TierDisk)
	})
}

// TestWholeValueOverAPart reads a chunk longer than a part stored as one
// value, as stores written before parts hold them.
func TestWholeValueOverAPart(t *testing.T) {
	s := newTestStore(t, noRAM)
	id := testID("t", "b", "k", "e", 0)
	data := payload(id, 4*partBytes)
	v := NewValue(len(data))
	copy(v.Payload(), data)
	key := chunkKey(id)
	dbUpdate(t, s, func(txn *badger.Txn) error { return txn.Set(key, v.seal(key)) })
	s = reopen(t, s)
	if st := s.Stats(); st.DiskBytes != int64(len(data)) {
		t.Errorf("%d bytes indexed, want %d", st.DiskBytes, len(data))
	}
	wantChunk(t, s, id, data, TierDisk)
}

// TestLargestChunkInParts: a chunk of the largest chunk size a node takes
// (64 MiB, 128 parts) fits one badger transaction on the smallest memtable.
func TestLargestChunkInParts(t *testing.T) {
	s := newTestStore(t, noRAM, func(o *Options) { o.DiskBytes = 256 << 20 }) // 1 MiB memtables
	id := testID("t", "b", "k", "e", 0)
	data := make([]byte, 64<<20)
	for off := 0; off < len(data); off += 8 << 20 {
		copy(data[off:], payload(id, 8<<20))
		data[off] = byte(off >> 23) // parts differ
	}
	mustPut(t, s, id, data)
	if got := diskKeyCount(t, s, chunkKey(id)); got != 1+len(data)/partBytes {
		t.Errorf("%d keys on disk, want %d", got, 1+len(data)/partBytes)
	}
	wantChunk(t, s, id, data, TierDisk)
}
