package node

import (
	"bytes"
	"testing"
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
			c := newCollector(size, tc.limit, tc.expect)
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
