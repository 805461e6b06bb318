package store

import (
	"encoding/binary"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/testutil"
)

// testLogger keeps test output readable: badger's warnings about the
// corruption tests inject are expected.
func testLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newTestStore opens a store on a fresh t.TempDir() (unless opts sets Dir)
// and closes it when the test ends.
func newTestStore(t testing.TB, opts ...func(*Options)) *Store {
	t.Helper()
	o := Options{
		Dir:                 t.TempDir(),
		DiskBytes:           64 << 20,
		RAMBytes:            8 << 20,
		Logger:              testLogger(),
		MaintenanceInterval: 50 * time.Millisecond,
	}
	for _, f := range opts {
		f(&o)
	}
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func reopen(t testing.TB, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s2, err := Open(s.opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	return s2
}

func testID(tenant, bucket, key, etag string, index int64) chunk.ID {
	return chunk.ID{Object: chunk.Object{Tenant: tenant, Bucket: bucket, Key: key}, ETag: etag, Size: 1 << 20, Index: index}
}

// pool is random bytes (the same every run) that payloads are cut from.
var pool = testutil.SeededBytes(0x9E3779B97F4A7C15, 9<<20)

// payload returns n (at most 8 MiB) deterministic bytes derived from id, so
// any mix-up between chunks shows: a window of pool chosen by a hash of the
// id, stamped with that hash.
func payload(id chunk.ID, n int) []byte {
	h := fnv.New64a()
	h.Write([]byte(id.String()))
	sum := h.Sum64()
	off := int(sum % uint64(len(pool)-n+1))
	b := make([]byte, n)
	copy(b, pool[off:off+n])
	var stamp [8]byte
	binary.LittleEndian.PutUint64(stamp[:], sum)
	copy(b, stamp[:])
	return b
}

// du measures dir independently of the store: the sum of st_blocks*512 of
// every file and directory, like du(1).
func du(t testing.TB, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // deleted while walking
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		total += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatalf("du: %v", err)
	}
	return total
}
