package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/testutil"
)

// TestCorruptionOnDisk flips bytes inside the value-log files of a closed
// store and reopens it: every read returns the original bytes or
// ErrNotFound, never damaged bytes, and the damage is counted. Chunks are
// whole values, or stored in parts.
func TestCorruptionOnDisk(t *testing.T) {
	t.Run("whole", func(t *testing.T) { testCorruptionOnDisk(t, 64<<10, 96, 12) })         // 6 MiB
	t.Run("parts", func(t *testing.T) { testCorruptionOnDisk(t, 3*partBytes/2+7, 16, 2) }) // 12 MiB
}

// testCorruptionOnDisk stores chunks of n bytes (value-log files of 4 MiB)
// and flips bytes in each file.
func testCorruptionOnDisk(t *testing.T, n, chunks, flips int) {
	s := newTestStore(t)
	var ids []chunk.ID
	for i := range chunks {
		id := testID(fmt.Sprintf("t%d", i%2), "b", fmt.Sprintf("k%d", i), "e", 0)
		ids = append(ids, id)
		mustPut(t, s, id, payload(id, n))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	vlogs, err := filepath.Glob(filepath.Join(s.opts.Dir, "*.vlog"))
	if err != nil || len(vlogs) < 2 {
		t.Fatalf("value-log files: %v, %v; want at least 2", vlogs, err)
	}
	const header = 20 // badger's vlog file header (key id, IV)
	testutil.FlipBytes(t, vlogs, header, flips, rand.New(rand.NewPCG(1, 2)))

	s2, err := Open(s.opts)
	if err != nil {
		t.Fatalf("reopen after corruption: %v", err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	var good, bad int
	lost := map[chunk.ID]bool{}
	for _, id := range ids {
		got, _, err := s2.GetChunk(id)
		switch {
		case err == nil:
			if !bytes.Equal(got, payload(id, n)) {
				t.Fatalf("GetChunk(%v) returned damaged bytes", id)
			}
			good++
		case errors.Is(err, ErrNotFound):
			bad++
			lost[id] = true
		default:
			t.Fatalf("GetChunk(%v): %v, want the bytes or ErrNotFound", id, err)
		}
	}
	st := s2.Stats()
	t.Logf("%d chunks intact, %d detected as damaged; %d checksum failures", good, bad, st.ChecksumFailures)
	if bad == 0 || st.ChecksumFailures == 0 {
		t.Fatalf("no damage detected (%d lost, %d checksum failures)", bad, st.ChecksumFailures)
	}
	if good == 0 {
		t.Fatal("no chunk survived: the test damaged too much to say anything")
	}
	// Damaged entries were deleted; intact ones are now served from RAM.
	for _, id := range ids {
		if lost[id] {
			wantMiss(t, s2, id)
		} else {
			wantChunk(t, s2, id, payload(id, n), "")
		}
	}
	if st := s2.Stats(); st.Chunks != int64(good) {
		t.Errorf("%d chunks indexed, want the %d intact ones", st.Chunks, good)
	}
}
