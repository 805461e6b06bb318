package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/testutil"
)

func obj(tenant, bucket, key string) chunk.Object {
	return chunk.Object{Tenant: tenant, Bucket: bucket, Key: key}
}

func TestKeyEncodingUnambiguous(t *testing.T) {
	id := func(o chunk.Object, etag string, size, index int64) chunk.ID {
		return chunk.ID{Object: o, ETag: etag, Size: size, Index: index}
	}
	tests := []struct {
		name string
		a, b chunk.ID
	}{
		{"tenant/bucket boundary", id(obj("a", "bc", "k"), "e", 1, 0), id(obj("ab", "c", "k"), "e", 1, 0)},
		{"bucket/key boundary", id(obj("t", "a", "bc"), "e", 1, 0), id(obj("t", "ab", "c"), "e", 1, 0)},
		{"key/etag boundary", id(obj("t", "b", "k1"), "e", 1, 0), id(obj("t", "b", "k"), "1e", 1, 0)},
		{"empty fields shift", id(obj("", "ab", ""), "", 1, 0), id(obj("a", "b", ""), "", 1, 0)},
		{"separator-like bytes", id(obj("t", "b/c", "k"), "e", 1, 0), id(obj("t/b", "c", "k"), "e", 1, 0)},
		{"length byte in name", id(obj("\x01a", "", "k"), "e", 1, 0), id(obj("", "a", "k"), "e", 1, 0)},
		{"other tenant, same bucket and key", id(obj("a", "b", "k"), "e", 1, 0), id(obj("z", "b", "k"), "e", 1, 0)},
		{"chunk size", id(obj("t", "b", "k"), "e", 1<<20, 0), id(obj("t", "b", "k"), "e", 4<<20, 0)},
		{"index", id(obj("t", "b", "k"), "e", 1<<20, 1), id(obj("t", "b", "k"), "e", 1<<20, 256)},
		{"etag", id(obj("t", "b", "k"), "e1", 1, 0), id(obj("t", "b", "k"), "e2", 1, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka, kb := chunkKey(tt.a), chunkKey(tt.b)
			if bytes.Equal(ka, kb) {
				t.Fatalf("%v and %v share key %q", tt.a, tt.b, ka)
			}
			for _, c := range []struct {
				id  chunk.ID
				key []byte
			}{{tt.a, ka}, {tt.b, kb}} {
				p, err := parseChunkKey(c.key)
				if err != nil || p.id != c.id {
					t.Fatalf("parseChunkKey(%q) = %v, %v; want %v", c.key, p.id, err, c.id)
				}
				if prefix := chunkPrefix(c.id.Object); !bytes.Equal(c.key[:p.prefixLen], prefix) {
					t.Fatalf("prefix of %q is %q, want %q", c.key, c.key[:p.prefixLen], prefix)
				}
			}
			// One object's prefix never selects the other's chunks unless
			// they are the same object.
			same := tt.a.Object == tt.b.Object
			if got := bytes.HasPrefix(kb, chunkPrefix(tt.a.Object)); got != same {
				t.Errorf("prefix of %v selects %v: %v, want %v", tt.a.Object, tt.b, got, same)
			}
			if got := bytes.HasPrefix(ka, chunkPrefix(tt.b.Object)); got != same {
				t.Errorf("prefix of %v selects %v: %v, want %v", tt.b.Object, tt.a, got, same)
			}
			if !same && bytes.Equal(metaKey(tt.a.Object), metaKey(tt.b.Object)) {
				t.Errorf("metadata keys of %v and %v collide", tt.a.Object, tt.b.Object)
			}
		})
	}
}

func TestKeyPrefixes(t *testing.T) {
	o := obj("tenant", "bucket", "k")
	k := chunkKey(chunk.ID{Object: o, ETag: "e", Size: 1 << 20, Index: 3})
	if k[0] != typeChunk || metaKey(o)[0] != typeMeta {
		t.Fatalf("type bytes: chunk %q, meta %q", k[0], metaKey(o)[0])
	}
	// The tenant is the first component after the type byte.
	if !bytes.HasPrefix(k, append([]byte{typeChunk, byte(len("tenant"))}, "tenant"...)) {
		t.Errorf("chunk key %q does not start with the tenant", k)
	}
	// Object key "k" is not a prefix of object key "kk".
	if bytes.HasPrefix(chunkKey(chunk.ID{Object: obj("tenant", "bucket", "kk"), ETag: "e", Size: 1}), chunkPrefix(o)) {
		t.Error("prefix of key k selects chunks of key kk")
	}
	for _, bad := range [][]byte{nil, {typeMeta}, {typeChunk}, {typeChunk, 5, 'a'}, append(chunkPrefix(o), 0)} {
		if _, err := parseChunkKey(bad); !errors.Is(err, errBadKey) {
			t.Errorf("parseChunkKey(%q) = %v, want errBadKey", bad, err)
		}
	}
}

func TestChunkValueDetectsCorruption(t *testing.T) {
	key := chunkKey(testID("t", "b", "k", "e", 0))
	data := []byte("some payload bytes, long enough to flip a few bits in")
	v := encodeChunkValue(key, data)
	if got, err := decodeChunkValue(key, v); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	for i := range v {
		for bit := range 8 {
			c := bytes.Clone(v)
			c[i] ^= 1 << bit
			if _, err := decodeChunkValue(key, c); !errors.Is(err, errCorrupt) {
				t.Fatalf("flip of bit %d in byte %d not detected: %v", bit, i, err)
			}
		}
	}
	for n := range len(v) {
		if _, err := decodeChunkValue(key, v[:n]); !errors.Is(err, errCorrupt) {
			t.Fatalf("truncation to %d bytes not detected", n)
		}
	}
	if _, err := decodeChunkValue(chunkKey(testID("t", "b", "k", "e", 1)), v); !errors.Is(err, errCorrupt) {
		t.Fatal("value under the wrong key not detected")
	}
}

// TestStoredValueLen pins storedValueLen, which rebuilds the index without
// reading values, against the badger in go.mod, across the inline/value-log
// threshold and uvarint width changes.
func TestStoredValueLen(t *testing.T) {
	s := newTestStore(t)
	sizes := []int{0, 1, 10, 127, 128, valueThreshold - 1, valueThreshold, valueThreshold + 1, 16383, 16384, 1 << 20, 3<<20 + 7}
	keys := map[string]int{}
	for i, n := range sizes {
		for _, klen := range []int{5, 120, 200} {
			k := append([]byte{typeChunk}, bytes.Repeat([]byte{byte('a' + i)}, klen)...)
			keys[string(k)] = n
			dbUpdate(t, s, func(txn *badger.Txn) error { return txn.Set(k, make([]byte, n)) })
		}
	}
	check := func(when string) {
		err := s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{typeChunk}})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				want := keys[string(item.Key())]
				got, ok := storedValueLen(len(item.Key()), item.EstimatedSize(), item.ValueSize())
				if !ok || got != int64(want) {
					t.Errorf("%s: key len %d: storedValueLen = %d, %v; want %d", when, len(item.Key()), got, ok, want)
				}
			}
			return nil
		})
		testutil.Must(t, err)
	}
	check("memtable")
	s.gcMu.Lock()
	if err := s.forceFlush(); err != nil {
		t.Fatal(err)
	}
	s.gcMu.Unlock()
	check("lsm tables")
}
