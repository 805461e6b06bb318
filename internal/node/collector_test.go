package node

import (
	"bytes"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

// TestCollector cuts bodies written in uneven pieces into chunks holding
// exactly their bytes, keeps at most the limit, and allocates a body of
// known length no more than it needs: a small write-through must not cost
// a chunk's worth of zeroed memory.
func TestCollector(t *testing.T) {
	const size = 1000
	for _, tc := range []struct {
		name           string
		body           int
		expect, limit  int64
		wantChunks     int
		wantCollected  int // bytes in the chunks
		maxAllocPerChk int // capacity of a chunk's payload, 0: not checked
	}{
		{"small, known", 10, 10, 64 * size, 1, 10, 10},
		{"two and a half chunks, known", 2500, 2500, 64 * size, 3, 2500, size},
		{"exact chunks, known", 2000, 2000, 64 * size, 2, 2000, size},
		{"two and a half chunks, unknown", 2500, -1, 64 * size, 3, 2500, 0},
		{"capped", 3500, 3500, 2 * size, 2, 2000, size},
		{"longer than said", 2500, 1500, 64 * size, 3, 2500, 0},
		{"shorter than said", 1200, 2500, 64 * size, 2, 1200, 0},
		{"empty", 0, 0, 64 * size, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := make([]byte, tc.body)
			for i := range body {
				body[i] = byte(i*7 + i/size)
			}
			c := newCollector(size, tc.limit, tc.expect, nil)
			for i, p := 0, body; len(p) > 0; i++ {
				n := min(len(p), 1+(i*337)%700) // uneven writes, across chunk edges
				if k, err := c.Write(p[:n]); k != n || err != nil {
					t.Fatalf("Write = %d, %v", k, err)
				}
				p = p[n:]
			}
			if c.total != int64(tc.body) {
				t.Errorf("total %d, want %d", c.total, tc.body)
			}
			chunks := c.chunks()
			if len(chunks) != tc.wantChunks {
				t.Fatalf("%d chunks, want %d", len(chunks), tc.wantChunks)
			}
			var got []byte
			for i, v := range chunks {
				p := v.Payload()
				if i < len(chunks)-1 && len(p) != size {
					t.Errorf("chunk %d has %d bytes, want a whole chunk", i, len(p))
				}
				if tc.maxAllocPerChk > 0 && cap(p) > tc.maxAllocPerChk {
					t.Errorf("chunk %d: %d bytes allocated for %d", i, cap(p), len(p))
				}
				got = append(got, p...)
			}
			if !bytes.Equal(got, body[:tc.wantCollected]) {
				t.Errorf("chunks hold %d bytes that are not the body's first %d", len(got), tc.wantCollected)
			}
		})
	}
}

// TestCollectorReusesChunkBuffers: whole chunks come from the node's
// chunkBufs and go back to it with recycle, so the next write fills the
// same memory instead of faulting in fresh pages; a partial last chunk and
// buffers beyond what chunkBufs keeps are left alone.
func TestCollectorReusesChunkBuffers(t *testing.T) {
	const size = 1000
	bufs := newChunkBufs(size, 2)
	body := bytes.Repeat([]byte{7}, 2*size+10)
	first := newCollector(size, 64*size, int64(len(body)), bufs)
	_, err := first.Write(body)
	testutil.Must(t, err)
	chunks := first.chunks()
	if len(chunks) != 3 || len(chunks[2].Payload()) != 10 {
		t.Fatalf("%d chunks, want 2 whole ones and 10 bytes", len(chunks))
	}
	first.recycle()
	if len(bufs.free) != 2 {
		t.Fatalf("%d buffers kept, want the 2 whole chunks", len(bufs.free))
	}
	bufs.put(chunks[2]) // not a whole chunk
	if len(bufs.free) != 2 {
		t.Fatalf("a partial chunk was kept")
	}
	second := newCollector(size, 64*size, 2*size, bufs)
	_, err = second.Write(bytes.Repeat([]byte{9}, 2*size))
	testutil.Must(t, err)
	again := second.chunks()
	for i, v := range again {
		if &v.Payload()[0] != &chunks[i].Payload()[0] && &v.Payload()[0] != &chunks[1-i].Payload()[0] {
			t.Errorf("chunk %d is fresh memory, not a recycled buffer", i)
		}
		if !bytes.Equal(v.Payload(), bytes.Repeat([]byte{9}, size)) {
			t.Errorf("chunk %d holds other bytes than the second write's", i)
		}
	}
	if len(bufs.free) != 0 {
		t.Errorf("%d buffers left after taking 2 of 2", len(bufs.free))
	}
}
